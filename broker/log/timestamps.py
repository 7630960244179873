"""The produce-time timestamp checks of Kafka's LogValidator (validateTimestamp), for one client batch.

On a CreateTime topic every record's timestamp (NO_TIMESTAMP, -1, excepted) must lie within
[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]; on a LogAppendTime topic (or for a
record without a timestamp) the producer may not flag its batch LogAppendTime. A refused record gets a RecordError
with Kafka's wording, and the batch is answered INVALID_TIMESTAMP.

The batch's records are walked only when they may be refused: by default (before.max.ms unbounded) a batch whose
MaxTimestamp is within after.max.ms of the clock is accepted from its header, as the time index trusts that field.
Java's 64-bit arithmetic is kept, overflow included, so bounds and messages read as Kafka's.
"""

from __future__ import annotations

from broker.config.definitions import LONG_MAX
from protocol import records as rec

NO_TIMESTAMP = -1
INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"


def _long(value: int) -> int:
    """`value` as a Java long (two's complement wrap-around)."""
    return (value + 2**63) % 2**64 - 2**63


def _out_of_range(timestamp: int, now: int, before_max_ms: int, after_max_ms: int) -> bool:
    diff = _long(now - timestamp)
    return diff > before_max_ms or _long(-diff) > after_max_ms


def may_refuse(header: rec.BatchHeader, now: int, log_append_time: bool, before_max_ms: int,
               after_max_ms: int) -> bool:
    """Whether the batch's records must be walked: False when its header shows that none is refused."""
    if header.attributes & rec.ATTR_LOG_APPEND_TIME:
        return True  # refused unless each record's (that is, MaxTimestamp's) timestamp is in range: walk
    if log_append_time:
        return False
    return before_max_ms != LONG_MAX or _out_of_range(header.max_timestamp, now, LONG_MAX, after_max_ms)


def record_errors(batch: rec.Buffer, now: int, log_append_time: bool, before_max_ms: int, after_max_ms: int,
                  skip: frozenset[int] = frozenset()) -> list[tuple[int, str]]:
    """(batch index, message) of each refused record of `batch` (one whole batch), in order; records whose
    index is in `skip` (refused already, for a missing key) are not judged again, as in Kafka."""
    if rec.read_header(batch).attributes & rec.ATTR_LOG_APPEND_TIME:
        return _flagged_errors(batch, log_append_time, before_max_ms, after_max_ms, now, skip)
    if log_append_time:
        return []
    errors: list[tuple[int, str]] = []
    for index, (ts, offset) in enumerate(rec.iter_timestamps(batch)):
        if ts != NO_TIMESTAMP and _out_of_range(ts, now, before_max_ms, after_max_ms) and index not in skip:
            errors.append((index, _out_of_range_message(ts, offset, now, before_max_ms, after_max_ms)))
    return errors


def _out_of_range_message(ts: int, offset: int, now: int, before_max_ms: int, after_max_ms: int) -> str:
    return (f"Timestamp {ts} of message with offset {offset} is out of range. The timestamp should be within "
            f"[{_long(now - before_max_ms)}, {_long(now + after_max_ms)}]")


def _flagged_errors(batch: rec.Buffer, log_append_time: bool, before_max_ms: int, after_max_ms: int, now: int,
                    skip: frozenset[int]) -> list[tuple[int, str]]:
    """A batch its producer flagged LogAppendTime (its records read its MaxTimestamp): judged by that timestamp on
    a CreateTime topic, refused on a LogAppendTime topic (Kafka's message names each record)."""
    errors: list[tuple[int, str]] = []
    for index, record in enumerate(rec.iter_records(batch)):
        if index in skip:
            continue
        ts = record.timestamp
        assert ts is not None  # a decoded record has its timestamp
        if not log_append_time and ts != NO_TIMESTAMP:
            if _out_of_range(ts, now, before_max_ms, after_max_ms):
                errors.append((index, _out_of_range_message(ts, record.offset, now, before_max_ms, after_max_ms)))
        else:
            errors.append((index, f"Invalid timestamp type in message DefaultRecord(offset={record.offset}, "
                                  f"timestamp={ts}, key={len(record.key or b'')} bytes, "
                                  f"value={len(record.value or b'')} bytes). Producer should not set timestamp "
                                  "type to LogAppendTime."))
    return errors
