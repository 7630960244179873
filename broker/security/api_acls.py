"""Kafka's authorization table: the ACL checks each API's handler makes (KafkaApis / ControllerApis of Kafka 4.x).

Every API the router serves must have an entry (tests/unit/security/test_api_acls.py fails otherwise), and every
entry with checks has a request in tests/integration/security/test_authorization.py that a broker without ACLs
must refuse with the error named here. A new handler therefore comes with its checks: look the API up in
Kafka's KafkaApis, call `ctx.authorize(operation, resource_type, name)` where Kafka does, and add the API below.

Entries: api key -> (checks, the error a client without any ACL gets). `()` means no ACL is consulted.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.security.acl import AclOperation as Op
from broker.security.acl import ResourceType as Res
from protocol.errors import ErrorCode as E

T, G, C, X = Res.TOPIC, Res.GROUP, Res.CLUSTER, Res.TRANSACTIONAL_ID


class ApiAcls(NamedTuple):
    checks: tuple[tuple[Op, Res], ...]
    denied: E | None = None  # what a request gets when none of its checks passes
    note: str = ""


API_ACLS: dict[int, ApiAcls] = {
    0: ApiAcls(((Op.WRITE, T), (Op.WRITE, X)), E.TOPIC_AUTHORIZATION_FAILED,
               "Produce: WRITE per topic; WRITE on the transactional id"),
    1: ApiAcls(((Op.READ, T),), E.TOPIC_AUTHORIZATION_FAILED, "Fetch (consumer): READ per topic"),
    2: ApiAcls(((Op.DESCRIBE, T),), E.TOPIC_AUTHORIZATION_FAILED, "ListOffsets: DESCRIBE per topic"),
    3: ApiAcls(((Op.DESCRIBE, T), (Op.CREATE, C), (Op.CREATE, T), (Op.DESCRIBE, C)), E.TOPIC_AUTHORIZATION_FAILED,
               "Metadata: DESCRIBE per topic (unauthorized topics left out of all-topics answers); auto-creation "
               "needs CREATE on the cluster or the topic"),
    8: ApiAcls(((Op.READ, G), (Op.READ, T)), E.GROUP_AUTHORIZATION_FAILED, "OffsetCommit: READ group, READ topics"),
    9: ApiAcls(((Op.DESCRIBE, G), (Op.DESCRIBE, T)), E.GROUP_AUTHORIZATION_FAILED,
               "OffsetFetch: DESCRIBE group; topics not DESCRIBE-able are left out or refused"),
    10: ApiAcls(((Op.DESCRIBE, G), (Op.DESCRIBE, X), (Op.CLUSTER_ACTION, C)), E.GROUP_AUTHORIZATION_FAILED,
                "FindCoordinator: DESCRIBE group / transactional id; CLUSTER_ACTION for share-state keys"),
    11: ApiAcls(((Op.READ, G),), E.GROUP_AUTHORIZATION_FAILED, "JoinGroup: READ group"),
    12: ApiAcls(((Op.READ, G),), E.GROUP_AUTHORIZATION_FAILED, "Heartbeat: READ group"),
    13: ApiAcls(((Op.READ, G),), E.GROUP_AUTHORIZATION_FAILED, "LeaveGroup: READ group"),
    14: ApiAcls(((Op.READ, G),), E.GROUP_AUTHORIZATION_FAILED, "SyncGroup: READ group"),
    15: ApiAcls(((Op.DESCRIBE, G),), E.GROUP_AUTHORIZATION_FAILED, "DescribeGroups: DESCRIBE per group"),
    16: ApiAcls(((Op.DESCRIBE, C), (Op.DESCRIBE, G)), None,
                "ListGroups: all groups with DESCRIBE on the cluster, else only DESCRIBE-able groups (no error)"),
    17: ApiAcls((), None, "SaslHandshake"),
    18: ApiAcls((), None, "ApiVersions"),
    19: ApiAcls(((Op.CREATE, C), (Op.CREATE, T), (Op.DESCRIBE_CONFIGS, T)), E.TOPIC_AUTHORIZATION_FAILED,
                "CreateTopics: CREATE on the cluster or per topic; DESCRIBE_CONFIGS to see the configs"),
    20: ApiAcls(((Op.DELETE, C), (Op.DESCRIBE, T), (Op.DELETE, T)), E.TOPIC_AUTHORIZATION_FAILED,
                "DeleteTopics: DELETE on the cluster or DESCRIBE+DELETE per topic"),
    21: ApiAcls(((Op.DELETE, T),), E.TOPIC_AUTHORIZATION_FAILED, "DeleteRecords: DELETE per topic"),
    22: ApiAcls(((Op.WRITE, X), (Op.IDEMPOTENT_WRITE, C), (Op.WRITE, T)), E.CLUSTER_AUTHORIZATION_FAILED,
                "InitProducerId: WRITE transactional id; else IDEMPOTENT_WRITE cluster or WRITE on some topic"),
    23: ApiAcls(((Op.CLUSTER_ACTION, C), (Op.DESCRIBE, T)), E.TOPIC_AUTHORIZATION_FAILED,
                "OffsetForLeaderEpoch: CLUSTER_ACTION on the cluster (brokers), else DESCRIBE per topic (KIP-320)"),
    24: ApiAcls(((Op.WRITE, X), (Op.WRITE, T), (Op.CLUSTER_ACTION, C)), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "AddPartitionsToTxn: v0-3 WRITE transactional id, WRITE per topic; v4+ (brokers) CLUSTER_ACTION"),
    25: ApiAcls(((Op.WRITE, X), (Op.READ, G)), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "AddOffsetsToTxn: WRITE transactional id, READ group"),
    26: ApiAcls(((Op.WRITE, X),), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "EndTxn: WRITE transactional id"),
    27: ApiAcls(((Op.CLUSTER_ACTION, C),), E.CLUSTER_AUTHORIZATION_FAILED,
                "WriteTxnMarkers: CLUSTER_ACTION on the cluster (every partition refused otherwise)"),
    28: ApiAcls(((Op.WRITE, X), (Op.READ, G), (Op.READ, T)), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "TxnOffsetCommit: WRITE transactional id, READ group, READ per topic"),
    29: ApiAcls(((Op.DESCRIBE, C),), E.CLUSTER_AUTHORIZATION_FAILED, "DescribeAcls"),
    30: ApiAcls(((Op.ALTER, C),), E.CLUSTER_AUTHORIZATION_FAILED, "CreateAcls"),
    31: ApiAcls(((Op.ALTER, C),), E.CLUSTER_AUTHORIZATION_FAILED, "DeleteAcls"),
    32: ApiAcls(((Op.DESCRIBE_CONFIGS, T), (Op.DESCRIBE_CONFIGS, G), (Op.DESCRIBE_CONFIGS, C)),
                E.TOPIC_AUTHORIZATION_FAILED, "DescribeConfigs: per resource (broker resources on the cluster)"),
    33: ApiAcls(((Op.ALTER_CONFIGS, T), (Op.ALTER_CONFIGS, G), (Op.ALTER_CONFIGS, C)), E.TOPIC_AUTHORIZATION_FAILED,
                "AlterConfigs: per resource (broker resources on the cluster)"),
    34: ApiAcls(((Op.ALTER, C),), E.CLUSTER_AUTHORIZATION_FAILED, "AlterReplicaLogDirs: every partition refused"),
    35: ApiAcls(((Op.DESCRIBE, C),), E.CLUSTER_AUTHORIZATION_FAILED, "DescribeLogDirs: top-level error, no results"),
    36: ApiAcls((), None, "SaslAuthenticate"),
    37: ApiAcls(((Op.ALTER, T),), E.TOPIC_AUTHORIZATION_FAILED, "CreatePartitions: ALTER per topic"),
    38: ApiAcls(((Op.CREATE_TOKENS, Res.USER),), None,
                "CreateDelegationToken: CREATE_TOKENS on USER:<owner> for another owner "
                "(DELEGATION_TOKEN_AUTHORIZATION_FAILED); a token for oneself needs no ACL"),
    39: ApiAcls((), None, "RenewDelegationToken: the token's owner or renewers only (no ACL)"),
    40: ApiAcls((), None, "ExpireDelegationToken: the token's owner or renewers only (no ACL)"),
    41: ApiAcls(((Op.DESCRIBE, Res.DELEGATION_TOKEN), (Op.DESCRIBE_TOKENS, Res.USER)), None,
                "DescribeDelegationToken: others' tokens with DESCRIBE on the token id or DESCRIBE_TOKENS on "
                "USER:<owner> (left out otherwise, no error)"),
    42: ApiAcls(((Op.DELETE, G),), E.GROUP_AUTHORIZATION_FAILED, "DeleteGroups: DELETE per group"),
    44: ApiAcls(((Op.ALTER_CONFIGS, T), (Op.ALTER_CONFIGS, G), (Op.ALTER_CONFIGS, C)),
                E.TOPIC_AUTHORIZATION_FAILED, "IncrementalAlterConfigs: per resource (broker resources on the cluster)"),
    43: ApiAcls(((Op.ALTER, C),), E.CLUSTER_AUTHORIZATION_FAILED, "ElectLeaders (controller)"),
    45: ApiAcls(((Op.ALTER, C),), E.CLUSTER_AUTHORIZATION_FAILED, "AlterPartitionReassignments (controller)"),
    46: ApiAcls(((Op.DESCRIBE, C),), E.CLUSTER_AUTHORIZATION_FAILED, "ListPartitionReassignments (controller)"),
    47: ApiAcls(((Op.DELETE, G), (Op.READ, T)), E.GROUP_AUTHORIZATION_FAILED, "OffsetDelete: DELETE group, READ topics"),
    48: ApiAcls(((Op.DESCRIBE_CONFIGS, C),), E.CLUSTER_AUTHORIZATION_FAILED, "DescribeClientQuotas"),
    49: ApiAcls(((Op.ALTER_CONFIGS, C),), E.CLUSTER_AUTHORIZATION_FAILED, "AlterClientQuotas"),
    50: ApiAcls(((Op.DESCRIBE, C),), E.CLUSTER_AUTHORIZATION_FAILED, "DescribeUserScramCredentials"),
    51: ApiAcls(((Op.ALTER, C),), E.CLUSTER_AUTHORIZATION_FAILED, "AlterUserScramCredentials"),
    55: ApiAcls(((Op.DESCRIBE, C),), E.CLUSTER_AUTHORIZATION_FAILED, "DescribeQuorum (controller)"),
    57: ApiAcls(((Op.ALTER, C),), E.CLUSTER_AUTHORIZATION_FAILED, "UpdateFeatures (controller)"),
    60: ApiAcls(((Op.DESCRIBE, C),), None, "DescribeCluster: DESCRIBE on the cluster only for authorized operations"),
    65: ApiAcls(((Op.DESCRIBE, X), (Op.DESCRIBE, T)), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "DescribeTransactions: DESCRIBE per transactional id; topics not DESCRIBE-able left out"),
    66: ApiAcls(((Op.DESCRIBE, X),), None, "ListTransactions: only DESCRIBE-able transactional ids (no error)"),
    61: ApiAcls(((Op.READ, T),), E.TOPIC_AUTHORIZATION_FAILED, "DescribeProducers: READ per topic"),
    68: ApiAcls(((Op.READ, G), (Op.DESCRIBE, T)), E.GROUP_AUTHORIZATION_FAILED,
                "ConsumerGroupHeartbeat: READ group, DESCRIBE subscribed topics"),
    69: ApiAcls(((Op.DESCRIBE, G), (Op.DESCRIBE, T)), E.GROUP_AUTHORIZATION_FAILED,
                "ConsumerGroupDescribe: DESCRIBE group; assigned topics DESCRIBE-able"),
    71: ApiAcls((), None, "GetTelemetrySubscriptions: no ACL (KIP-714)"),
    72: ApiAcls((), None, "PushTelemetry: no ACL (KIP-714)"),
    74: ApiAcls(((Op.DESCRIBE_CONFIGS, C),), E.CLUSTER_AUTHORIZATION_FAILED, "ListConfigResources"),
    75: ApiAcls(((Op.DESCRIBE, T),), E.TOPIC_AUTHORIZATION_FAILED, "DescribeTopicPartitions: DESCRIBE per topic"),
    76: ApiAcls(((Op.READ, G), (Op.DESCRIBE, T)), E.GROUP_AUTHORIZATION_FAILED,
                "ShareGroupHeartbeat: READ group, DESCRIBE subscribed topics"),
    77: ApiAcls(((Op.DESCRIBE, G), (Op.DESCRIBE, T)), E.GROUP_AUTHORIZATION_FAILED,
                "ShareGroupDescribe: DESCRIBE group; assigned topics DESCRIBE-able"),
    78: ApiAcls(((Op.READ, G), (Op.READ, T)), E.GROUP_AUTHORIZATION_FAILED, "ShareFetch: READ group and topics"),
    79: ApiAcls(((Op.READ, G), (Op.READ, T)), E.GROUP_AUTHORIZATION_FAILED,
                "ShareAcknowledge: READ group and topics"),
    83: ApiAcls(((Op.CLUSTER_ACTION, C),), E.CLUSTER_AUTHORIZATION_FAILED, "InitializeShareGroupState"),
    88: ApiAcls(((Op.READ, G), (Op.DESCRIBE, T), (Op.CREATE, C), (Op.CREATE, T)), E.GROUP_AUTHORIZATION_FAILED,
                "StreamsGroupHeartbeat: READ group, DESCRIBE the topology's topics, CREATE (cluster or topic) for "
                "the internal topics it creates"),
    89: ApiAcls(((Op.DESCRIBE, G),), E.GROUP_AUTHORIZATION_FAILED, "StreamsGroupDescribe: DESCRIBE group"),
    84: ApiAcls(((Op.CLUSTER_ACTION, C),), E.CLUSTER_AUTHORIZATION_FAILED, "ReadShareGroupState"),
    85: ApiAcls(((Op.CLUSTER_ACTION, C),), E.CLUSTER_AUTHORIZATION_FAILED, "WriteShareGroupState"),
    86: ApiAcls(((Op.CLUSTER_ACTION, C),), E.CLUSTER_AUTHORIZATION_FAILED, "DeleteShareGroupState"),
    87: ApiAcls(((Op.CLUSTER_ACTION, C),), E.CLUSTER_AUTHORIZATION_FAILED, "ReadShareGroupStateSummary"),
    90: ApiAcls(((Op.DESCRIBE, G), (Op.DESCRIBE, T)), E.GROUP_AUTHORIZATION_FAILED,
                "DescribeShareGroupOffsets: DESCRIBE group; topics DESCRIBE-able"),
    91: ApiAcls(((Op.READ, G), (Op.READ, T)), E.GROUP_AUTHORIZATION_FAILED, "AlterShareGroupOffsets: READ group, topics"),
    92: ApiAcls(((Op.DELETE, G), (Op.READ, T)), E.GROUP_AUTHORIZATION_FAILED,
                "DeleteShareGroupOffsets: DELETE group, READ topics"),
}
