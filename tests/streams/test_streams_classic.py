"""Kafka Streams 4.4 applications against Shoal and against Kafka 4.4, on the classic group protocol and on the
streams group protocol (KIP-1071, `group.protocol=streams`: the broker assigns the tasks and creates the internal
topics), compared record for record.

Four topologies (tests/java/src/shoal/streams/StreamsApps.java), each under at_least_once and exactly_once_v2:
a stateless filter/mapValues, a word count (groupBy -> repartition topic -> count in a changelogged store), a
stream-table left join, and a windowed sum (10 s tumbling windows of record time, suppressed until each window
closes). The eight apps run in one JVM per broker (the Kafka and the Shoal JVMs side by side), once per protocol;
each test compares one app. The inputs (keys, values, timestamps) are fixed and produced before the apps start.

Each output is read read_committed to its end, per partition and per key (value, timestamp) in offset order: a
key's records are in one partition and in the order the inputs fix, but the interleaving of keys within an output
partition depends on how the tasks of several input partitions were scheduled, so it is not compared. Shoal's
output must equal Kafka's, and both must equal what the inputs imply (the expected values computed here). So must
the internal topics the app created (repartition and changelog topics: partitions and the configs set on them) and
the offsets its group committed on its inputs (their ends: every input record consumed).
"""

from __future__ import annotations

import concurrent.futures
import uuid

import pytest

from tests.helpers import java_clients
from tests.helpers import streams_apps as sa
from tests.helpers.differential import assert_same

GUARANTEES = ("at_least_once", "exactly_once_v2")
APPS = [(guarantee, topology) for guarantee in GUARANTEES for topology in sa.TOPOLOGIES]


@pytest.fixture(scope="module", params=["classic", "streams"])
def ran(request, kafka, broker_module, tmp_path_factory):
    """Every app of APPS run to its end against Kafka and against Shoal with the group protocol of the param:
    ({target: bootstrap}, {target: {(guarantee, topology): Workload}})."""
    protocol = request.param
    java_clients.classes()  # compile once, before two runs need it
    targets = {"kafka": kafka.bootstrap, "shoal": broker_module.bootstrap}
    loads = {name: {app: sa.workload(app[1], uuid.uuid4().hex[:8], guarantee=app[0]) for app in APPS}
             for name in targets}
    for name, bootstrap in targets.items():
        sa.create_topics(bootstrap, list(loads[name].values()))
        sa.produce_inputs(bootstrap, list(loads[name].values()))
    tmp = tmp_path_factory.mktemp(f"streams-{protocol}")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = {name: pool.submit(sa.run_apps, bootstrap, GUARANTEES[0], list(loads[name].values()), tmp / name,
                                  group_protocol=protocol)
                for name, bootstrap in targets.items()}
        took = {name: run.result() for name, run in runs.items()}
    print(f"{protocol}: the apps ran {took['kafka']:.1f} s against Kafka, {took['shoal']:.1f} s against Shoal")
    return targets, loads


@pytest.mark.parametrize("app", APPS, ids=[f"{g}-{t}" for g, t in APPS])
def test_app_matches_kafka(app, ran):
    targets, loads = ran
    guarantee, topology = app
    seen = {name: sa.outputs(bootstrap, loads[name][app]) for name, bootstrap in targets.items()}
    assert_same(seen, f"{topology} output ({guarantee})")
    for name in targets:
        assert sa.values_by_key(seen[name]) == loads[name][app].expected, \
            f"{topology} on {name}: not what the input implies"
    made = {name: sa.internal_topics(bootstrap, loads[name][app]) for name, bootstrap in targets.items()}
    assert_same(made, f"{topology}'s internal topics ({guarantee})")
    offsets = {name: sa.committed_offsets(bootstrap, loads[name][app]) for name, bootstrap in targets.items()}
    assert_same(offsets, f"{topology}'s committed offsets ({guarantee})")
    for name, bootstrap in targets.items():  # every input record consumed, and its offset committed
        assert offsets[name] == sa.input_end_offsets(bootstrap, loads[name][app]), name
