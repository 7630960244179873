"""`ShareSource`: the PySpark Python Data Source named "shoal" (a Shoal/Kafka share group as a table or stream).

    from shoal_spark import ShareSource
    spark.dataSource.register(ShareSource)
    df = (spark.readStream.format("shoal")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .option("group.id", "spark-pipeline")
          .load())

Options are parsed when the DataFrame is loaded (this class's __init__ runs then), so an unknown or missing option
fails at `load()`.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from shoal_spark.options import parse_options
from shoal_spark.schema import spark_schema


class ShareSource(DataSource):
    def __init__(self, options) -> None:
        super().__init__(options)
        self.source_options = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return "shoal"

    def schema(self):
        return spark_schema()

    def streamReader(self, schema):
        from shoal_spark.stream import ShareStreamReader

        return ShareStreamReader(self.source_options)

    def reader(self, schema):
        from shoal_spark.batch import ShareBatchReader

        return ShareBatchReader(self.source_options)
