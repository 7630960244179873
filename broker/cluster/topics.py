"""The topic registry: names, topic ids, partition counts and per-topic config overrides.

Pure state. Every change is expressed as a metadata record (see `broker.cluster.journal`) and applied through
`apply()`, both when it happens and when the journal is replayed on start, so the two paths cannot drift.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")  # fullmatch: "$" would let a final newline through
# Kafka's internal topics (Topic.isInternal): clients may not write them and Metadata flags them internal.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# The KRaft metadata log's name: never a topic (its partition 0 directory is the metadata journal's).
CLUSTER_METADATA_TOPIC = "__cluster_metadata"

# Metadata record types, numbered as Kafka's KRaft metadata records.
TOPIC_RECORD = 2
PARTITION_RECORD = 3
CONFIG_RECORD = 4
REMOVE_TOPIC_RECORD = 9
FEATURE_LEVEL_RECORD = 12
PRODUCER_IDS_RECORD = 15

TOPIC_RESOURCE = 2  # ConfigResource type for topics
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
CLIENT_METRICS_RESOURCE = 16  # client-metrics subscriptions (KIP-714)


class TopicError(Exception):
    """A request about topics failed with a Kafka error code (and Kafka's message, None where it has none)."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int = 0
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate, with its messages."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif not _LEGAL_TOPIC_NAME.fullmatch(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return
    raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")


def _collision_key(name: str) -> str:
    # Kafka forbids topics whose names differ only by '.' vs '_' (they collide in metric names).
    return name.replace(".", "_")


class TopicRegistry:
    def __init__(self) -> None:
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._collisions: dict[str, str] = {}
        # Names that a RemoveTopicRecord removed (and not created again): their leftover directories may go.
        self.removed_names: set[str] = set()
        self.next_producer_id = 0
        # Dynamic broker configs (IncrementalAlterConfigs, AlterConfigs on the BROKER resource), name -> value:
        # the cluster-wide defaults (resource name "") and each broker's own (resource name = its id).
        self.broker_configs: dict[str, str] = {}
        self.node_configs: dict[str, dict[str, str]] = {}
        # Group config overrides (IncrementalAlterConfigs on the GROUP resource), group id -> name -> value.
        self.group_configs: dict[str, dict[str, str]] = {}
        # Finalized feature levels changed by UpdateFeatures (FeatureLevelRecord), name -> level.
        self.feature_levels: dict[str, int] = {}
        # Client-metrics subscriptions (the CLIENT_METRICS resource), subscription name -> name -> value.
        self.client_metrics_configs: dict[str, dict[str, str]] = {}
        # Bumped by every applied record: lets caches keyed on topic metadata (regex subscriptions) see changes.
        self.version = 0

    # --- queries -------------------------------------------------------------------------------------------
    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def all(self) -> list[TopicInfo]:
        return [self._by_name[n] for n in sorted(self._by_name)]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self._by_name)

    # --- validation (no state change) ----------------------------------------------------------------------
    def check_new_topic(self, name: str) -> None:
        validate_topic_name(name)
        if name == CLUSTER_METADATA_TOPIC:
            # Kafka's answer (ControllerApis.createTopics): INVALID_REQUEST, whatever the authorization.
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
        if name in self._by_name:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        other = self._collisions.get(_collision_key(name))
        if other is not None:
            raise TopicError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {other}",
            )

    # --- records ---------------------------------------------------------------------------------------------
    def apply(self, record_type: int, value) -> None:
        """Apply one metadata record (a decoded value Container or dict with snake_case keys)."""
        self.version += 1
        info: TopicInfo | None
        if record_type == TOPIC_RECORD:
            info = TopicInfo(value["name"], value["topic_id"])
            self._by_name[info.name] = info
            self._by_id[info.topic_id] = info
            self._collisions[_collision_key(info.name)] = info.name
            self.removed_names.discard(info.name)
        elif record_type == PARTITION_RECORD:
            info = self._by_id.get(value["topic_id"])
            if info is not None:
                info.num_partitions = max(info.num_partitions, value["partition_id"] + 1)
        elif record_type == CONFIG_RECORD:
            if value["resource_type"] == TOPIC_RESOURCE:
                info = self._by_name.get(value["resource_name"])
                if info is not None:
                    if value["value"] is None:
                        info.configs.pop(value["name"], None)
                    else:
                        info.configs[value["name"]] = value["value"]
            elif value["resource_type"] in (GROUP_RESOURCE, CLIENT_METRICS_RESOURCE):
                table = self.group_configs if value["resource_type"] == GROUP_RESOURCE else self.client_metrics_configs
                overrides = table.setdefault(value["resource_name"], {})
                if value["value"] is None:
                    overrides.pop(value["name"], None)
                    if not overrides:
                        del table[value["resource_name"]]
                else:
                    overrides[value["name"]] = value["value"]
            elif value["resource_type"] == BROKER_RESOURCE:
                layer = self.broker_configs if not value["resource_name"] else \
                    self.node_configs.setdefault(value["resource_name"], {})
                if value["value"] is None:
                    layer.pop(value["name"], None)
                else:
                    layer[value["name"]] = value["value"]
        elif record_type == REMOVE_TOPIC_RECORD:
            info = self._by_id.pop(value["topic_id"], None)
            if info is not None:
                self._by_name.pop(info.name, None)
                self._collisions.pop(_collision_key(info.name), None)
                self.removed_names.add(info.name)
        elif record_type == FEATURE_LEVEL_RECORD:
            self.feature_levels[value["name"]] = value["feature_level"]
        elif record_type == PRODUCER_IDS_RECORD:
            self.next_producer_id = max(self.next_producer_id, value["next_producer_id"])
