"""Differential: the share-group dead-letter queue (KIP-1191, share.version=2) against Kafka 4.4 and Shoal.

Records a consumer rejects, and records that reach share.delivery.count.limit, are written to the group's
`errors.deadletterqueue.topic.name` topic (an existing topic whose `errors.deadletterqueue.group.enable` is true)
with context headers, and a copy of the original key and value when `errors.deadletterqueue.copy.record.enable`
is true. What lands in the DLQ topic is compared record by record (offsets, keys, values, headers).
"""

from __future__ import annotations

import time

import pytest

from protocol.records import iter_batch_views, iter_records
from tests.helpers.differential import Target, assert_same
from tests.helpers.raw_requests import fetch_partition
from tests.helpers.share_differential import (
    REJECT,
    RELEASE,
    Member,
    acknowledged,
    alter_group,
    fetched,
    make_topic,
    share_group,
)

pytestmark = pytest.mark.integration


def _dlq_records(raw, topic: str, want: int, timeout: float = 30.0) -> list:
    """The DLQ topic's records once `want` are there (Kafka writes them asynchronously)."""
    end = time.monotonic() + timeout
    while True:
        part = fetch_partition(raw, topic, 0)
        records = [r for _, _, view in iter_batch_views(bytes(part.records or b"")) for r in iter_records(view)]
        if len(records) >= want or time.monotonic() > end:
            return [{"offset": r.offset, "key": r.key, "value": r.value,
                     "headers": [(k, None if v is None else v.decode()) for k, v in r.headers]} for r in records]
        time.sleep(0.1)


@pytest.mark.parametrize("copy", ["true", "false"])
def test_rejected_and_exhausted_records_land_in_the_dlq(pair, copy):
    def scenario(target: Target):
        with target.raw() as raw:
            topic, tid = make_topic(target, raw, "dlq-src", [[2, 2]])
            dlq, _ = make_topic(target, raw, "dlq.dead", [[]], configs={"errors.deadletterqueue.group.enable": "true"})
            group = share_group(target, raw, "dlq-g", **{"share.delivery.count.limit": "2",
                                                       "errors.deadletterqueue.topic.name": dlq,
                                                       "errors.deadletterqueue.copy.record.enable": copy})
            m = Member(raw, group, target.unique("m"))
            m.join([topic], want=1)
            out = {"first": fetched(m.fetch({tid: [0]}, max_wait_ms=5000))}
            out["ack"] = acknowledged(m.acknowledge({(tid, 0): [(0, 1, REJECT), (2, 3, RELEASE)]}))
            out["again"] = fetched(m.fetch(max_wait_ms=1000))
            out["last"] = acknowledged(m.acknowledge({(tid, 0): [(2, 3, RELEASE)]}))
            out["dlq"] = _dlq_records(raw, dlq, 4)
            out["after"] = fetched(m.fetch(max_wait_ms=300))
            return out

    assert_same(pair.run(scenario), f"the DLQ, copy.record.enable={copy}")


def test_dlq_topic_configs_refused(pair):
    def scenario(target: Target):
        with target.raw() as raw:
            group = share_group(target, raw, "dlq-cfg")
            return [alter_group(raw, group, {"errors.deadletterqueue.topic.name": name})
                    for name in ("__consumer_offsets", "__internal-like", "", "dlq.fine")]

    assert_same(pair.run(scenario), "DLQ topic names as group configs")
