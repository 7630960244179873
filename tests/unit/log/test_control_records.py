"""Transaction markers: byte-exact against a batch laid out by hand from Kafka's format, and parsed back."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from protocol import control_records as cr
from protocol import records as rec

PID, EPOCH, COORD_EPOCH, OFFSET, TS, LEADER_EPOCH = 4242, 7, 3, 100, 1_700_000_000_000, 5


def kafka_marker_bytes(control_type: int, *, pid: int = PID, epoch: int = EPOCH, coordinator_epoch: int = COORD_EPOCH,
                       offset: int = OFFSET, ts: int = TS, leader_epoch: int = LEADER_EPOCH) -> bytes:
    """A marker batch as Kafka's MemoryRecords.withEndTransactionMarker writes it, laid out field by field."""
    record = bytes([
        0x20,  # record length 16, zigzag varint
        0x00,  # record attributes
        0x00,  # timestampDelta 0
        0x00,  # offsetDelta 0
        0x08,  # key length 4
    ]) + struct.pack(">hh", 0, control_type) + bytes([
        0x0C,  # value length 6
    ]) + struct.pack(">hi", 0, coordinator_epoch) + bytes([
        0x00,  # no headers
    ])
    assert len(record) == 17
    attributes = 0x10 | 0x20  # transactional | control, no compression, CreateTime
    after_crc = struct.pack(">hiqqqhii", attributes, 0, ts, ts, pid, epoch, -1, 1) + record
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leaderEpoch + magic + crc + the rest
    return struct.pack(">qiibI", offset, batch_length, leader_epoch, 2, crc) + after_crc


def test_crc32c_is_castagnoli() -> None:
    assert crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize("commit, type_id", [(False, 0), (True, 1)])
def test_marker_bytes_are_kafkas(commit: bool, type_id: int) -> None:
    built = cr.build_end_txn_marker(producer_id=PID, producer_epoch=EPOCH, commit=commit,
                                    coordinator_epoch=COORD_EPOCH, base_offset=OFFSET, timestamp=TS,
                                    partition_leader_epoch=LEADER_EPOCH)
    expected = kafka_marker_bytes(type_id)
    assert built == expected
    assert len(built) == cr.MARKER_BATCH_SIZE == 78


def test_abort_marker_fixed_bytes() -> None:
    # the ABORT marker above, spelled out once so that a change to the hand layout cannot go unnoticed
    assert kafka_marker_bytes(0).hex() == (
        "0000000000000064" "00000042" "00000005" "02" "ad7bce28" "0030" "00000000"
        "0000018bcfe56800" "0000018bcfe56800" "0000000000001092" "0007" "ffffffff" "00000001"
        "20" "00" "00" "00" "08" "0000" "0000" "0c" "0000" "00000003" "00"
    )


def test_marker_passes_broker_validation_only_as_control() -> None:
    built = cr.build_end_txn_marker(producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=0, timestamp=TS)
    [header] = rec.validate_batches(built, allow_control=True, check_records=True)
    assert header.is_control and header.is_transactional and header.base_sequence == -1
    with pytest.raises(rec.InvalidRecordError):
        rec.validate_batches(built)


@pytest.mark.parametrize("commit", [False, True])
def test_parse_marker(commit: bool) -> None:
    raw = kafka_marker_bytes(1 if commit else 0, coordinator_epoch=2**31 - 1)
    marker = cr.read_end_txn_marker(raw)
    assert marker == cr.EndTxnMarker(commit, 2**31 - 1)
    assert cr.read_control_type(raw) == (cr.ControlRecordType.COMMIT if commit else cr.ControlRecordType.ABORT)
    assert marker.control_type == cr.read_control_type(raw)


def test_data_batch_is_no_marker() -> None:
    data = rec.build_batch([rec.Record(b"k", b"v")], timestamp=TS, producer_id=PID, producer_epoch=0,
                           base_sequence=0, transactional=True)
    assert cr.read_end_txn_marker(data) is None
    assert cr.read_control_type(data) is None


def test_empty_control_batch_is_no_marker() -> None:
    # a control batch the cleaner emptied: header only, recordsCount 0
    body = struct.pack(">hiqqqhii", 0x30, -1, TS, TS, PID, 0, -1, 0)
    raw = struct.pack(">qiibI", 5, 9 + len(body), 0, 2, crc32c(body)) + body
    assert cr.read_control_type(raw) is None
    assert cr.read_end_txn_marker(raw) is None


def _control_batch(key: bytes | None, value: bytes | None) -> bytes:
    return rec.build_batch([rec.Record(key, value)], timestamp=TS, producer_id=PID, producer_epoch=0,
                           transactional=True, control=True)


def test_higher_versions_parse_as_version_0() -> None:
    raw = _control_batch(struct.pack(">hhh", 3, 0, 99), struct.pack(">hii", 1, 12, 77))
    assert cr.read_end_txn_marker(raw) == cr.EndTxnMarker(False, 12)


def test_other_control_types_are_not_markers() -> None:
    raw = _control_batch(struct.pack(">hh", 0, 2), b"leader change")
    assert cr.read_control_type(raw) == cr.ControlRecordType.LEADER_CHANGE
    assert cr.read_end_txn_marker(raw) is None
    assert cr.read_control_type(_control_batch(struct.pack(">hh", 0, 42), b"")) == cr.ControlRecordType.UNKNOWN


@pytest.mark.parametrize("key, value", [
    (None, struct.pack(">hi", 0, 1)),
    (b"\x00\x00\x00", struct.pack(">hi", 0, 1)),
    (struct.pack(">hh", -1, 0), struct.pack(">hi", 0, 1)),
    (struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00"),
    (struct.pack(">hh", 0, 1), None),
    (struct.pack(">hh", 0, 0), struct.pack(">hi", -2, 1)),
])
def test_malformed_markers_are_invalid_records(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(rec.InvalidRecordError):
        cr.read_end_txn_marker(_control_batch(key, value))


def test_iter_txn_batches_decodes_only_markers() -> None:
    data = rec.build_batch([rec.Record(b"k", b"v")] * 3, base_offset=10, timestamp=TS, producer_id=PID,
                           producer_epoch=0, base_sequence=0, transactional=True)
    marker = kafka_marker_bytes(0, offset=13)
    plain = rec.build_batch([rec.Record(b"k", b"v")], base_offset=14, timestamp=TS)
    got = list(cr.iter_txn_batches(data + marker + plain[:-1] + plain[-1:] + plain[:30]))  # a torn tail is left out
    assert [(h.base_offset, m) for h, m in got] == [(10, None), (13, cr.EndTxnMarker(False, COORD_EPOCH)),
                                                    (14, None)]


def test_marker_needs_a_producer_id() -> None:
    with pytest.raises(ValueError):
        cr.build_end_txn_marker(producer_id=-1, producer_epoch=0, commit=True, coordinator_epoch=0)
