"""Read Shoal (Kafka KIP-932) share groups from Spark: `spark.dataSource.register(ShareSource)`, then
`spark.readStream.format("shoal")` (at-least-once micro-batches) or `spark.read.format("shoal")` (a utility)."""

from shoal_spark.source import ShareSource

__all__ = ["ShareSource"]
