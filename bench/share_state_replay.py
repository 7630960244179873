"""Start-up replay of `__share_group_state` after many acknowledgements, with and without pruning.

    .venv/bin/python -m bench.share_state_replay [--acks 1000000] [--keys 100]

Runs an in-process broker (127.0.0.1, ephemeral port, temporary data directory, Kafka's default 50 state-topic
partitions and 500 updates per snapshot) and writes `--acks` WriteShareGroupState calls (one accepted offset
each, what the share-partition leader writes per acknowledgement) spread over `--keys` share-partitions, 500
concurrent calls at a time, then runs two prune rounds (as the periodic task would). Then it restarts the broker and reports how many records the share coordinator
replayed and how long that took, once with pruning (the default) and once with pruning disabled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from broker.app import Broker
from broker.config import load_config
from broker.share_coordinator import runtime as share_runtime
from broker.share_coordinator.state import StateBatch


async def _start(data: Path, prune: bool) -> Broker:
    overrides = ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={data}"]
    if not prune:
        overrides.append("share.coordinator.state.topic.prune.interval.ms=9223372036854775807")
    broker = Broker(load_config(None, overrides))
    await broker.start()
    return broker


async def _run(acks: int, keys: int, prune: bool) -> dict:
    share_runtime.PRUNE_AFTER_RECORDS = 20_000 if prune else 10**12
    with tempfile.TemporaryDirectory(prefix="shoal-replay-") as tmp:
        data = Path(tmp) / "data"
        broker = await _start(data, prune)
        try:
            info = await broker.topics.create_topic("replay", num_partitions=1, replication_factor=-1,
                                                    assignments=[], configs={}, validate_only=False)
            state = broker.share_coordinator
            for k in range(keys):
                await state.initialize(f"g{k}", info.topic_id, 0, 0, 0)
            t0 = time.perf_counter()
            pending = []
            for i in range(acks):
                offset = i // keys
                pending.append(state.write_state(f"g{i % keys}", info.topic_id, 0, 0, -1, offset + 1,
                                                 [StateBatch(offset, offset, 2, 1)]))
                if len(pending) == 500:
                    await asyncio.gather(*pending)
                    pending = []
            await asyncio.gather(*pending)
            write_s = time.perf_counter() - t0
            if prune:
                # Two rounds, as the periodic task would run them: the second re-snapshots share-partitions
                # whose latest snapshot predates the first, then prunes up to the oldest snapshot still needed.
                await state.prune()
                await state.prune()
            logs = [state.log.partition_log(p) for p in range(state.log.num_partitions)]
            kept = sum(p.log_end_offset - p.log_start_offset for p in logs)
            written = sum(p.log_end_offset for p in logs)
        finally:
            await broker.stop()
        t0 = time.perf_counter()
        broker = await _start(data, prune)
        start_s = time.perf_counter() - t0
        try:
            replayed = broker.share_coordinator.last_load_records
        finally:
            await broker.stop()
    return {"pruning": prune, "acks": acks, "keys": keys, "records_written": written, "records_kept": kept,
            "records_replayed": replayed, "write_s": round(write_s, 1), "restart_s": round(start_s, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.share_state_replay")
    parser.add_argument("--acks", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args(argv)
    for prune in (True, False):
        result = asyncio.run(_run(args.acks, args.keys, prune))
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
