"""WriteTxnMarkers (api key 27, v1-2): the transaction coordinator's COMMIT/ABORT markers for partitions led here.

As Kafka's KafkaApis.handleWriteTxnMarkersRequest: CLUSTER_ACTION on the cluster (else every partition answers
CLUSTER_AUTHORIZATION_FAILED), UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist, and the answer only
once the markers are durable. The writing itself is `ReplicaManager.write_markers` (the `TxnMarkerWriter`).
Markers on `__consumer_offsets` are appended like any other; the group coordinator does not yet complete the
transactional offset commits they end (TxnOffsetCommit is not served).
"""

from __future__ import annotations

from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.txn.results import TxnMarker
from protocol.errors import ErrorCode

WRITE_TXN_MARKERS = 27


def _result(marker, codes_by_partition) -> dict:
    return {"producer_id": marker.producer_id, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p, "error_code": int(codes_by_partition[(topic.name, p)])}
            for p in topic.partition_indexes]}
        for topic in marker.topics]}


async def handle_write_txn_markers(ctx, req) -> dict:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"markers": [_result(m, {(t.name, p): refused for t in m.topics for p in t.partition_indexes})
                            for m in req.markers]}
    flat: list[TxnMarker] = []
    for m in req.markers:
        for topic in m.topics:
            for p in topic.partition_indexes:
                flat.append(TxnMarker("", topic.name, p, m.producer_id, m.producer_epoch, m.transaction_result,
                                      m.coordinator_epoch, m.get("transaction_version", 0)))
    codes = await ctx.broker.replicas.write_markers(flat)
    out = []
    n = 0
    for m in req.markers:
        by_partition = {}
        for topic in m.topics:
            for p in topic.partition_indexes:
                by_partition[(topic.name, p)] = codes[n]
                n += 1
        out.append(_result(m, by_partition))
    return {"markers": out}


HANDLERS = {WRITE_TXN_MARKERS: handle_write_txn_markers}
