"""A SparkSession for the Spark tests and the processes they start: `new_session(app, master)` runs the Python
workers on this venv's interpreter (PYSPARK_PYTHON), loopback only, and also connects to a standalone cluster
(`spark://...`, the `spark_standalone` fixture): one executor of 1 core per worker. `spark_env()` is the
environment a Spark driver started in a process of its own needs."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.helpers.broker_process import venv_python


def spark_env() -> dict[str, str]:
    python = venv_python()
    return {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1"}


def new_session(app: str, master: str = "local[2]"):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("no Java runtime: `make test` installs one (openjdk-17-jre-headless)")
    os.environ.update(spark_env())
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app)
    if master.startswith("spark://"):  # an executor per worker (1 core, 1 GiB), in JVMs of their own
        builder = (builder.config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
                   .config("spark.cores.max", "2"))
    spark = (builder
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.stopTimeout", "30s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from shoal_spark import ShareSource

    spark.dataSource.register(ShareSource)
    return spark
