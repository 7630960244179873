"""Raw DescribeClientQuotas (48) / AlterClientQuotas (49) requests (no installed client exposes these APIs), and
clients measured against a quota: real clients at their default settings over a whole run, and raw requests
pipelined behind throttled ones."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, ShareConsumer

from tests.helpers.confluent_clients import share_from_earliest
from tests.helpers.raw_client import RawClient

DESCRIBE, ALTER = 48, 49


def alter(client: RawClient, entity: dict[str, str | None], ops: dict[str, float | None], *,
          validate_only: bool = False, version: int = 1):
    """Set (a float) or remove (None) quota keys of one entity; returns the response's entries."""
    body = {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                         "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                                 for k, v in ops.items()]}],
            "validate_only": validate_only}
    return client.call(ALTER, version, body).entries


def describe(client: RawClient, components: list[tuple[str, int, str | None]], *, strict: bool = False,
             version: int = 1):
    body = {"components": [{"entity_type": t, "match_type": m, "match": v} for t, m, v in components],
            "strict": strict}
    return client.call(DESCRIBE, version, body)


def as_dict(response) -> dict[tuple, dict[str, float]]:
    """{((type, name), ...): {key: value}} of a DescribeClientQuotas response."""
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry["values"]} for entry in response.entries}


# --- clients held to a quota ------------------------------------------------------------------------------------


def pipelined(client: RawClient, requests: list[tuple[int, int, dict]]) -> list[tuple[float, object]]:
    """Send every request without waiting for any answer (a client pipelining) and read the answers as they come;
    (arrival time, response) of each, in order. The requests are sent from a thread of their own: a broker that
    reads nothing more from a throttled connection blocks the sending, not the reading of the answers."""
    sent: queue.Queue[tuple[int, int, int] | BaseException] = queue.Queue()

    def send() -> None:
        try:
            for api_key, version, body in requests:
                sent.put((api_key, version, client.send(api_key, version, body)))
        except BaseException as err:  # noqa: BLE001 - handed to the reading side, which raises it
            sent.put(err)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    answers = []
    for _ in requests:
        item = sent.get(timeout=60)
        if isinstance(item, BaseException):
            raise item
        answers.append(client.receive(*item))
        answers[-1] = (time.monotonic(), answers[-1])
    sender.join(60)
    return answers


def throttle_gaps(answers: list[tuple[float, object]]) -> list[tuple[float, float]]:
    """(throttle_time_ms / 1000 of an answer, seconds until the next answer came) of each throttled answer but the
    last: a request pipelined behind a throttled one must wait that throttle out (Kafka reads nothing more from
    the connection meanwhile)."""
    return [(a.throttle_time_ms / 1000, t_next - t) for (t, a), (t_next, _b) in itertools.pairwise(answers)
            if a.throttle_time_ms > 0]


@dataclass
class Run:
    """What a client moved over its whole run, measured on the client's side: from before its first call to its
    last record."""
    bytes: int
    seconds: float
    throttled: int = 0  # throttle events the client reported (librdkafka's throttle_cb)

    @property
    def rate(self) -> float:
        return self.bytes / self.seconds


def produce_at_defaults(bootstrap: str, topic: str, client_id: str, total: int, value_size: int = 1000) -> Run:
    """Produce `total` bytes of `value_size`-byte records to partition 0 with librdkafka's default settings (as
    much in flight as it likes, batches of up to about 1 MB), linger.ms=5 (also its default)."""
    run = Run(0, 0.0)
    last = [0.0]

    def delivered(err, msg) -> None:
        assert err is None, err
        run.bytes += len(msg.value())
        last[0] = time.monotonic()

    def throttled(event) -> None:
        if event.throttle_time > 0:
            run.throttled += 1

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "throttle_cb": throttled})
    value = b"q" * value_size
    began = time.monotonic()
    for _ in range(total // value_size):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=delivered)
                break
            except BufferError:  # the client's own queue is full: wait for deliveries
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0, "records left undelivered"
    run.seconds = last[0] - began
    return run


def consume_at_defaults(bootstrap: str, topic: str, client_id: str, count: int, *, share: bool = False) -> Run:
    """Read `count` records of `topic` from its start with a Consumer (or a ShareConsumer of a fresh share group)
    at librdkafka's default settings."""
    group = f"{client_id}-group"
    if share:
        share_from_earliest(bootstrap, group)
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": group})
    else:
        consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": group,
                             "auto.offset.reset": "earliest"})
    run, got = Run(0, 0.0), 0
    began = time.monotonic()
    try:
        consumer.subscribe([topic])
        deadline = began + 120
        while got < count:
            assert time.monotonic() < deadline, f"{got} of {count} records read in 120 s"
            for msg in consumer.poll(1.0) if share else consumer.consume(1000, 1.0):
                assert msg.error() is None, msg.error()
                got += 1
                run.bytes += len(msg.value())
        run.seconds = time.monotonic() - began
    finally:
        consumer.close()
    return run
