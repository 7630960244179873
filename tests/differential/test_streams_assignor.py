"""Shoal's streams `sticky` task assignor against Kafka 4.4's own (StickyTaskAssignor from the broker's jar, run by
tests/java/src/shoal/javaclients/StickyAssignorReferee.java): the same groups, drawn at random from a fixed seed
(members with UUID-like ids on shared processes, current active and standby tasks, reported task offsets with
ties, stateless and stateful subtopologies, up to two standby replicas), must get the same assignment, member by
member. No broker is involved: the referee is Kafka's class itself, so ties broken by Java's hash maps and
priority queues are compared too.
"""

from __future__ import annotations

import json
import random
import subprocess
from typing import Any

import pytest

from broker.groups.streams.assignor import MemberSpec, assign
from broker.groups.streams.group import TasksTuple
from broker.groups.streams.topology import ConfiguredSubtopology, InternalTopic
from tests.helpers import java_clients, kafka_dist

pytestmark = pytest.mark.integration

CASES = 400
SEED = 1071


def _case(rng: random.Random) -> dict[str, Any]:
    subtopologies = [{"id": str(i), "partitions": rng.randint(1, 6), "stateful": rng.random() < 0.7}
                     for i in range(rng.randint(1, 3))]
    processes = [f"process-{rng.getrandbits(64):016x}" for _ in range(rng.randint(1, 4))]
    members: list[dict[str, Any]] = [
        {"id": f"{rng.getrandbits(88):022x}", "process": rng.choice(processes), "active": {}, "standby": {},
         "offsets": []} for _ in range(rng.randint(1, 6))]
    for s in subtopologies:
        for p in range(s["partitions"]):
            owner = rng.choice(members + [None])
            if owner is not None:
                owner["active"].setdefault(s["id"], []).append(p)
            if s["stateful"]:
                for m in members:
                    if m is not owner and rng.random() < 0.25:
                        m["standby"].setdefault(s["id"], []).append(p)
                    if rng.random() < 0.4:
                        m["offsets"].append([s["id"], p, rng.choice([0, 10, 10, 500, rng.randint(0, 1000)])])
    return {"subtopologies": subtopologies, "standbys": rng.randint(0, 2), "members": members}


def _kafka(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cmd = kafka_dist.java_command("shoal.javaclients.StickyAssignorReferee", [], jvm_opts=java_clients.JVM_OPTS,
                                  classpath_prefix=[java_clients.classes()])
    done = subprocess.run(cmd, input=json.dumps(cases), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def _shoal(case: dict[str, Any]) -> dict[str, Any]:
    store = InternalTopic("changelog", 1, 0, ())
    subs = {s["id"]: ConfiguredSubtopology(number_of_tasks=s["partitions"], source_topics=frozenset(),
                                           repartition_source_topics={}, repartition_sink_topics=frozenset(),
                                           state_changelog_topics={"changelog": store} if s["stateful"] else {})
            for s in case["subtopologies"]}
    specs = [MemberSpec(m["id"], m["process"],
                        TasksTuple({k: frozenset(v) for k, v in m["active"].items()},
                                   {k: frozenset(v) for k, v in m["standby"].items()}),
                        {(s, p): o for s, p, o in m["offsets"]}) for m in case["members"]]
    out = {}
    for mid, tasks in assign(specs, subs, case["standbys"]).items():
        out[mid] = {kind: {s: sorted(ps) for s, ps in sorted(getattr(tasks, kind).items()) if ps}
                    for kind in ("active", "standby")}
    return out


def test_the_sticky_assignor_matches_kafkas():
    rng = random.Random(SEED)
    cases = [_case(rng) for _ in range(CASES)]
    kafka = _kafka(cases)
    differing = [(i, case, kafka[i], _shoal(case)) for i, case in enumerate(cases) if kafka[i] != _shoal(case)]
    assert not differing, (f"{len(differing)} of {CASES} groups assigned differently; the first: case "
                           f"{json.dumps(differing[0][1])}\nKafka: {differing[0][2]}\nShoal: {differing[0][3]}")
