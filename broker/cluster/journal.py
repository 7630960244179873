"""The metadata journal: topic, partition, config, feature level, client quota, producer-id, SCRAM credential,
delegation token and ACL records on a Kafka-format log.

Like KRaft's `__cluster_metadata`, each record value is framed as unsigned varints (frame version, record type,
record version) followed by the record encoded with its schema from `schemas/records/`. The journal lives in its
own partition directory and is never visible as a topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from protocol import records as rec
from protocol.codec import record_codec
from protocol.errors import DecodeError
from protocol.primitives import read_uvarint, write_uvarint

FRAME_VERSION = 1
RECORD_NAMES = {2: "TopicRecord", 3: "PartitionRecord", 4: "ConfigRecord", 9: "RemoveTopicRecord",
                10: "DelegationTokenRecord", 11: "UserScramCredentialRecord", 12: "FeatureLevelRecord",
                14: "ClientQuotaRecord", 15: "ProducerIdsRecord", 18: "AccessControlEntryRecord", 19: "RemoveAccessControlEntryRecord",
                22: "RemoveUserScramCredentialRecord", 26: "RemoveDelegationTokenRecord"}
RECORD_VERSION = 0


class JournalError(Exception):
    """The journal holds something this broker cannot read: start-up stops rather than guess (a journal read
    wrongly would make topics and their data disappear)."""


def encode_entry(record_type: int, value: Mapping) -> bytes:
    body = record_codec(RECORD_NAMES[record_type], RECORD_VERSION).encode(value)
    return write_uvarint(FRAME_VERSION) + write_uvarint(record_type) + write_uvarint(RECORD_VERSION) + body


def decode_entry(data: bytes | None) -> tuple[int, object]:
    if data is None:
        raise JournalError("metadata record without a value")
    frame, pos = read_uvarint(data, 0)
    if frame != FRAME_VERSION:
        raise JournalError(f"unknown metadata frame version {frame}")
    record_type, pos = read_uvarint(data, pos)
    version, pos = read_uvarint(data, pos)
    name = RECORD_NAMES.get(record_type)
    if name is None:
        raise JournalError(f"unknown metadata record type {record_type}")
    return record_type, record_codec(name, version).decode(memoryview(data)[pos:])


def _unreadable(directory, offset: int, err: Exception) -> JournalError:
    return JournalError(f"metadata journal {directory}: unreadable batch at offset {offset}: {err}. Start-up stops "
                        "so that no topic is dropped; restore the directory from a backup or remove the bad batch "
                        "by hand.")


def _decode_batch(header: rec.BatchHeader, batch: memoryview) -> list[tuple[int, object]]:
    # Every batch's CRC is checked (start-up recovery only checks the tail after the last index entry).
    if rec.batch_crc(batch, 0, len(batch)) != header.crc:
        raise JournalError(f"batch at offset {header.base_offset} fails its CRC-32C check")
    return [decode_entry(r.value) for r in rec.decode_records(batch)]


def _retrieved(task: asyncio.Future) -> None:
    # a caller that went away does not read its commit's outcome; it is raised to callers that wait
    if not task.cancelled():
        task.exception()


class MetadataJournal:
    def __init__(self, plog) -> None:
        self._log = plog
        self._writes: asyncio.Lock | None = None  # made on first use, on the serving loop

    async def commit(self, entries: Sequence[tuple[int, Mapping[str, Any]]], apply: Callable[[], None], *,
                     batch: bytes | None = None) -> None:
        """Append `entries` (`batch`, their encoding, if already made) and fsync them in a worker thread, then
        call `apply()` on the event loop. Commits go out one at a time in call order, so the journal's order is
        the order changes are applied in, and a change is applied (and its request answered) only after its
        fsync. A cancelled caller does not stop its commit halfway: the write and `apply()` still run."""
        if self._writes is None:
            self._writes = asyncio.Lock()
        if batch is None:
            batch = self.encode(entries)
        task = asyncio.ensure_future(self._commit(batch, apply))
        task.add_done_callback(_retrieved)
        await asyncio.shield(task)

    async def _commit(self, batch: bytes, apply: Callable[[], None]) -> None:
        assert self._writes is not None
        async with self._writes:
            await asyncio.to_thread(self.append_batch, batch)
            apply()

    def replay(self) -> Iterator[tuple[int, object]]:
        """Every entry in order. Raises JournalError (naming the offset and directory) on anything unreadable."""
        offset = self._log.log_start_offset
        end = self._log.log_end_offset
        while offset < end:
            chunk = self._log.read(offset, 1 << 20, min_one_batch=True).data
            if not chunk:
                raise JournalError(f"metadata journal {self._log.directory}: nothing readable at offset {offset} "
                                   f"below its end offset {end}")
            try:
                batches = list(rec.iter_batch_views(chunk))
            except rec.RecordError as err:
                raise _unreadable(self._log.directory, offset, err) from err
            for _pos, header, batch in batches:
                try:
                    entries = _decode_batch(header, batch)
                except (JournalError, rec.RecordError, DecodeError, ValueError, IndexError) as err:
                    raise _unreadable(self._log.directory, header.base_offset, err) from err
                yield from entries
                offset = header.base_offset + header.last_offset_delta + 1

    def append(self, entries: Sequence[tuple[int, Mapping[str, Any]]]) -> None:
        """Append entries as one batch and fsync before returning: metadata changes are rare and must stick."""
        self.append_batch(self.encode(entries))

    @staticmethod
    def encode(entries: Sequence[tuple[int, Mapping[str, Any]]]) -> bytes:
        """The batch `append` writes (pure: a worker thread may encode a large change)."""
        return rec.build_batch([rec.Record(key=None, value=encode_entry(t, v)) for t, v in entries])

    def append_batch(self, batch: bytes) -> None:
        """Append a batch made by `encode` and fsync it. Blocking: `commit` runs it in a worker thread (one at a
        time); start-up code that runs before serving may call it directly."""
        self._log.append(batch, log_append_time=None)
        self._log.flush()
