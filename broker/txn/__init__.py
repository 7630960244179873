"""The transaction coordinator (KIP-98, KIP-447, KIP-890 parts 1 and 2), sans-IO.

state.py: the states and legal transitions; metadata.py: a transactional id's metadata and its transitions;
records.py: the `__transaction_state` record format; partitioning.py: the id -> partition mapping;
results.py: what operations return; coordinator.py: the request rules, fencing, loading, timeouts;
versions.py: request versions -> transaction versions and error codes.
"""

from .config import TransactionCoordinatorConfig
from .coordinator import TransactionCoordinator
from .metadata import TopicPartition, TxnMetadata
from .records import Record
from .results import (
    AddPartitionsResult,
    ListTransactionsResult,
    TransactionDescription,
    TransactionListing,
    TxnMarker,
    TxnResult,
)
from .state import TV_0, TV_1, TV_2, TxnState

__all__ = [
    "TV_0", "TV_1", "TV_2", "AddPartitionsResult", "ListTransactionsResult", "Record", "TopicPartition",
    "TransactionCoordinator", "TransactionCoordinatorConfig", "TransactionDescription", "TransactionListing",
    "TxnMarker", "TxnMetadata", "TxnResult", "TxnState",
]
