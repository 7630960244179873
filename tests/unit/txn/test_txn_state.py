"""Transaction states and metadata transitions: Kafka's ids, names and legal transitions."""

from __future__ import annotations

import pytest

from broker.txn import TV_0, TV_2, TopicPartition, TxnMetadata, TxnState
from broker.txn import metadata as md
from broker.txn import records as rec
from broker.txn.state import VALID_PREVIOUS, is_legal, log_value_version, supports_epoch_bump
from tests.unit.txn.txn_helpers import Clock, make

S = TxnState


def test_ids_and_names_are_kafkas() -> None:
    assert [(s.value, s.display_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_name("PrepareCommit") is S.PREPARE_COMMIT and S.from_name("prepare_commit") is None
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_legal_transitions() -> None:
    legal = {(a, b) for b, prev in VALID_PREVIOUS.items() for a in prev}
    assert len(legal) == 3 + 4 + 1 + 5 + 1 + 1 + 3 + 1
    assert is_legal(S.ONGOING, S.PREPARE_COMMIT) and not is_legal(S.EMPTY, S.PREPARE_COMMIT)
    assert is_legal(S.COMPLETE_COMMIT, S.PREPARE_ABORT)  # TV2 abort when unsure
    assert not is_legal(S.PREPARE_COMMIT, S.ONGOING) and not is_legal(S.PREPARE_ABORT, S.EMPTY)
    assert not any(is_legal(S.DEAD, b) for b in S)


def test_transition_versions() -> None:
    assert [log_value_version(v) for v in (0, 1, 2)] == [0, 1, 1]
    assert [supports_epoch_bump(v) for v in (0, 1, 2)] == [False, False, True]


def test_illegal_transitions_raise() -> None:
    m = TxnMetadata("t", 5, 3, 1000, S.PREPARE_COMMIT, frozenset({TopicPartition("a", 0)}), 1, 1)
    with pytest.raises(md.IllegalTransition):
        md.add_partitions(m, [TopicPartition("b", 0)], 2, TV_0)
    with pytest.raises(md.IllegalTransition):
        md.prepare_end(m, S.PREPARE_ABORT, TV_0, -1, 2, False)
    with pytest.raises(md.IllegalTransition):
        md.rotate_producer_id(m, 6, 1000, 2, False)
    with pytest.raises(md.IllegalTransition):
        md.dead(m)
    with pytest.raises(md.IllegalTransition):
        md.fence_epoch(m)


def test_every_transition_records_the_previous_producer_id() -> None:
    m = TxnMetadata("t", 5, md.SHORT_MAX - 1, 1000, S.EMPTY)
    r = md.rotate_producer_id(m, 9, 1000, 7, record_last_epoch=True)
    assert (r.producer_id, r.producer_epoch, r.prev_producer_id, r.last_producer_epoch) == (9, 0, 5, md.SHORT_MAX - 1)


def test_tv2_abort_at_the_maximum_epoch_is_not_bumped() -> None:
    m = TxnMetadata("t", 5, md.SHORT_MAX, 1000, S.ONGOING, frozenset({TopicPartition("a", 0)}), 1, 1)
    assert md.prepare_end(m, S.PREPARE_ABORT, TV_2, -1, 2, False).producer_epoch == md.SHORT_MAX


def test_a_prepared_abort_of_nothing_completes_on_load() -> None:
    m = TxnMetadata("t", 5, 4, 1000, S.PREPARE_ABORT, frozenset(), 1, 1, client_transaction_version=TV_2)
    c = make(Clock(50))
    p = c.partition_for("t")
    c.load_begin(p)
    c.replay(*rec.encode(m, 1))
    out = c.load_complete(p)
    assert out.markers == [] and len(out.records) == 1
    assert c.metadata("t").state is S.COMPLETE_ABORT
