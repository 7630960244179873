"""A streaming query in a process of its own (so a test can kill -9 the driver): the shoal source into an
idempotent per-batch-id parquet sink, until the sink holds every record in 0..expect-1, then a clean stop.

    python -m tests.spark.stream_driver BOOTSTRAP TOPIC GROUP OUT CHECKPOINT EXPECT MAX_RECORDS_PER_TRIGGER [MASTER]

MASTER: local[2] (the default) or a standalone cluster's spark://127.0.0.1:PORT.

Prints "batch <id> <rows>" after each batch is written (the test watches for progress).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.helpers.spark_session import new_session
from tests.spark.helpers import written


def main(argv: list[str]) -> int:
    bootstrap, topic, group, out, checkpoint, expect, max_records, *master = argv
    out_dir = Path(out)
    spark = new_session("shoal-stream-driver", *master)

    def write(df, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(str(out_dir / f"batch={batch_id:06d}"))
        print(f"batch {batch_id} {sum(1 for _ in (out_dir / f'batch={batch_id:06d}').glob('*.parquet'))}",
              flush=True)

    df = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("group.id", group).option("maxRecordsPerTrigger", max_records).load())
    q = df.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint).start()
    want = set(range(int(expect)))
    while q.isActive and not want <= set(written(out_dir)):
        time.sleep(0.5)
    if q.exception() is not None:
        print(f"query failed: {q.exception()}", flush=True)
        return 1
    q.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
