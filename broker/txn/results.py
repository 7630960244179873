"""What the transaction coordinator's operations hand back to the runtime (sans-IO).

Contract: `records` are appended, in order, to their `__transaction_state` partitions and made durable before
the response is sent; only then are `markers` sent (WriteTxnMarkers to the partitions' leaders). When every
marker of a transaction is written, the runtime calls `TransactionCoordinator.complete_transaction`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition
from .records import Record


@dataclass(frozen=True)
class TxnMarker:
    """One transaction marker to write: a control batch on `topic`-`partition` ending the transaction."""

    transactional_id: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int


@dataclass
class TxnResult:
    """Outcome of InitProducerId, EndTxn, AddOffsetsToTxn and the coordinator's own operations.

    `need_producer_id`: the operation needs a fresh producer id; allocate one and call again with it (the
    state is re-checked then, so an id allocated for a retry that is no longer needed is just unused).
    `producer_id`/`producer_epoch`: what InitProducerId answers, and EndTxn from TV2 on (-1 otherwise)."""

    error: ErrorCode = ErrorCode.NONE
    records: list[Record] = field(default_factory=list)
    markers: list[TxnMarker] = field(default_factory=list)
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    need_producer_id: bool = False

    def merge(self, other: TxnResult) -> TxnResult:
        self.records += other.records
        self.markers += other.markers
        return self


@dataclass
class AddPartitionsResult:
    """AddPartitionsToTxn for one transaction: an error per partition of the request."""

    errors: dict[TopicPartition, ErrorCode]
    records: list[Record] = field(default_factory=list)


@dataclass(frozen=True)
class TransactionDescription:
    """One entry of a DescribeTransactions response. An entry with an error keeps the message's defaults (zeros,
    an empty state), as Kafka answers it."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = 0
    producer_epoch: int = 0
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = 0
    topics: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass
class ListTransactionsResult:
    error: ErrorCode
    transactions: list[TransactionListing] = field(default_factory=list)
    unknown_state_filters: list[str] = field(default_factory=list)
