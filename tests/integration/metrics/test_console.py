"""The share-group console against a broker with live clients: a confluent ShareConsumer holding acquired records,
having accepted some, rejected some (to the group's DLQ) and released some that were redelivered; a classic
consumer group and a consumer-protocol (KIP-848) group with committed offsets. The JSON API is checked against what
the broker reports through its admin APIs (DescribeShareGroupOffsets and ShareGroupDescribe with Shoal's admin
client; DescribeGroups, ConsumerGroupDescribe and OffsetFetch with confluent's AdminClient; ListOffsets), and the
page is loaded in headless Chromium and its DOM checked."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import AcknowledgeType, Consumer, ConsumerGroupTopicPartitions, TopicPartition

from shoal_client.admin import EARLIEST, LATEST, ShareGroupAdmin
from tests.helpers.bounded_close import close_within
from tests.helpers.broker_process import start_broker
from tests.helpers.browser import artifact_dir, headless_chromium
from tests.helpers.confluent_clients import admin_client, alter_group_config, create_topic, produce_all
from tests.helpers.share_consumers import consumer, earliest, messages
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC, GROUP, CLASSIC, MODERN, DLQ = "c-topic", "c-share", "c-classic", "c-consumer", "dlq.c-topic"
N = 100
ON = {"metrics.prometheus.listener": "127.0.0.1:0", "errors.deadletterqueue.auto.create.topics.enable": "true",
      "group.share.record.lock.duration.ms": "600000", "group.share.max.record.lock.duration.ms": "3600000"}
# The window the consumer leaves behind: (first, last, state, delivery count, held by the consumer).
EXPECTED = [(0, 9, "ACQUIRED", 2, True), (10, 39, "ACKNOWLEDGED", 1, False), (40, 49, "ARCHIVED", 1, False),
            (50, 59, "ACKNOWLEDGED", 2, False), (60, 69, "AVAILABLE", 2, False), (70, 79, "ACQUIRED", 2, True),
            (80, 99, "ACKNOWLEDGED", 1, False)]
COUNTS = {"ACQUIRED": 20, "ACKNOWLEDGED": 60, "ARCHIVED": 10, "AVAILABLE": 10}
READ_DOM = """
const [group, topic, classic] = arguments;
if (document.body.dataset.loaded !== "true") return null;
const card = document.querySelector(`.share-partition[data-group="${group}"][data-topic="${topic}"][data-partition="0"]`);
if (!card) return null;
const attrs = (e, names) => Object.fromEntries(names.map((n) => [n, e.getAttribute("data-" + n)]));
return {
  counts: Object.fromEntries([...card.querySelectorAll(".count")].map((e) => [e.dataset.state, e.querySelector("b").textContent])),
  rows: [...card.querySelectorAll("tr.range")].map((e) => ({...attrs(e, ["first", "last", "state", "member"]),
                                                          count: e.dataset.deliveryCount})),
  rects: [...card.querySelectorAll("svg.window rect.range")].map((e) => attrs(e, ["state", "member"])),
  members: [...document.querySelectorAll(`.group[data-group="${group}"] tr.member`)].map((e) => e.dataset.memberId),
  lag: [...document.querySelectorAll(`.group[data-group="${classic}"] tr.lag td`)].map((e) => e.textContent),
  dlq: [...document.querySelectorAll(`.dlq[data-group="${group}"] tr.dlq-record`)].map((e) => e.dataset.sourceOffset),
};
"""


def api(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
        assert response.headers["Content-Type"].startswith("application/json")
        return json.loads(response.read())


def coalesced(ranges: list[dict]) -> list[tuple]:
    """Adjacent pieces with the same state, count and owner as one range (how acks split them is not the API)."""
    out: list[list] = []
    for r in ranges:
        key = (r["state"], r["delivery_count"], r["member"])
        if out and out[-1][1] + 1 == r["first"] and tuple(out[-1][2:]) == key:
            out[-1][1] = r["last"]
        else:
            out.append([r["first"], r["last"], *key])
    return [tuple(x) for x in out]


def expected_ranges(member: str) -> list[tuple]:
    return [(a, b, state, count, member if held else None) for a, b, state, count, held in EXPECTED]


def ack_round(c, want: set[int], ack, timeout: float = 60) -> dict[int, int]:
    """Poll until every offset of `want` arrived; acknowledge each as `ack(offset)` says (None: hold it)."""
    got: dict[int, int] = {}
    end = time.monotonic() + timeout
    while not want <= got.keys():
        assert time.monotonic() < end, f"got {sorted(got)}"
        for m in messages(c):
            got[m.offset()] = m.delivery_count()
            kind = ack(m.offset())
            if kind is not None:
                c.acknowledge(m, kind)
        c.commit_sync()
    return got


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("console")
    broker = start_broker(tmp, ON)
    share = None
    consumers: list[Consumer] = []
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        earliest(broker, GROUP)
        alter_group_config(admin_client(broker.bootstrap), GROUP, "errors.deadletterqueue.topic.name", DLQ)
        assert len(produce_all(broker.bootstrap, TOPIC, [b"v%d" % i for i in range(N)], **{"batch.size": 800})) == N

        share = consumer(broker, GROUP, TOPIC, "explicit")

        # Explicit acknowledgement: every record of a poll is acknowledged before the next poll, except in the last
        # one, whose unacknowledged records the consumer keeps holding.
        def first(offset: int):
            if 10 <= offset < 40 or offset >= 80:
                return AcknowledgeType.ACCEPT
            if 40 <= offset < 50:
                return AcknowledgeType.REJECT
            return AcknowledgeType.RELEASE  # 0-9 and 50-79 come back

        got = ack_round(share, set(range(N)), first)
        assert set(got.values()) == {1}
        # The released records come back together (delivery count 2): accept 50-59, release 60-69 again, hold
        # 0-9 and 70-79.
        again = ack_round(share, set(range(10)) | set(range(50, 80)), lambda o: (
            AcknowledgeType.ACCEPT if 50 <= o < 60 else AcknowledgeType.RELEASE if 60 <= o < 70 else None))
        assert set(again.values()) == {2}

        # A classic consumer group member with a committed offset (lag 60), and a consumer-protocol (KIP-848)
        # member with offset 90 (lag 10).
        for group, offset, protocol in ((CLASSIC, 40, "classic"), (MODERN, 90, "consumer")):
            c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": protocol,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
            consumers.append(c)
            c.subscribe([TOPIC])
            wait_until(lambda c=c: c.poll(0.2) is not None, 30, f"the {protocol} consumer to get a record")
            c.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)

        port = broker.ports["prometheus"]
        with ShareGroupAdmin(broker.bootstrap) as admin:
            member = admin.describe_share_group(GROUP).members[0].member_id
        path = f"/api/share-groups/{GROUP}/partitions/{TOPIC}/0"
        wait_until(lambda: coalesced(api(port, path)["ranges"]) == expected_ranges(member), 30,
                   "the share-partition to settle")
        yield broker, member
    finally:
        for c in [share, *consumers]:
            if c is not None:
                close_within(c)
        broker.stop()


def test_json_api_matches_what_the_admin_apis_report(scene):
    broker, member = scene
    port = broker.ports["prometheus"]

    sp = api(port, f"/api/share-groups/{GROUP}/partitions/{TOPIC}/0")
    assert coalesced(sp["ranges"]) == expected_ranges(member)
    assert {k: sp[k.lower()] for k in COUNTS} == COUNTS
    assert (sp["start_offset"], sp["end_offset"], sp["high_watermark"], sp["lag"]) == (0, N, N, 30)
    assert all(r["lock_deadline_ms"] > sp["now_ms"] for r in sp["ranges"] if r["state"] == "ACQUIRED")
    assert not sp["ranges_truncated"]

    groups = {g["group_id"]: g for g in api(port, "/api/groups")["groups"]}
    with ShareGroupAdmin(broker.bootstrap) as admin:
        # DescribeShareGroupOffsets: the share-partition's start offset and lag as the share coordinator has them.
        offsets = {(o.topic, o.partition): o for o in admin.share_group_offsets(GROUP)}
        described = admin.describe_share_group(GROUP)
        high = admin.list_offsets({(TOPIC, 0)}, LATEST)[(TOPIC, 0)]
        low = admin.list_offsets({(TOPIC, 0)}, EARLIEST)[(TOPIC, 0)]
    assert offsets[(TOPIC, 0)].start_offset == sp["start_offset"]
    assert offsets[(TOPIC, 0)].lag == sp["lag"]
    share = groups[GROUP]
    assert share["type"] == "share" and share["dlq_topic"] == DLQ
    assert (share["state"], share["epoch"]) == (described.state, described.group_epoch)
    assert {(m["member_id"], m["client_id"]) for m in share["members"]} == {
        (m.member_id, m.client_id) for m in described.members}
    assert [m["assignment"] for m in share["members"]] == [[{"topic": TOPIC, "partitions": [0]}]]
    [summary] = share["share_partitions"]
    assert {k: v for k, v in summary.items() if k in sp} == {k: sp[k] for k in summary}

    # DescribeGroups and OffsetFetch for the classic group.
    admin = admin_client(broker.bootstrap)
    desc = admin.describe_consumer_groups([CLASSIC])[CLASSIC].result(timeout=30)
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(CLASSIC)])[CLASSIC].result(timeout=30)
    classic = groups[CLASSIC]
    assert classic["type"] == "classic"
    assert classic["state"].lower() == desc.state.name.lower().replace("_", "")
    assert {m["member_id"] for m in classic["members"]} == {m.member_id for m in desc.members}
    [(topic, partition, offset)] = [(tp.topic, tp.partition, tp.offset) for tp in committed.topic_partitions]
    assert classic["offsets"] == [{"topic": topic, "partition": partition, "committed_offset": offset,
                                   "high_watermark": high, "lag": high - offset}]

    # ConsumerGroupDescribe (KIP-848) for the consumer-protocol group: members, their assignment, epoch.
    modern_desc = admin.describe_consumer_groups([MODERN])[MODERN].result(timeout=30)
    modern = groups[MODERN]
    assert modern["type"] == "consumer" and modern["state"].lower() == modern_desc.state.name.lower()
    assert {m["member_id"]: m["assignment"] for m in modern["members"]} == {
        m.member_id: [{"topic": TOPIC, "partitions": sorted(tp.partition for tp in m.assignment.topic_partitions)}]
        for m in modern_desc.members}
    assert modern["offsets"] == [{"topic": TOPIC, "partition": 0, "committed_offset": 90, "high_watermark": high,
                                  "lag": high - 90}]

    # Topics: the partition's offsets as ListOffsets gives them.
    topics = {t["name"]: t for t in api(port, "/api/topics")["topics"]}
    [p0] = topics[TOPIC]["partitions"]
    assert (p0["log_start_offset"], p0["high_watermark"]) == (low, high) == (0, N)
    assert topics["__consumer_offsets"]["internal"] and not topics[TOPIC]["internal"]

    # The DLQ: one record per rejected offset, with Kafka's context headers.
    dlq = api(port, f"/api/share-groups/{GROUP}/dlq")
    assert dlq["topic"] == DLQ and dlq["exists"]
    assert sorted(int(r["headers"]["__dlq.errors.offset"]) for r in dlq["records"]) == list(range(40, 50))
    for r in dlq["records"]:
        h = r["headers"]
        assert (h["__dlq.errors.topic"], h["__dlq.errors.partition"], h["__dlq.errors.group"]) == (TOPIC, "0", GROUP)
        assert h["__dlq.errors.delivery.count"] == "1"
        assert h["__dlq.errors.message"] == "Offset rejected by client."

    # The page: its own script only (the browser test shows it runs under this policy).
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as response:
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]
        assert b'<script src="/static/console.js">' in response.read()

    # Bad requests get errors, not crashes.
    for path, code in ((f"/api/share-groups/{GROUP}/partitions/{TOPIC}/x", 400),
                       (f"/api/share-groups/{GROUP}/partitions/nope/0", 404),
                       ("/static/../service.py", 404), ("/static/nothing.js", 404)):
        with pytest.raises(urllib.error.HTTPError) as err:
            api(port, path)
        assert err.value.code == code, path


def test_page_renders_the_live_state_in_chromium(scene):
    broker, member = scene
    port = broker.ports["prometheus"]
    out = artifact_dir("console")
    with headless_chromium() as driver:
        driver.get(f"http://127.0.0.1:{port}/")

        # Read in one script: the page re-renders on every refresh, so elements found by one call may be gone by
        # the next; one script runs between two refreshes.
        def snapshot() -> dict | None:
            return driver.execute_script(READ_DOM, GROUP, TOPIC, CLASSIC)

        wait_until(lambda: (snapshot() or {}).get("counts"), 30, "the console to render")
        dom = snapshot()
        assert {k: int(v) for k, v in dom["counts"].items()} == COUNTS
        rows = [{"first": int(r["first"]), "last": int(r["last"]), "state": r["state"],
                 "delivery_count": int(r["count"]), "member": r["member"]} for r in dom["rows"]]
        assert coalesced(rows) == expected_ranges(member)
        # The picture: one rectangle per range, every state drawn, acquired ones carrying the member id.
        assert len(dom["rects"]) == len(rows)
        assert {r["state"] for r in dom["rects"]} == set(COUNTS)
        assert {r["member"] for r in dom["rects"] if r["state"] == "ACQUIRED"} == {member}
        # Groups: the share group's member, the classic group's lag; the DLQ's records.
        assert dom["members"] == [member]
        assert dom["lag"] == [TOPIC, "0", "40", "100", "60"]
        assert sorted(int(o) for o in dom["dlq"]) == list(range(40, 50))
        shot = out / "console.png"
        driver.save_screenshot(str(shot))
        print(f"console screenshot: {shot}")

        # Live refresh: a topic created after the page loaded shows up without a reload.
        create_topic(broker.bootstrap, "c-later", 2)
        wait_until(lambda: driver.execute_script(
            'return document.querySelectorAll(\'tr.topic-partition[data-topic="c-later"]\').length') == 2,
            60, "the new topic on the page")


# A group id with the characters a URL gives a meaning to: the path's separator, the escape, a space, the query's
# and the fragment's marks, and a non-ASCII letter.
ODD_GROUP, ODD_TOPIC = "team/a%b c?#é", "c-odd"
ODD_WINDOW = """
const [group] = arguments;
if (document.body.dataset.loaded !== "true") return null;
const cards = [...document.querySelectorAll("#share-partitions .share-partition")];
const link = [...document.querySelectorAll(".group")].find((e) => e.getAttribute("data-group") === group)
  ?.querySelector("a");
return {error: document.getElementById("error").hidden ? null : document.getElementById("error").textContent,
        first: cards.length ? cards[0].getAttribute("data-group") : null, href: link ? link.getAttribute("href") : null};
"""


def test_a_group_id_with_url_characters_in_the_api_and_the_page(scene):
    """Regression: the page named a share-partition in the URL's fragment without encoding it and decoded the
    fragment, so a group id with "%" threw on every refresh and the console stopped updating."""
    from urllib.parse import quote

    from tests.helpers.raw_requests import produce
    from tests.helpers.share_raw import acquired, batch, fetch, setup

    broker, _member = scene
    port = broker.ports["prometheus"]
    client, tid = setup(broker, ODD_TOPIC)
    with client:
        assert fetch(client, ODD_GROUP, "m1", 0, tid).error_code == 0  # loads the share-partition
        produce(client, ODD_TOPIC, batch(3))
        assert acquired(fetch(client, ODD_GROUP, "m1", 1, tid)) == [(0, 2, 1)]
        # The JSON API: the group id percent-encoded as one path segment ("/" as %2F).
        sp = api(port, f"/api/share-groups/{quote(ODD_GROUP, safe='')}/partitions/{ODD_TOPIC}/0")
        assert (sp["group"], sp["topic"], sp["partition"], sp["end_offset"]) == (ODD_GROUP, ODD_TOPIC, 0, 3)
        assert [(r["first"], r["last"], r["state"], r["member"]) for r in sp["ranges"]] == [(0, 2, "ACQUIRED", "m1")]
        dlq = api(port, f"/api/share-groups/{quote(ODD_GROUP, safe='')}/dlq")
        assert (dlq["group"], dlq["exists"]) == (ODD_GROUP, False)
        summary = {g["group_id"]: g for g in api(port, "/api/groups")["groups"]}[ODD_GROUP]["share_partitions"]
        assert [(s["group"], s["topic"]) for s in summary] == [(ODD_GROUP, ODD_TOPIC)]

        # The page: the group's link names its window in the fragment; followed, that window comes first and the
        # page keeps refreshing without an error.
        key = "/".join(quote(part, safe="") for part in (ODD_GROUP, ODD_TOPIC, "0"))
        with headless_chromium() as driver:
            driver.get(f"http://127.0.0.1:{port}/")
            page = wait_until(lambda: (w := driver.execute_script(ODD_WINDOW, ODD_GROUP)) and w["href"] and w, 60,
                              "the odd group's link on the page")
            assert page["href"] == "#" + key and page["error"] is None
            driver.get(f"http://127.0.0.1:{port}/{page['href']}")
            wait_until(lambda: (w := driver.execute_script(ODD_WINDOW, ODD_GROUP)) and w["first"] == ODD_GROUP, 60,
                       "the odd group's window first")
            seen = driver.execute_script("return document.getElementById('refreshed').textContent")
            wait_until(lambda: driver.execute_script("return document.getElementById('refreshed').textContent") != seen,
                       60, "another refresh")
            assert driver.execute_script(ODD_WINDOW, ODD_GROUP)["error"] is None


def test_a_streams_group_on_the_console_and_in_the_metrics(broker_factory):
    """A streams group (KIP-1071) is listed beside the other group types: its member with its active tasks
    ("subtopology 0" and the partitions of its source topic) and its committed offsets' lag on the console,
    its members and group epoch in the Prometheus metrics."""
    from tests.helpers.prometheus_scrape import scrape, value
    from tests.helpers.raw_client import RawClient
    from tests.helpers.raw_requests import create_topic as raw_create_topic
    from tests.helpers.streams_requests import heartbeat, set_group_configs, subtopology, topology_of

    broker = broker_factory(ON)
    port = broker.ports["prometheus"]
    with RawClient(broker.port) as raw:
        raw_create_topic(raw, "st-in", 2)
        assert set_group_configs(raw, "st-app", {"streams.initial.rebalance.delay.ms": "0",
                                                 "streams.assignment.interval.ms": "0"}) == (0, None)
        topology = topology_of(subtopology("0", sources=["st-in"]))
        answer = heartbeat(raw, "st-app", "st-member", 0, topology=topology, retry=True)
        assert answer["error_code"] == 0, answer
        owned: tuple[list, list, list] = (answer["active_tasks"] or [], answer["standby_tasks"] or [],
                                          answer["warmup_tasks"] or [])

        def assigned() -> bool:
            nonlocal answer, owned
            answer = heartbeat(raw, "st-app", "st-member", answer["member_epoch"], owned=owned)
            assert answer["error_code"] == 0, answer
            if answer["active_tasks"] is not None:
                owned = (answer["active_tasks"], answer["standby_tasks"] or [], answer["warmup_tasks"] or [])
            return bool(owned[0])

        wait_until(lambda: bool(owned[0]) or assigned(), 30, "the streams member to get its tasks")
        epoch = answer["member_epoch"]

        def listed() -> dict | None:
            rows = [g for g in api(port, "/api/groups")["groups"] if g["group_id"] == "st-app"]
            return rows[0] if rows and rows[0]["members"][0]["assignment"] else None

        wait_until(lambda: listed() is not None, 30, "the console to list the streams group with its tasks")
        group = listed()
        assert group is not None
        assert (group["type"], group["state"], group["member_count"]) == ("streams", "Stable", 1)
        [member] = group["members"]
        assert (member["member_id"], member["member_epoch"]) == ("st-member", epoch)
        assert member["assignment"] == [{"topic": "subtopology 0", "partitions": [0, 1]}]

    samples = scrape(port)
    assert value(samples, "shoal_group_members", group="st-app", type="streams") == 1
    assert value(samples, "shoal_groups", type="streams", state="Stable") == 1
