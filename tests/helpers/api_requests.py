"""A request body for each API key that the authorization tests send
(tests/integration/security/test_authorization.py and the differential walk over every served API,
tests/differential/test_authorization_walk.py).

REQUESTS holds the APIs with ACL checks, UNCHECKED_REQUESTS the others. Bodies name the topic "t", the group "g"
and the transactional id "x" (and the topic id TOPIC_ID); `substitute` puts real ones in. Fields left out take their
defaults; the highest version the broker serves is used, except where MAX_VERSION says.
"""

from __future__ import annotations

import uuid

TOPIC_ID = uuid.uuid4()
MEMBER = "m" * 22

# api key -> request body (fields left out take their defaults); the highest version the broker serves is used.
REQUESTS: dict[int, dict] = {
    0: {"acks": -1, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}]},
    1: {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1000, "topics": [
        {"topic": "t", "topic_id": TOPIC_ID, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                              "partition_max_bytes": 1000}]}]},
    2: {"replica_id": -1, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
    3: {"topics": [{"name": "t"}], "allow_auto_topic_creation": True},
    8: {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
    9: {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}],
        "groups": [{"group_id": "g", "topics": [{"name": "t", "topic_id": TOPIC_ID, "partition_indexes": [0]}]}]},
    10: {"key": "g", "key_type": 0, "coordinator_keys": ["g"]},
    11: {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
         "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]},
    12: {"group_id": "g", "generation_id": 1, "member_id": "m"},
    13: {"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]},
    14: {"group_id": "g", "generation_id": 1, "member_id": "m", "protocol_type": "consumer", "protocol_name": "range",
         "assignments": []},
    15: {"groups": ["g"]},
    19: {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 1000},
    20: {"topics": [{"name": "t"}], "topic_names": ["t"], "timeout_ms": 1000},
    21: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 1000},
    22: {"transactional_id": None, "transaction_timeout_ms": 1000},
    23: {"topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
    24: {"v3_and_below_transactional_id": "x", "v3_and_below_producer_id": 0, "v3_and_below_producer_epoch": 0,
         "v3_and_below_topics": [{"name": "t", "partitions": [0]}],
         "transactions": [{"transactional_id": "x", "producer_id": 0, "producer_epoch": 0, "verify_only": False,
                           "topics": [{"name": "t", "partitions": [0]}]}]},
    25: {"transactional_id": "x", "producer_id": 0, "producer_epoch": 0, "group_id": "g"},
    26: {"transactional_id": "x", "producer_id": 0, "producer_epoch": 0, "committed": False},
    27: {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
                      "topics": [{"name": "t", "partition_indexes": [0]}]}]},
    28: {"transactional_id": "x", "group_id": "g", "producer_id": 0, "producer_epoch": 0,
         "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                  "committed_metadata": ""}]}]},
    29: {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1, "permission_type": 1},
    30: {"creations": [{"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:x",
                        "host": "*", "operation": 3, "permission_type": 3}]},
    31: {"filters": [{"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1, "permission_type": 1}]},
    32: {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]},
    33: {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms",
                                                                               "value": "1000"}]}],
         "validate_only": False},
    34: {"dirs": [{"path": "/x", "topics": [{"name": "t", "partitions": [0]}]}]},
    35: {"topics": None},
    37: {"topics": [{"name": "t", "count": 2, "assignments": None}], "timeout_ms": 1000},
    42: {"groups_names": ["g"]},
    47: {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
    43: {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}], "timeout_ms": 1000},
    45: {"timeout_ms": 1000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
    46: {"timeout_ms": 1000, "topics": None},
    44: {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}]},
    48: {"components": [], "strict": False},
    49: {"entries": [{"entity": [{"entity_type": "user", "entity_name": "u"}],
                      "ops": [{"key": "producer_byte_rate", "value": 1000.0, "remove": False}]}],
         "validate_only": False},
    50: {"users": None},
    51: {"deletions": [], "upsertions": [{"name": "u", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16,
                                         "salted_password": b"p" * 32}]},
    65: {"transactional_ids": ["x"]},
    55: {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
    57: {"timeout_ms": 1000, "feature_updates": [{"feature": "group.version", "max_version_level": 1,
                                                  "allow_downgrade": False, "upgrade_type": 1}],
         "validate_only": False},
    61: {"topics": [{"name": "t", "partition_indexes": [0]}]},
    68: {"group_id": "g", "member_id": MEMBER, "member_epoch": 0, "rebalance_timeout_ms": 10000,
         "subscribed_topic_names": ["t"], "topic_partitions": []},
    69: {"group_ids": ["g"]},
    74: {},
    75: {"topics": [{"name": "t"}], "response_partition_limit": 10},
    76: {"group_id": "g", "member_id": MEMBER, "member_epoch": 0, "subscribed_topic_names": ["t"]},
    77: {"group_ids": ["g"]},
    78: {"group_id": "g", "member_id": MEMBER, "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 1,
         "max_bytes": 1000, "max_records": 10, "batch_size": 10, "topics": []},
    79: {"group_id": "g", "member_id": MEMBER, "share_session_epoch": 1, "topics": []},
    83: {"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition": 0}]}]},
    84: {"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition": 0}]}]},
    85: {"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition": 0}]}]},
    86: {"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition": 0}]}]},
    87: {"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition": 0}]}]},
    88: {"group_id": "g", "member_id": MEMBER, "member_epoch": 0, "endpoint_information_epoch": 0,
         "rebalance_timeout_ms": 30000, "active_tasks": [], "standby_tasks": [], "warmup_tasks": [],
         "process_id": "p", "client_tags": [], "topology": {"epoch": 1, "subtopologies": [
             {"subtopology_id": "0", "source_topics": ["t"], "source_topic_regex": [], "state_changelog_topics": [],
              "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}},
    89: {"group_ids": ["g"]},
    90: {"groups": [{"group_id": "g", "topics": None}]},
    91: {"group_id": "g", "topics": [{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
    92: {"group_id": "g", "topics": [{"topic_name": "t"}]},
}


# Produce (v12) and Fetch (v12) by name: an unknown topic id would be answered UNKNOWN_TOPIC_ID before any ACL
# (as Kafka). AddPartitionsToTxn v4+ is the brokers' form (CLUSTER_ACTION, see
# test_add_partitions_v4_needs_cluster_action).
MAX_VERSION = {0: 12, 1: 12, 24: 3}


def error_codes(value) -> set[int]:
    """Every *error_code field anywhere in a decoded response."""
    found: set[int] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("error_code") and isinstance(item, int):
                found.add(item)
            else:
                found |= error_codes(item)
    elif isinstance(value, list):
        for item in value:
            found |= error_codes(item)
    return found


# The APIs a broker serves without ACL checks of their own (or with checks the table above does not need), for
# the walks over every served API.
UNCHECKED_REQUESTS: dict[int, dict] = {
    16: {"states_filter": [], "types_filter": []},
    17: {"mechanism": "SCRAM-SHA-256"},
    18: {"client_software_name": "walk", "client_software_version": "1"},
    36: {"auth_bytes": b"n,,n=alice,r=abc"},
    38: {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1},
    39: {"hmac": b"not-a-token", "renew_period_ms": 1000},
    40: {"hmac": b"not-a-token", "expiry_time_period_ms": 1000},
    41: {"owners": None},
    60: {"include_cluster_authorized_operations": True, "endpoint_type": 1},
    66: {"state_filters": [], "producer_id_filters": []},
    71: {"client_instance_id": uuid.UUID(int=0)},
    72: {"client_instance_id": uuid.UUID(int=0), "subscription_id": 0, "terminating": False, "compression_type": 0,
         "metrics": b""},
}


def substitute(body, names: dict):
    """A copy of a request body with every string or uuid value found in `names` replaced ("t" by a topic, "g" by
    a group, TOPIC_ID by a topic's id...)."""
    if isinstance(body, dict):
        return {key: substitute(value, names) for key, value in body.items()}
    if isinstance(body, list):
        return [substitute(value, names) for value in body]
    if isinstance(body, (str, uuid.UUID)) and body in names:
        return names[body]
    return body
