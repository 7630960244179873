"""Kafka Streams 4.4 applications against Shoal and against Kafka 4.4, classic group protocol, compared record
for record.

Four topologies (tests/java/src/shoal/streams/StreamsApps.java) run in one JVM per broker and guarantee: a
stateless filter/mapValues, a word count (groupBy -> repartition topic -> count in a changelogged store), a
stream-table left join, and a windowed sum (10 s tumbling windows of record time, suppressed until each window
closes). The inputs (keys, values, timestamps) are fixed and produced before the apps start. Each output is read
read_committed to its end, per partition and per key (value, timestamp) in offset order: a key's records are in
one partition and in the order the inputs fix, but the interleaving of keys within an output partition depends on
how the tasks of several input partitions were scheduled, so it is not compared. Shoal's output must equal
Kafka's, and both must equal what the inputs imply (the expected values computed here). So must the internal
topics the apps created (repartition and changelog topics: partitions and the configs set on them) and the offsets
each app's group committed on its inputs (their ends: every input record consumed).
"""

from __future__ import annotations

import concurrent.futures
import uuid

import pytest

from tests.helpers import java_clients
from tests.helpers import streams_apps as sa
from tests.helpers.differential import assert_same

GUARANTEES = ("at_least_once", "exactly_once_v2")


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_topologies_match_kafka(guarantee, kafka, broker_module, tmp_path):
    java_clients.classes()  # compile once, before two runs need it
    targets = {"kafka": kafka.bootstrap, "shoal": broker_module.bootstrap}
    loads = {name: [sa.workload(t, uuid.uuid4().hex[:8]) for t in sa.TOPOLOGIES] for name in targets}
    for name, bootstrap in targets.items():
        sa.create_topics(bootstrap, loads[name])
        sa.produce_inputs(bootstrap, loads[name])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = {name: pool.submit(sa.run_apps, bootstrap, guarantee, loads[name], tmp_path / name)
                for name, bootstrap in targets.items()}
        took = {name: run.result() for name, run in runs.items()}
    print(f"{guarantee}: apps ran {took['kafka']:.1f} s against Kafka, {took['shoal']:.1f} s against Shoal")
    for index, topology in enumerate(sa.TOPOLOGIES):
        seen = {name: sa.outputs(bootstrap, loads[name][index]) for name, bootstrap in targets.items()}
        assert_same(seen, f"{topology} output ({guarantee})")
        expected = loads["shoal"][index].expected
        for name in targets:
            assert sa.values_by_key(seen[name]) == expected, f"{topology} on {name}: not what the input implies"
        made = {name: sa.internal_topics(bootstrap, loads[name][index]) for name, bootstrap in targets.items()}
        assert_same(made, f"{topology}'s internal topics ({guarantee})")
        offsets = {name: sa.committed_offsets(bootstrap, loads[name][index]) for name, bootstrap in targets.items()}
        assert_same(offsets, f"{topology}'s committed offsets ({guarantee})")
        for name, bootstrap in targets.items():  # every input record consumed, and its offset committed
            assert offsets[name] == sa.input_end_offsets(bootstrap, loads[name][index]), name
