"""The group coordinator (Kafka's role name), sans-IO: classic, consumer and share groups plus committed offsets,
in one group-id namespace on `__consumer_offsets`.

It owns one state machine per group type and the offset store, dispatches every replayed record to the part
that owns the record type (one replay pass on start), and answers which type a group id has, so that each
part can refuse a group id another type already uses, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import structlog

from . import records as group_records
from .records import Owner
from .share_config import ShareGroupConfig
from .share_coordinator_service import ShareGroupCoordinator

log = structlog.get_logger(__name__)

# name -> (topic id, partition count), or None if the topic does not exist (internal topics excluded)
TopicInfoLookup = Callable[[str], "tuple[UUID, int] | None"]
TopicNameLookup = Callable[[UUID], "str | None"]


class GroupCoordinator:
    def __init__(self, *, topic_info: TopicInfoLookup, topic_name: TopicNameLookup | None = None,
                 share_config: ShareGroupConfig | None = None) -> None:
        self._topic_info = topic_info
        self._topic_name = topic_name
        self.share = ShareGroupCoordinator(share_config, topic_info=topic_info, group_type_of=self.group_type_of,
                                           topic_name=topic_name)
        self.skipped_records = 0

    # ------------------------------------------------------------------------------------------------ types

    def group_type_of(self, group_id: str) -> str | None:
        """"classic", "consumer" or "share" for a group that exists, else None."""
        if group_id in self.share.groups:
            return "share"
        return None

    # ----------------------------------------------------------------------------------------------- replay

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> bool:
        """Apply one `__consumer_offsets` record; False if no part owns its type (skipped, as Kafka's loader
        skips unknown record types). Call `loaded(now_ms)` once every partition has been replayed."""
        owner = group_records.owner_of(key)
        if owner is Owner.SHARE:
            return self.share.replay(key, value)
        self.skipped_records += 1
        return False

    def loaded(self, now_ms: int) -> None:
        self.share.loaded(now_ms)

    def fresh(self) -> GroupCoordinator:
        """An empty coordinator with the same configuration (to rebuild state from the log)."""
        return GroupCoordinator(topic_info=self._topic_info, topic_name=self._topic_name,
                                share_config=self.share.config)

    def snapshot(self) -> dict[str, Any]:
        return {"share": self.share.snapshot()}
