"""Transaction states (Kafka's TransactionState): the int8 ids written in `__transaction_state`, the names
DescribeTransactions/ListTransactions show, the legal transitions, and the transaction versions (TV).
"""

from __future__ import annotations

from enum import IntEnum


class TxnState(IntEnum):
    """Value = the TransactionStatus id Kafka writes in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name on the wire (DescribeTransactions, ListTransactions state filters)."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether transactional.id.expiration.ms may remove an idle id in this state."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

S = TxnState
# target state -> the states it may be entered from (Kafka's validPreviousStates). PrepareAbort is reachable
# from Empty/CompleteCommit/CompleteAbort only under TV2, where a client may abort when unsure of the state.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
del S


def is_legal(from_state: TxnState, to_state: TxnState) -> bool:
    return from_state in VALID_PREVIOUS[to_state]


# Transaction versions (the transaction.version feature, KIP-890). TV0: original protocol; TV1: flexible
# __transaction_state values (log value version 1); TV2: the epoch is bumped by every EndTxn and partitions
# are added implicitly by the partition leaders (AddPartitionsToTxn v5, EndTxn v5).
TV_0 = 0
TV_1 = 1
TV_2 = 2


def supports_epoch_bump(tv: int) -> bool:
    return tv >= TV_2


def log_value_version(tv_level: int) -> int:
    """The TransactionLogValue version the coordinator writes at a finalized transaction.version."""
    return 1 if tv_level >= TV_1 else 0
