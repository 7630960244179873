"""The batch reader (`spark.read.format("shoal")`): a utility without delivery guarantees.

Each of `numPartitions` executor tasks joins the share group as a member of its own, acquires up to `maxRecords`
records (stopping early when a fetch waited `pollTimeoutMs` and got nothing), yields them, and then, once Spark has
taken every row, acknowledges them according to `mode`:

- `peek` (default): RELEASE: the records become available again (their delivery count went up by one);
- `drain`: ACCEPT: the records are gone for the group, whether or not whatever consumed the DataFrame kept them.

Spark re-runs `read` for every action on an uncached DataFrame, and each run acquires whatever the group hands out
then: the DataFrame is not deterministic. Use `.cache()` (or one action), and for at-least-once processing use the
streaming source.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from shoal_client import ACCEPT, RELEASE, ShareGroupMember, acknowledgements
from shoal_spark.decode import decode
from shoal_spark.options import SourceOptions


class ShareBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        options.check_for("batch")
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.options.num_partitions)]

    def read(self, partition: InputPartition) -> Iterator:
        o = self.options
        member = ShareGroupMember(o.bootstrap_servers, o.group_id, o.topics, client_id=o.client_id,
                                  request_timeout_s=o.request_timeout_ms / 1000)
        member.start()
        acquired = []
        try:
            member.wait_for_assignment(o.request_timeout_ms / 1000)
            count = 0
            while count < o.max_records:
                result = member.fetch(max_records=o.max_records - count, max_bytes=64 << 20,
                                      max_wait_ms=o.poll_timeout_ms)
                if not result.acquired:
                    break
                acquired += result.acquired
                count += result.count
                for a in result.acquired:
                    batch = decode(a.topic, a.partition, a.records, a.ranges)
                    if batch.num_rows:
                        yield batch
            kind = ACCEPT if o.mode == "drain" else RELEASE
            member.close(acknowledgements(acquired, kind))
        finally:
            member.close()  # no-op after a normal close; on failure the session end releases everything
