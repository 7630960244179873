"""Kafka Streams 4.4 word count with exactly_once_v2 against Shoal (classic group protocol) across failures:

- Shoal killed with SIGKILL in the middle of the run and started again on the same port and data: the app rides
  it out (its clients retry), and its committed output counts every input word exactly once.
- the application killed with SIGKILL in the middle of the run and started again with the same application id,
  with an empty state directory, or with its state directory and a static group membership: its store is restored
  from the changelog topic, and the committed output again counts every word once.
- a second instance joining mid-run and the first leaving: tasks move both ways, each word is counted once.

The input is produced while the app runs (a line producer at a fixed rate), so the kill lands while transactions
are open. The check reads the input back as the broker holds it and the output read_committed: each word's
counts must be exactly 1, 2, ..., n, n being its occurrences in the input (a repeat is a word counted twice, a
gap or a short tail one lost).
"""

from __future__ import annotations

import shutil
import time

import pytest

from tests.helpers import streams_apps as sa
from tests.helpers import txn_clients
from tests.helpers.broker_process import free_port
from tests.helpers.confluent_clients import read_partitions
from tests.helpers.raw_client import RawClient
from tests.helpers.waiting import holds_throughout, wait_until

GUARANTEE = "exactly_once_v2"
# How often the apps killed with a transaction open commit: seldom, so that a transaction is open, and not
# committing, nearly all the time (the kill must not land in a commit, which the coordinator would complete).
COMMIT_INTERVAL_MS = "3000"
# The input of those apps flows in over about 13 s, several commit intervals: the kill comes after the first
# commit, in the next transaction, with input still to come whatever the machine's load.


def _when_a_transaction_is_open(port: int, load: sa.Workload, app: sa.StreamsRun, kill) -> None:
    """Call `kill` once the app's transaction is Ongoing with records in the output (not yet committing).

    The app is paused (SIGSTOP) while the broker is asked and until the kill, so it cannot begin committing in
    between; the transaction must still be open after a short while paused, so that a commit the app sent just
    before it stopped has been served (and seen) first."""
    with RawClient(port) as c:
        def ongoing() -> bool:
            return (any(txn_clients.open_producer_transactions(c, load.output, sa.PARTITIONS).values())
                    and bool(txn_clients.ongoing_transactions(c)))

        def killed_while_open() -> bool:
            if not ongoing():
                return False
            with app.paused():
                if not holds_throughout(ongoing, 0.3):
                    return False
                kill()
                return True
        wait_until(killed_while_open, 60, "a transaction open on the output")


def _input_lines(load: sa.Workload) -> tuple[str, list[tuple[str, str]]]:
    [(topic, records)] = load.inputs.items()
    return topic, [(r.key, r.value) for r in records]


def _check_counted_once(bootstrap: str, load: sa.Workload, topic: str, lines: list[tuple[str, str]]) -> dict:
    held = read_partitions(bootstrap, topic, sa.PARTITIONS, keys=True)
    got = sorted((key.decode(), value.decode()) for p in held.values() for _, key, value in p)
    assert got == sorted(lines), "the input topic does not hold each line once"
    out = sa.outputs(bootstrap, load)
    counts = sa.values_by_key(out)
    assert counts == load.expected, {w: (counts.get(w, [])[-3:], len(counts.get(w, [])), len(n))
                                     for w, n in load.expected.items()}
    everything = read_partitions(bootstrap, load.output, sa.PARTITIONS)  # read_uncommitted: aborted ones too
    return {"committed": load.expect, "written": sum(map(len, everything.values()))}


# Back at once, the app's producer retries its in-flight requests and finishes its transaction. Down longer than
# the app's transaction.timeout.ms (Streams' 10 s), with the coordinator's scan for timed-out transactions every
# 100 ms, the restarted coordinator aborts the open transaction as expired (bumping the producer's epoch) before
# the app's producer is back, so the app must find itself fenced, rejoin and redo the aborted work.
@pytest.mark.parametrize("protocol,down_s", [("classic", 0), ("classic", 11), ("streams", 0)],
                         ids=["back-at-once", "down-past-the-transaction-timeout", "streams-protocol-back-at-once"])
def test_word_count_counts_each_word_once_across_a_shoal_kill9(protocol, down_s, broker_factory, tmp_path):
    """Also on the streams group protocol (KIP-1071): the restarted group coordinator replays the streams group's
    records and the app's member goes on with its tasks."""
    port = free_port()  # the broker comes back on the same port: the app's bootstrap stays valid
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}",
                             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    load = sa.workload("wordcount", scale=15)
    topic, lines = _input_lines(load)
    sa.create_topics(broker.bootstrap, [load])
    # Commits seldom while input flows in: the kill finds a transaction open, with records written.
    run = sa.StreamsRun.start(broker.bootstrap, GUARANTEE, [load.spec()], tmp_path / "state", tmp_path / "app.log",
                              timeout_s=240, config={"commit.interval.ms": COMMIT_INTERVAL_MS},
                              group_protocol=protocol)
    producer = sa.LineProducer(broker.bootstrap, topic, lines, rate=45)
    watcher = sa.OutputWatcher(broker.bootstrap, load.output)
    try:
        run.wait_state(load.app_id, "RUNNING", 60)
        producer.start()
        wait_until(lambda: watcher.count() > 0, 90, "the first counts committed")
        watcher.close()
        _when_a_transaction_is_open(port, load, run, broker.kill9)
        time.sleep(down_s)  # the scenario itself: how long the broker stays down
        broker.start()
        producer.join(180)
        assert not producer.is_alive() and producer.errors == []
        rc = run.wait_exit(240)
        assert rc == 0 and run.done(), f"the app exited with {rc}:\n{run.tail()}"
    finally:
        watcher.close()
        run.kill9()
    figures = _check_counted_once(broker.bootstrap, load, topic, lines)
    print(f"kill -9 of Shoal ({protocol} protocol), down {down_s} s: {figures}")
    if down_s:  # the open transaction was aborted, its records left in the log, unread under read_committed
        assert figures["written"] > figures["committed"], figures


# state-wiped: the restarted app has an empty state directory, so its store is restored from the changelog; its
#   transactional id is new (a new process id: the directory that held it is gone), so only the coordinator's
#   timeout aborts the dead app's open transaction (scanned for every 100 ms here), and the dead member leaves the
#   group by its session timeout.
# state-kept-static: the restarted app keeps its state directory (EOS finds the stores without a checkpoint,
#   wipes them and restores them from the changelog all the same) and its static membership (group.instance.id):
#   the group takes the new member in the dead one's place at once, and its InitProducerId with the same
#   transactional id fences the dead app's producer and aborts its transaction.
@pytest.mark.parametrize("restart", ["state-wiped", "state-kept-static"])
def test_word_count_restores_its_store_from_the_changelog_after_an_app_kill9(restart, broker_factory, tmp_path):
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    load = sa.workload("wordcount", scale=10)
    topic, lines = _input_lines(load)
    sa.create_topics(broker.bootstrap, [load])
    state = tmp_path / "state"
    static = {"group.instance.id": f"{load.app_id}-instance"} if restart == "state-kept-static" else {}
    first = sa.StreamsRun.start(broker.bootstrap, GUARANTEE, [load.spec(expect=0)], state, tmp_path / "app1.log",
                                config={"commit.interval.ms": COMMIT_INTERVAL_MS, **static})
    producer = sa.LineProducer(broker.bootstrap, topic, lines, rate=30)
    watcher = sa.OutputWatcher(broker.bootstrap, load.output)
    try:
        first.wait_state(load.app_id, "RUNNING", 60)
        producer.start()
        wait_until(lambda: watcher.count() > 0, 90, "the first counts committed")
        watcher.close()
        _when_a_transaction_is_open(broker.port, load, first, first.kill9)
    finally:
        watcher.close()
        first.kill9()
    if restart == "state-wiped":
        shutil.rmtree(state)  # nothing local left: the counts so far are only in the changelog
    second = sa.StreamsRun.start(broker.bootstrap, GUARANTEE, [load.spec()], state, tmp_path / "app2.log",
                                 timeout_s=240, config=static)
    try:
        producer.join(120)
        assert not producer.is_alive() and producer.errors == []
        rc = second.wait_exit(240)
        assert rc == 0 and second.done(), f"the restarted app exited with {rc}:\n{second.tail()}"
    finally:
        second.kill9()
    figures = _check_counted_once(broker.bootstrap, load, topic, lines)
    print(f"kill -9 of the app, restarted {restart}: {figures}")
    assert figures["written"] > figures["committed"], figures  # the dead app's open transaction, aborted


def test_word_count_counts_each_word_once_while_instances_join_and_leave(broker, tmp_path):
    """Scale out then in under exactly_once_v2: a second instance of the app joins the group mid-run (a rebalance
    of the classic group moves tasks to it, Streams' assignor deciding), then the first closes and leaves, and
    the second takes every task back, restoring their stores from the changelogs. The input comes in three
    parts, each produced only once the step before it is done, so every step happens with input left to count
    whatever the machine's load."""
    load = sa.workload("wordcount", scale=9)
    topic, lines = _input_lines(load)
    parts = [lines[:len(lines) // 3], lines[len(lines) // 3:2 * len(lines) // 3], lines[2 * len(lines) // 3:]]

    def produce(part: list[tuple[str, str]]) -> None:
        producer = sa.LineProducer(broker.bootstrap, topic, part, rate=60)
        producer.start()
        producer.join(120)
        assert not producer.is_alive() and producer.errors == []

    sa.create_topics(broker.bootstrap, [load])
    first = sa.StreamsRun.start(broker.bootstrap, GUARANTEE, [load.spec(expect=0)], tmp_path / "state1",
                                tmp_path / "app1.log")
    second = None
    try:
        first.wait_state(load.app_id, "RUNNING", 60)
        produce(parts[0])
        second = sa.StreamsRun.start(broker.bootstrap, GUARANTEE, [load.spec()], tmp_path / "state2",
                                     tmp_path / "app2.log", timeout_s=240)
        second.wait_state(load.app_id, "RUNNING", 90)
        produce(parts[1])  # counted by both instances
        assert first.terminate(60) in (0, 143)  # a clean close (leaving the group); 143: the JVM's SIGTERM exit
        produce(parts[2])  # counted by the second alone
        rc = second.wait_exit(240)
        assert rc == 0 and second.done(), f"the second instance exited with {rc}:\n{second.tail()}"
    finally:
        first.kill9()
        if second is not None:
            second.kill9()
    figures = _check_counted_once(broker.bootstrap, load, topic, lines)
    print(f"scale out and in: {figures}, the first instance's states {first.states(load.app_id)}")
    assert first.states(load.app_id).count("REBALANCING") >= 2, "the first instance saw no rebalance"
