"""WriteTxnMarkers (api key 27, v1-2): the transaction coordinator's COMMIT/ABORT markers for partitions led here.

As Kafka's KafkaApis.handleWriteTxnMarkersRequest: CLUSTER_ACTION on the cluster (else every partition answers
CLUSTER_AUTHORIZATION_FAILED), UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist, and the answer only
once the markers are durable. Data partitions' markers are written by `ReplicaManager.write_markers`;
`__consumer_offsets` markers go to the group coordinator, which settles the transactional offset commits they end
(as the coordinator's own markers do, through `broker.txn.markers.RoutedMarkerWriter`).

A marker with a negative ProducerId (no coordinator sends one; the fuzz campaign did) is refused with
INVALID_REQUEST for each of its partitions. Kafka appends a control batch without a producer there, which no
producer state or reader can attribute; here the marker batch cannot be built.
"""

from __future__ import annotations

from broker.context import RequestContext
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.apis import Apis, Request, Response
from broker.replica_manager import ReplicaManager
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.txn.markers import OFFSETS_TOPIC
from broker.txn.results import TxnMarker
from protocol.errors import ErrorCode

WRITE_TXN_MARKERS = 27


def _result(marker, codes_by_partition) -> dict:
    return {"producer_id": marker.producer_id, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p, "error_code": int(codes_by_partition[(topic.name, p)])}
            for p in topic.partition_indexes]}
        for topic in marker.topics]}


class TxnMarkerApis(Apis):
    """WriteTxnMarkers: data partitions through the replica manager, __consumer_offsets through the group
    coordinator."""

    def __init__(self, replicas: ReplicaManager, groups: GroupCoordinatorRuntime) -> None:
        self._replicas = replicas
        self._groups = groups

    async def write_txn_markers(self, ctx: RequestContext, req: Request) -> Response:
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return {"markers": [
                _result(m, {(t.name, p): refused for t in m.topics for p in t.partition_indexes})
                for m in req.markers]}
        flat: list[TxnMarker] = []
        for m in req.markers:
            if m.producer_id < 0:
                continue  # refused below: no marker batch can name "no producer"
            for topic in m.topics:
                for p in topic.partition_indexes:
                    flat.append(TxnMarker("", topic.name, p, m.producer_id, m.producer_epoch, m.transaction_result,
                                          m.coordinator_epoch, m.get("transaction_version", 0)))
        data = [m for m in flat if m.topic != OFFSETS_TOPIC]
        offsets = [m for m in flat if m.topic == OFFSETS_TOPIC]
        data_codes = iter(await self._replicas.write_markers(data)) if data else iter(())
        offsets_codes = await self._groups.write_txn_markers(offsets) if offsets else {}
        codes = [offsets_codes.get((m.topic, m.partition), ErrorCode.UNKNOWN_SERVER_ERROR) if m.topic == OFFSETS_TOPIC
                 else next(data_codes) for m in flat]
        out = []
        n = 0
        for m in req.markers:
            by_partition = {}
            for topic in m.topics:
                for p in topic.partition_indexes:
                    if m.producer_id < 0:
                        by_partition[(topic.name, p)] = ErrorCode.INVALID_REQUEST
                        continue
                    by_partition[(topic.name, p)] = codes[n]
                    n += 1
            out.append(_result(m, by_partition))
        return {"markers": out}

    HANDLERS = {WRITE_TXN_MARKERS: write_txn_markers}
