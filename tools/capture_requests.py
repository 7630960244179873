"""Capture real clients' request bytes as test fixtures.

Starts a tiny asyncio TCP server on a free 127.0.0.1 port that answers ApiVersions, Metadata,
InitProducerId, Produce, CreateTopics, GetTelemetrySubscriptions and PushTelemetry with minimal valid responses (built with our own
codecs), drives confluent-kafka and kafka-python against it, and writes every request frame
(without the size prefix) as hex to tests/unit/protocol/fixtures/<client>-<Api>-v<N>.hex.

    python tools/capture_requests.py [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from protocol import framing, schema  # noqa: E402
from protocol.codec import response_codec  # noqa: E402

TOPIC = "capture"
TOPIC_ID = uuid.UUID("6a1d3a4e-8a0b-4a43-9a54-2f9a1b6d7c01")


def response_body(api_key: int, version: int, request: Any, port: int) -> dict[str, Any] | None:
    if api_key == 18:  # ApiVersions: advertise what our schemas serve
        return {"error_code": 0, "api_keys": [
            {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
            for s in schema.api_specs().values()]}
    if api_key == 3:  # Metadata: one broker (us), one topic with one partition we lead
        return {
            "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}],
            "cluster_id": "shoal-capture", "controller_id": 1,
            "topics": [{"error_code": 0, "name": TOPIC, "topic_id": TOPIC_ID, "is_internal": False,
                        "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 1,
                                        "leader_epoch": 0, "replica_nodes": [1], "isr_nodes": [1],
                                        "offline_replicas": []}]}],
        }
    if api_key == 22:  # InitProducerId
        return {"error_code": 0, "producer_id": 1000, "producer_epoch": 0}
    if api_key == 0:  # Produce: everything lands at offset 0
        return {"responses": [
            {"name": t.name, "partition_responses": [
                {"index": p.index, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1,
                 "log_start_offset": 0} for p in t.partition_data]}
            for t in request.topic_data]}
    if api_key == 71:  # GetTelemetrySubscriptions: every metric, pushed every 100 ms, uncompressed or zstd
        return {"error_code": 0, "client_instance_id": uuid.UUID("3f1c5a2e-7b7d-4c8e-a4e1-9f0b2c3d4e5f"),
                "subscription_id": 7, "accepted_compression_types": [4], "push_interval_ms": 100,
                "telemetry_max_bytes": 1 << 20, "delta_temporality": True, "requested_metrics": ["*"]}
    if api_key == 72:  # PushTelemetry
        return {"error_code": 0}
    if api_key == 19:  # CreateTopics
        return {"topics": [{"name": t.name, "topic_id": TOPIC_ID, "error_code": 0, "num_partitions": 1,
                            "replication_factor": 1} for t in request.topics]}
    return None


class CaptureServer:
    def __init__(self) -> None:
        self.frames: list[tuple[int, int, bytes]] = []
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from protocol.codec import request_codec

        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
                frame = await reader.readexactly(size)
                header, offset = framing.decode_request_header(frame)
                self.frames.append((header.api_key, header.api_version, frame))
                spec = schema.api_specs().get(header.api_key)
                if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
                    if header.api_key == 18:  # unsupported ApiVersions version: answer v0 with error 35
                        body = response_codec(18, 0).encode({"error_code": 35, "api_keys": [
                            {"api_key": 18, "min_version": 0, "max_version": 4}]})
                        writer.write(framing.encode_response(header.correlation_id, 0, body))
                        await writer.drain()
                    continue
                request = request_codec(header.api_key, header.api_version).decode(frame[offset:])
                value = response_body(header.api_key, header.api_version, request, self.port)
                if value is None:
                    continue
                body = response_codec(header.api_key, header.api_version).encode(value)
                hv = framing.response_header_version(header.api_key, header.api_version)
                writer.write(framing.encode_response(header.correlation_id, hv, body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def drive_confluent(port: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "capture-confluent",
                  "linger.ms": 0, "message.timeout.ms": 5000, "enable.metrics.push": True})
    p.produce(TOPIC, key=b"k", value=b"hello shoal")
    p.flush(8)
    p.poll(1.0)  # a second of 100 ms telemetry pushes (KIP-714)
    a = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "capture-confluent-admin"})
    futures = a.create_topics([NewTopic("capture-new", 1, 1)], operation_timeout=3)
    for f in futures.values():
        with contextlib.suppress(Exception):
            f.result(timeout=5)


def drive_kafka_python(port: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", client_id="capture-kafka-python",
                      request_timeout_ms=5000, max_block_ms=5000)
    p.send(TOPIC, key=b"k", value=b"hello shoal").get(timeout=8)
    p.close(timeout=3)


async def capture(driver: Any) -> list[tuple[int, int, bytes]]:
    server = CaptureServer()
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = srv.sockets[0].getsockname()[1]
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            driver(server.port)
        except BaseException as e:  # report, but keep what was captured
            errors.append(e)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    while not done.is_set():
        await asyncio.sleep(0.05)
    srv.close()
    if errors:
        print(f"{driver.__name__}: {errors[0]!r}", file=sys.stderr)
    return server.frames


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "unit" / "protocol" / "fixtures")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = {s.api_key: s.name for s in schema.api_specs().values()}
    for client, driver in (("confluent", drive_confluent), ("kafka-python", drive_kafka_python)):
        seen = set()
        for api_key, version, frame in asyncio.run(capture(driver)):
            name = f"{client}-{names.get(api_key, api_key)}-v{version}"
            if name in seen:
                continue
            seen.add(name)
            (args.out / f"{name}.hex").write_text(frame.hex() + "\n")
            print(f"captured {name} ({len(frame)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
