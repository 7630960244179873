"""A streams group's topology and its configuration against the broker's topics (KIP-1071).

`StreamsTopology` is the topology a member sent (and the StreamsGroupTopology record keeps). `configure` does
what Kafka's InternalTopicManager does on each change of the topology or of the topics: every source topic must
exist (else MISSING_SOURCE_TOPICS), repartition topics get their partition count (given, or the largest of the
subtopology writing into them, iterated until fixed), copartition groups are enforced (INCORRECTLY_PARTITIONED
_TOPICS), changelog topics get the largest partition count of their subtopology's source topics, and internal
topics that do not exist yet are to be created (MISSING_INTERNAL_TOPICS until they are). A topology that
cannot be configured at all raises TopologyInvalid (STREAMS_INVALID_TOPOLOGY).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.java_hash import java_hash_order

# Heartbeat status codes (Kafka's StreamsGroupHeartbeatResponse.Status).
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5
MISSING_CLIENT_TAGS = 6

PartitionCount = Callable[[str], "int | None"]


class TopologyInvalid(Exception):
    """STREAMS_INVALID_TOPOLOGY with Kafka's message."""


class TopicConfigurationError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[TopicInfo, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[TopicInfo, ...]
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]

    def copartition_topic_sets(self) -> list[set[str]]:
        out = []
        for sources, _regex, repartitions in self.copartition_groups:
            names = {self.source_topics[i] for i in sources if 0 <= i < len(self.source_topics)}
            names |= {self.repartition_source_topics[i].name for i in repartitions
                      if 0 <= i < len(self.repartition_source_topics)}
            out.append(names)
        return out


@dataclass(frozen=True)
class StreamsTopology:
    epoch: int
    subtopologies: Mapping[str, Subtopology]

    @classmethod
    def from_wire(cls, t: Mapping[str, Any]) -> StreamsTopology:
        """From a heartbeat's Topology or a StreamsGroupTopology record value (same field names)."""
        subs = {}
        for s in t["subtopologies"]:
            subs[s["subtopology_id"]] = Subtopology(
                s["subtopology_id"], tuple(s["source_topics"]), tuple(s.get("source_topic_regex") or ()),
                tuple(_topic_info(x) for x in s["state_changelog_topics"]), tuple(s["repartition_sink_topics"]),
                tuple(_topic_info(x) for x in s["repartition_source_topics"]),
                tuple((tuple(g["source_topics"]), tuple(g.get("source_topic_regex") or ()),
                       tuple(g["repartition_source_topics"])) for g in s["copartition_groups"]))
        return cls(t["epoch"], subs)

    def to_record(self) -> dict[str, Any]:
        def info(x: TopicInfo) -> dict[str, Any]:
            return {"name": x.name, "partitions": x.partitions, "replication_factor": x.replication_factor,
                    "topic_configs": [{"key": k, "value": v} for k, v in x.configs]}
        return {"epoch": self.epoch, "subtopologies": [
            {"subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
             "source_topic_regex": list(s.source_topic_regex),
             "state_changelog_topics": [info(x) for x in s.state_changelog_topics],
             "repartition_sink_topics": list(s.repartition_sink_topics),
             "repartition_source_topics": [info(x) for x in s.repartition_source_topics],
             "copartition_groups": [{"source_topics": list(a), "source_topic_regex": list(b),
                                     "repartition_source_topics": list(c)} for a, b, c in s.copartition_groups]}
            for s in self.subtopologies.values()]}

    def required_topics(self) -> set[str]:
        out: set[str] = set()
        for s in self.subtopologies.values():
            out.update(s.source_topics)
            out.update(x.name for x in s.repartition_source_topics)
            out.update(x.name for x in s.state_changelog_topics)
        return out

    def describe(self) -> dict[str, Any]:
        """StreamsGroupDescribe's Topology of a topology not (yet) configured: as sent, sorted."""
        return {"epoch": self.epoch, "subtopologies": [
            {"subtopology_id": sid, "source_topics": sorted(s.source_topics),
             "repartition_sink_topics": sorted(s.repartition_sink_topics),
             "state_changelog_topics": sorted((_described(x) for x in s.state_changelog_topics),
                                              key=lambda d: d["name"]),
             "repartition_source_topics": sorted((_described(x) for x in s.repartition_source_topics),
                                                 key=lambda d: d["name"])}
            for sid, s in sorted(self.subtopologies.items())]}


def _topic_info(x: Mapping[str, Any]) -> TopicInfo:
    return TopicInfo(x["name"], x["partitions"], x["replication_factor"],
                     tuple((c["key"], c["value"]) for c in x.get("topic_configs") or ()))


def _described(x: TopicInfo) -> dict[str, Any]:
    return {"name": x.name, "partitions": x.partitions, "replication_factor": x.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in x.configs]}


@dataclass(frozen=True)
class InternalTopic:
    """An internal topic as the group expects it (its partition count decided)."""

    name: str
    partitions: int
    replication_factor: int  # 0: the broker's default
    configs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ConfiguredSubtopology:
    number_of_tasks: int
    source_topics: frozenset[str]
    repartition_source_topics: Mapping[str, InternalTopic]
    repartition_sink_topics: frozenset[str]
    state_changelog_topics: Mapping[str, InternalTopic]

    def is_stateful(self) -> bool:
        return bool(self.state_changelog_topics)

    def describe(self, sid: str) -> dict[str, Any]:
        def info(t: InternalTopic) -> dict[str, Any]:
            return {"name": t.name, "partitions": t.partitions, "replication_factor": t.replication_factor,
                    "topic_configs": [{"key": k, "value": v} for k, v in t.configs]}
        return {"subtopology_id": sid, "source_topics": sorted(self.source_topics),
                "repartition_sink_topics": sorted(self.repartition_sink_topics),
                "repartition_source_topics": sorted((info(t) for t in self.repartition_source_topics.values()),
                                                    key=lambda d: d["name"]),
                "state_changelog_topics": sorted((info(t) for t in self.state_changelog_topics.values()),
                                                 key=lambda d: d["name"])}


@dataclass(frozen=True)
class ConfiguredTopology:
    epoch: int
    subtopologies: Mapping[str, ConfiguredSubtopology] | None  # None: the topic configuration failed
    to_create: Sequence[InternalTopic] = ()  # missing internal topics, in Kafka's (hash map) order
    error: TopicConfigurationError | None = None

    @property
    def ready(self) -> bool:
        return self.subtopologies is not None and self.error is None

    def describe(self) -> dict[str, Any]:
        assert self.subtopologies is not None
        return {"epoch": self.epoch, "subtopologies": [s.describe(sid)
                                                      for sid, s in sorted(self.subtopologies.items())]}


def summarize(topics: Sequence[str]) -> str:
    if not topics:
        return "<none>"
    shown = ", ".join(topics[:3])
    return shown + (f" and {len(topics) - 3} additional topics" if len(topics) > 3 else "")


def configure(topology: StreamsTopology, partition_count: PartitionCount) -> ConfiguredTopology:
    """The topology against the topics `partition_count` knows (None: no such topic). Raises TopologyInvalid."""
    try:
        missing = sorted({t for s in topology.subtopologies.values() for t in s.source_topics
                          if partition_count(t) is None})
        if missing:
            raise TopicConfigurationError(MISSING_SOURCE_TOPICS, f"Source topics {summarize(missing)} are missing.")
        decided: dict[str, int] = {}

        def count(topic: str) -> int | None:
            n = partition_count(topic)
            return n if n is not None else decided.get(topic)

        decided.update(_repartition_counts(topology, count))
        _enforce_copartitioning(topology, count, decided)
        for s in topology.subtopologies.values():
            sizes = [count(t) for t in (*s.source_topics, *(x.name for x in s.repartition_source_topics))]
            if not sizes:
                raise TopologyInvalid(f"No source topics found for subtopology {s.subtopology_id}")
            for x in s.state_changelog_topics:
                decided[x.name] = max(n or 0 for n in sizes)
        configured = {sid: _configured(s, count, decided) for sid, s in sorted(topology.subtopologies.items())}
        to_create: dict[str, InternalTopic] = {}
        for c in configured.values():
            for t in (*c.repartition_source_topics.values(), *c.state_changelog_topics.values()):
                to_create[t.name] = t
        for name in topology.required_topics():
            existing = partition_count(name)
            if existing is not None:
                expected = to_create.pop(name, None)
                if expected is not None and existing != expected.partitions:
                    raise TopicConfigurationError(
                        INCORRECTLY_PARTITIONED_TOPICS, f"Existing topic {name} has different number of "
                        f"partitions: expected {expected.partitions}, found {existing}")
        order = java_hash_order(to_create)
        missing_internal = [to_create[n] for n in order]
        error = None
        if missing_internal:
            error = TopicConfigurationError(MISSING_INTERNAL_TOPICS,
                                            f"Internal topics are missing: {summarize(order)}")
        return ConfiguredTopology(topology.epoch, configured, missing_internal, error)
    except TopicConfigurationError as e:
        return ConfiguredTopology(topology.epoch, None, (), e)


def _configured(s: Subtopology, count: Callable[[str], int | None], decided: Mapping[str, int]
                ) -> ConfiguredSubtopology:
    tasks = max(count(t) or 0 for t in (*s.source_topics, *(x.name for x in s.repartition_source_topics)))

    def internal(x: TopicInfo) -> InternalTopic:
        return InternalTopic(x.name, x.partitions or decided[x.name], x.replication_factor, x.configs)

    return ConfiguredSubtopology(tasks, frozenset(s.source_topics),
                                 {x.name: internal(x) for x in s.repartition_source_topics},
                                 frozenset(s.repartition_sink_topics),
                                 {x.name: internal(x) for x in s.state_changelog_topics})


def _repartition_counts(topology: StreamsTopology, count: Callable[[str], int | None]) -> dict[str, int]:
    """Kafka's RepartitionTopics: a repartition topic without a fixed count gets the largest count of the
    source topics of a subtopology writing into it, iterated until every one is known."""
    counts: dict[str, int] = {x.name: x.partitions for s in topology.subtopologies.values()
                              for x in s.repartition_source_topics if x.partitions != 0}
    while True:
        needed = progress = False
        for s in topology.subtopologies.values():
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                candidates = [counts[x.name] for x in s.repartition_source_topics if x.name in counts]
                candidates += [n for t in s.source_topics if (n := count(t)) is not None]
                if candidates:
                    counts[sink] = max(candidates)
                    progress = True
                else:
                    needed = True
        if needed and not progress:
            raise TopologyInvalid("Failed to compute number of partitions for all repartition topics. There may be "
                                  "loops in the topology that cannot be resolved.")
        if not needed:
            break
    for s in topology.subtopologies.values():
        if any(x.name not in counts for x in s.repartition_source_topics):
            raise TopologyInvalid("Failed to compute number of partitions for all repartition topics, because a "
                                  "repartition source topic is never used as a sink topic.")
    return counts


def _enforce_copartitioning(topology: StreamsTopology, count: Callable[[str], int | None],
                            decided: dict[str, int]) -> None:
    """Kafka's CopartitionedTopicsEnforcer over every copartition group."""
    fixed = {x.name for s in topology.subtopologies.values() for x in s.repartition_source_topics if x.partitions}
    flexible = {x.name for s in topology.subtopologies.values() for x in s.repartition_source_topics
                if not x.partitions}
    for s in topology.subtopologies.values():
        for group in s.copartition_topic_sets():
            if not group:
                continue
            repartition = {t: count(t) or 0 for t in group if t in fixed or t in flexible}
            others = {t: count(t) or 0 for t in group if t not in repartition}
            if set(repartition) == group:
                if fixed:
                    first = next(iter(fixed))
                    n = count(first) or 0
                    if any((count(t) or 0) != n for t in fixed):
                        raise TopicConfigurationError(
                            INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have the same number of "
                            f"partitions: [{_java_map(repartition)}]")
                else:
                    n = max(repartition.values(), default=0)
                    if n == 0:
                        raise TopologyInvalid("All topics in the copartition group had undefined partition number: "
                                              f"[{', '.join(java_hash_order(repartition))}]")
            else:
                values = list(others.values())
                n = values[0]
                if any(v != n for v in values):
                    raise TopicConfigurationError(
                        INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have the same number of "
                        f"partitions: [{_java_map(others)}]")
            for t, have in repartition.items():
                decided[t] = n
                if t in fixed and have != n:
                    raise TopicConfigurationError(
                        INCORRECTLY_PARTITIONED_TOPICS, f"Number of partitions [{have}] of repartition topic [{t}] "
                        f"doesn't match number of partitions [{n}] of the source topic.")


def _java_map(m: Mapping[str, int]) -> str:
    """A sorted map as Java's TreeMap.toString prints it, without the braces."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(m.items())) + "}"


def invalid_topology_reason(topology: Mapping[str, Any]) -> str | None:
    for s in topology["subtopologies"]:
        for x in s["state_changelog_topics"]:
            if x["partitions"] != 0:
                return (f"Changelog topic {x['name']} must have an undefined partition count, but it is set to "
                        f"{x['partitions']}.")
    return None
