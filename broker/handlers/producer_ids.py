"""InitProducerId (22): producer ids and epochs for idempotent producers (ProducerIdManager: a new id at epoch 0
each time, also for a producer naming its current id and epoch, as Kafka); with a transactional id, the
transaction coordinator answers (broker.txn.runtime, component `transaction_coordinator`). Half an id/epoch pair
is INVALID_REQUEST for both.

v6 (KIP-939) adds two-phase commit: Enable2Pc asks for transactions that never time out and KeepPreparedTxn for
a prepared one to be kept across the producer's restart. Shoal serves no 2PC, as a Kafka broker with
`transaction.two.phase.commit.enable` false (its default). For a transactional id Kafka's TransactionCoordinator
answers Enable2Pc with TRANSACTIONAL_ID_AUTHORIZATION_FAILED there, and KeepPreparedTxn with UNSUPPORTED_VERSION
(its coordinator does not keep prepared transactions yet, KAFKA-20739); an idempotent producer's flags are
ignored. Nothing prepared is kept, so OngoingTxnProducerId and OngoingTxnProducerEpoch are always -1. Kafka marks v6 latestVersionUnstable: served and advertised only with
`unstable.api.versions.enable` (UNSTABLE), as Kafka's ApiVersions leaves unstable versions out by default.
"""

from __future__ import annotations

from typing import Protocol

from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.producer_ids import ProducerIdManager
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.txn.results import TxnResult
from broker.txn.versions import error_for_version
from protocol.errors import ErrorCode

INIT_PRODUCER_ID = 22
NO_PRODUCER_ID = NO_PRODUCER_EPOCH = -1


def _refused(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": -1, "producer_epoch": -1}


class TransactionalProducerIds(Protocol):
    """The transaction coordinator (broker.txn.runtime.TransactionCoordinatorRuntime) as InitProducerId with a
    transactional id sees it."""

    async def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
                               ) -> TxnResult: ...


class ProducerIdApis(Apis):
    """InitProducerId: idempotent producers from the producer id manager, transactional ones from the
    transaction coordinator."""

    def __init__(self, producer_ids: ProducerIdManager,
                 transaction_coordinator: TransactionalProducerIds) -> None:
        self._producer_ids = producer_ids
        self._transaction_coordinator = transaction_coordinator

    async def init_producer_id(self, ctx: RequestContext, req: Request) -> Response:
        producers = self._producer_ids
        version = ctx.api_version
        # As Kafka: WRITE on the transactional id, else IDEMPOTENT_WRITE on the cluster or WRITE on some
        # topic.
        if req.transactional_id is not None:
            if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
                return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif not ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) and \
                not ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC):
            return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        current_id = req.get("producer_id", -1) if version >= 3 else -1
        current_epoch = req.get("producer_epoch", -1) if version >= 3 else -1
        if (current_id == NO_PRODUCER_ID) != (current_epoch == NO_PRODUCER_EPOCH):
            return _refused(ErrorCode.INVALID_REQUEST)  # half a pair (Kafka's handler, before either path)
        # (an empty transactional id is the coordinator's INVALID_REQUEST first, as in Kafka)
        if req.transactional_id and version >= 6 and (req.enable2_pc or req.keep_prepared_txn):
            return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if req.enable2_pc
                            else ErrorCode.UNSUPPORTED_VERSION)
        if req.transactional_id is not None:
            r = await self._transaction_coordinator.init_producer_id(
                req.transactional_id, req.transaction_timeout_ms, current_id, current_epoch)
            code = error_for_version(r.error, "InitProducerId", version)
            return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": r.producer_id,
                    "producer_epoch": r.producer_epoch}
        code, pid, epoch = await producers.init_producer()
        return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": pid, "producer_epoch": epoch}

    HANDLERS = {INIT_PRODUCER_ID: init_producer_id}

    UNSTABLE = {INIT_PRODUCER_ID: 6}
