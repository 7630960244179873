"""Share coordinator (KIP-932): durable share-partition state on `__share_group_state`, sans-IO.

See coordinator.py for the caller contract (append the returned records durably before answering).
"""

from .config import ShareCoordinatorConfig
from .coordinator import CoordinatorResult, OpResult, ReadResult, ShareCoordinator, Summary
from .keys import SharePartitionKey, partition_for, partition_for_coordinator_key
from .records import Record
from .state import SharePartitionState, ShareUpdate, StateBatch, combine_state_batches

__all__ = [
    "CoordinatorResult", "OpResult", "ReadResult", "Record", "ShareCoordinator", "ShareCoordinatorConfig",
    "SharePartitionKey", "SharePartitionState", "ShareUpdate", "StateBatch", "Summary", "combine_state_batches",
    "partition_for", "partition_for_coordinator_key",
]
