"""The seams between the transaction coordinator and the partition side (Kafka's produce-path verification,
KIP-890 part 1, and the WriteTxnMarkers path), as Protocols so either side can be built and tested alone.

* `TxnPartitionVerifier` is what the ReplicaManager asks before appending a transactional batch that starts a
  transaction on a partition: is the partition in the producer's ongoing transaction? The coordinator runtime
  implements it (Kafka's AddPartitionsToTxn with verifyOnly); a partition not in the transaction answers
  INVALID_TXN_STATE, a stale producer PRODUCER_FENCED / INVALID_PRODUCER_EPOCH.
* `TxnMarkerWriter` is what the coordinator's marker sender calls to write COMMIT/ABORT markers: the
  ReplicaManager implements it (`broker.replica_manager.ReplicaManager.write_txn_markers`); every marker written
  is durable (fsynced) when the call returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from broker.txn.results import TxnMarker
from protocol.errors import ErrorCode

__all__ = ["TxnMarkerWriter", "TxnPartitionVerifier"]


class TxnPartitionVerifier(Protocol):
    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """Error per partition (NONE: the partition is in the producer's ongoing transaction)."""
        ...


class TxnMarkerWriter(Protocol):
    async def write_txn_markers(self, markers: Sequence[TxnMarker]) -> dict[tuple[str, int], ErrorCode]:
        """Append each marker to its partition and make it durable; error per (topic, partition)."""
        ...
