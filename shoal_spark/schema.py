"""The source's row schema: Spark's Kafka source columns plus `deliveryCount`.

`ARROW_SCHEMA` is what executors build RecordBatches in; it must equal PySpark's
`to_arrow_schema(spark_schema(), timezone="UTC")` exactly (types, names, nullability), which a test checks.
"""

from __future__ import annotations

import pyarrow as pa

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers", "deliveryCount")

_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", pa.list_(pa.field("element", _HEADER))),
    pa.field("deliveryCount", pa.int32()),
])


def spark_schema():
    """The Spark StructType (pyspark imported here: the driver and executors have it, tools need not)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    return StructType([
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("headers", ArrayType(header)),
        StructField("deliveryCount", IntegerType()),
    ])
