"""The metadata journal: topic, partition, config and producer-id records on a Kafka-format log.

Like KRaft's `__cluster_metadata`, each record value is framed as unsigned varints (frame version, record type,
record version) followed by the record encoded with its schema from `schemas/records/`. The journal lives in its
own partition directory and is never visible as a topic.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from protocol import records as rec
from protocol.codec import record_codec
from protocol.primitives import read_uvarint, write_uvarint

FRAME_VERSION = 1
RECORD_NAMES = {2: "TopicRecord", 3: "PartitionRecord", 4: "ConfigRecord", 9: "RemoveTopicRecord",
                15: "ProducerIdsRecord"}
RECORD_VERSION = 0


class JournalError(Exception):
    pass


def encode_entry(record_type: int, value: Mapping) -> bytes:
    body = record_codec(RECORD_NAMES[record_type], RECORD_VERSION).encode(value)
    return write_uvarint(FRAME_VERSION) + write_uvarint(record_type) + write_uvarint(RECORD_VERSION) + body


def decode_entry(data: bytes) -> tuple[int, object]:
    frame, pos = read_uvarint(data, 0)
    if frame != FRAME_VERSION:
        raise JournalError(f"unknown metadata frame version {frame}")
    record_type, pos = read_uvarint(data, pos)
    version, pos = read_uvarint(data, pos)
    name = RECORD_NAMES.get(record_type)
    if name is None:
        raise JournalError(f"unknown metadata record type {record_type}")
    return record_type, record_codec(name, version).decode(memoryview(data)[pos:])


class MetadataJournal:
    def __init__(self, plog) -> None:
        self._log = plog

    def replay(self) -> Iterator[tuple[int, object]]:
        offset = self._log.log_start_offset
        end = self._log.log_end_offset
        while offset < end:
            chunk = self._log.read(offset, 1 << 20, min_one_batch=True).data
            if not chunk:
                break
            for _pos, header, batch in rec.iter_batch_views(chunk):
                for record in rec.decode_records(batch):
                    yield decode_entry(record.value)
                offset = header.base_offset + header.last_offset_delta + 1

    def append(self, entries: list[tuple[int, Mapping]]) -> None:
        """Append entries as one batch and fsync before returning: metadata changes are rare and must stick."""
        batch = rec.build_batch([rec.Record(key=None, value=encode_entry(t, v)) for t, v in entries])
        self._log.append(batch, log_append_time=None)
        self._log.flush()
