"""Every API both brokers serve, sent by an unprivileged SASL/SCRAM user, against Kafka 4.4 and Shoal with the
StandardAuthorizer (sasl_pair): the errors each answer holds are compared API by API.

The user is made for this module on both brokers (a unique name, so no other test's ACLs reach it), and given READ
on one topic and two groups, nothing else; both brokers' group and transaction coordinators are made ready first
(Kafka creates its internal topics on first use). Each API's request (tests/helpers/api_requests.py) is sent twice,
as the user:
- "denied": naming a topic, a group and a transactional id it has no rights on;
- "read only": naming the topic and a group it may READ (a share-group API the second group), where most requests
  need more than READ (Produce, DeleteTopics, CreatePartitions, AlterConfigs...).
The walk runs once per broker, API after API in ascending key order (some requests change state a later one sees,
the same on both), at the highest version both serve. What is compared per API is every non-zero error code in the
answer, where it sits and its message (a success shows as no errors), or that the broker closed the connection or
did not answer within 3 s. APIs only one broker serves are listed, not compared.
"""

from __future__ import annotations

import hashlib
import os
import re

import pytest

from protocol import schema
from tests.helpers.api_requests import MAX_VERSION, REQUESTS, TOPIC_ID, UNCHECKED_REQUESTS, substitute
from tests.helpers.differential import KAFKA, SHOAL, Target, assert_same, known_difference, normalize
from tests.helpers.differential_admin import barrier, create_topics
from tests.helpers.sasl import SaslRefused, scram_raw_client
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.integration

REASON = "Quotas, ACLs and SASL"
PASSWORD = "walker-secret"
BODIES = {**REQUESTS, **UNCHECKED_REQUESTS}
SHARE_APIS = {76, 77, 78, 79, 90, 91, 92}
FIND_COORDINATOR, API_VERSIONS = 10, 18
# Kafka 4.4 serves these on its SASL listener, Shoal does not: UnregisterBroker (64), AddRaftVoter (80),
# RemoveRaftVoter (81), StreamsGroupTopologyDescriptionUpdate (93), UnregisterController (94).
ONLY_KAFKA = [64, 80, 81, 93, 94]
# Shoal serves client telemetry (GetTelemetrySubscriptions 71, PushTelemetry 72); Kafka only with a metrics reporter.
ONLY_SHOAL = [71, 72]
# Kafka's message for these cluster-level refusals prints its internal request object (connection ids, object
# hashes): "Request Request(...) needs <OPERATION> permission." Shoal answers Errors' message.
REQUEST_PRINTED = re.compile(r"^Request Request\(.*\) needs (\w+) permission\.$", re.DOTALL)
PRINTED_APIS = {29, 30, 31, 43, 45, 46, 51, 57}


def _salted(password: str, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 4096)


def _prepare(target: Target) -> dict:
    """As the super user: the coordinators ready, a SCRAM user, two topics, three groups, the user's ACLs."""
    user = target.unique("walker")
    names = {k: target.unique(k) for k in ("readable", "secret", "gread1", "gread2", "gsecret", "txn")}
    salt = os.urandom(16)
    with target.raw() as raw:
        for key_type in (0, 1):  # the group and the transaction coordinators
            wait_until(lambda key_type=key_type: raw.call(FIND_COORDINATOR, 4, {
                "key_type": key_type, "coordinator_keys": [names["gsecret"]]}).coordinators[0].error_code == 0,
                60, f"{target.name}'s coordinator of type {key_type}")
        made = raw.call(51, 0, {"deletions": [], "upsertions": [{"name": user, "mechanism": 1, "iterations": 4096,
                                                                  "salt": salt,
                                                                  "salted_password": _salted(PASSWORD, salt)}]})
        assert made.results[0].error_code == 0, made
        ids = create_topics(raw, {names["readable"]: 1, names["secret"]: 1})
        granted = raw.call(30, 3, {"creations": [
            {"resource_type": kind, "resource_name": name, "resource_pattern_type": 3, "principal": f"User:{user}",
             "host": "*", "operation": 3, "permission_type": 3}
            for kind, name in ((2, names["readable"]), (3, names["gread1"]), (3, names["gread2"]))]})
        assert all(r.error_code == 0 for r in granted.results), granted
        barrier(raw, target.unique("barrier"))
        served = {k.api_key: k.max_version for k in raw.call(API_VERSIONS, 3, {
            "client_software_name": "walk", "client_software_version": "1"}).api_keys}

    def can_log_in() -> bool:
        try:
            scram_raw_client(target.port, user, PASSWORD)[0].close()
        except SaslRefused:
            return False
        return True

    wait_until(can_log_in, 30, f"{user} to authenticate on {target.name}")
    return {"user": user, "names": names, "ids": ids, "served": served}


def _errors(answer) -> list | str:
    """Every non-zero *error_code in a normalised answer: [where, code, its message]."""
    if isinstance(answer, str):
        return answer
    found: list = []

    def walk(value, path: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key.endswith("error_code") and isinstance(item, int):
                    if item:
                        message = value.get(key[:-len("code")] + "message", "<none>")
                        if isinstance(message, str):
                            message = REQUEST_PRINTED.sub(r"<Kafka's request, printed> needs \1 permission.",
                                                          message)
                        found.append([f"{path}.{key}", item, message])
                else:
                    walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    walk(answer, "")
    return found


class _Walker:
    """The user's connection to one broker, authenticated once and opened again after a request that closed it
    (or went unanswered)."""

    def __init__(self, target: Target, user: str) -> None:
        self.target, self.user, self.raw = target, user, None

    def send(self, api_key: int, version: int, body: dict):
        if self.raw is None:
            self.raw = scram_raw_client(self.target.port, self.user, PASSWORD)[0]
            self.raw.sock.settimeout(3)
        try:
            return self.raw.call(api_key, version, body)
        except TimeoutError:  # before OSError, of which it is one
            self.close()
            return "no answer within 3 s"
        except OSError:  # the connection closed (ConnectionError is one)
            self.close()
            return "connection closed"

    def close(self) -> None:
        if self.raw is not None:
            self.raw.close()
            self.raw = None


def _send(target: Target, user: str, api_key: int, version: int, body: dict):
    walker = _Walker(target, user)
    try:
        return walker.send(api_key, version, body)
    finally:
        walker.close()


@pytest.fixture(scope="module")
def walk(sasl_pair) -> dict:
    """{"served": {side: {api: max version}}, "seen": {(api, variant): {side: errors}}}"""
    prepared = {target.name: _prepare(target) for target in sasl_pair}
    both = set(prepared[KAFKA]["served"]) & set(prepared[SHOAL]["served"])
    seen: dict = {}
    for target in sasl_pair:
        mine = prepared[target.name]
        names, ids = mine["names"], mine["ids"]
        walker = _Walker(target, mine["user"])
        for api_key in sorted(both):
            version = min(prepared[KAFKA]["served"][api_key], prepared[SHOAL]["served"][api_key],
                          MAX_VERSION.get(api_key, 1 << 15))
            group = names["gread2"] if api_key in SHARE_APIS else names["gread1"]
            for variant, given in (
                    ("denied", {"t": names["secret"], "g": names["gsecret"], TOPIC_ID: ids[names["secret"]]}),
                    ("read only", {"t": names["readable"], "g": group, TOPIC_ID: ids[names["readable"]]})):
                body = substitute(BODIES[api_key], {**given, "x": names["txn"]})
                answer = walker.send(api_key, version, body)
                seen.setdefault((api_key, variant), {})[target.name] = _errors(normalize(answer, target))
        walker.close()
    return {"served": {side: prepared[side]["served"] for side in prepared}, "seen": seen}


def test_apis_served_by_one_broker_only(walk):
    served = walk["served"]
    known_difference({KAFKA: sorted(set(served[KAFKA]) - set(served[SHOAL])),
                      SHOAL: sorted(set(served[SHOAL]) - set(served[KAFKA]))},
                     kafka=ONLY_KAFKA, shoal=ONLY_SHOAL, reason=f"{REASON}: APIs only one broker serves")
    assert set(BODIES) >= set(served[KAFKA]) & set(served[SHOAL]), "a served API has no request body"


# ShareFetch and ShareAcknowledge with READ on both the group and the topic are past authorization: their answers
# then follow the share session Kafka opens (or not) for the member, which depends on when its assignment lands;
# the share-group differential tests drive that step by step. Their "denied" variants are compared.
NOT_WALKED = {(78, "read only"), (79, "read only")}
WALKED = [(api_key, variant) for api_key in sorted(BODIES) if api_key not in ONLY_SHOAL
          for variant in ("denied", "read only") if (api_key, variant) not in NOT_WALKED]


@pytest.mark.parametrize(("api_key", "variant"), WALKED,
                         ids=[f"{k}-{schema.api_specs()[k].name}-{v}" for k, v in WALKED])
def test_unprivileged_request(walk, api_key, variant):
    seen = walk["seen"].get((api_key, variant))
    assert seen is not None, f"API {api_key} is not served by both brokers"
    if api_key in PRINTED_APIS:
        # Kafka's printed request where Shoal says Errors' message: pinned, then compared without the messages
        printed = [i for i, (_, _, message) in enumerate(seen[KAFKA]) if "<Kafka's request" in str(message)]
        known_difference({side: [errors[i][2] for i in printed] for side, errors in seen.items()},
                         kafka=[f"<Kafka's request, printed> needs {_operation(api_key)} permission."] * len(printed),
                         shoal=["Cluster authorization failed."] * len(printed),
                         reason=f"{REASON}: the message of a cluster authorization failure")
        assert printed, "Kafka no longer prints its request in this refusal"
        seen = {side: [e[:2] for e in errors] for side, errors in seen.items()}
    if api_key == 50:
        known_difference(seen, kafka="no answer within 3 s",
                         shoal=[[".error_code", 31, "Cluster authorization failed."]],
                         reason=f"{REASON}: DescribeUserScramCredentials refused")
        return
    assert_same(seen, f"API {api_key} ({schema.api_specs()[api_key].name}), {variant}, as an unprivileged user")


def test_sync_group_without_protocol_is_refused_before_authorization(walk, sasl_pair):
    """From v5 SyncGroup's protocol type and name are mandatory: Kafka refuses their absence
    (INCONSISTENT_GROUP_PROTOCOL) before it checks the group's ACLs."""
    def scenario(target: Target):
        user = target.names()  # the walker made for this module
        walker = next(name for name, base in user.items() if base == "walker")
        secret = next(name for name, base in user.items() if base == "gsecret")
        answer = _send(target, walker, 14, 5, {"group_id": secret, "generation_id": 1, "member_id": "m",
                                               "assignments": []})
        return _errors(normalize(answer, target))

    assert_same(sasl_pair.run(scenario), "SyncGroup v5 without protocol type and name")


def _operation(api_key: int) -> str:
    return {29: "DESCRIBE", 46: "DESCRIBE"}.get(api_key, "ALTER")


def test_config_resources_as_the_unprivileged_user(walk, sasl_pair):
    """DescribeConfigs, IncrementalAlterConfigs (validate-only) and AlterConfigs (validate-only) of each config
    resource type as the user: the topic and group it may READ (configs need DESCRIBE_CONFIGS/ALTER_CONFIGS), the
    broker, a broker logger (Kafka checks a logger's operations before its ACL: a bad level, APPEND, another
    broker's id), a client-metrics subscription."""
    def scenario(target: Target):
        names = {base: name for name, base in target.names().items()}
        readable, group = names["readable"], names["gread1"]
        described = [(2, readable), (32, group), (4, "1"), (4, ""), (8, "1"), (16, "cm")]
        changes = [(2, readable, "retention.ms", 0, "1000"), (32, group, "share.delivery.count.limit", 0, "3"),
                   (4, "1", "log.retention.bytes", 0, "5"), (4, "", "log.retention.bytes", 0, "5"),
                   (8, "1", "root", 0, "INFO"), (8, "1", "root", 0, "LOUD"), (8, "1", "root", 2, "INFO"),
                   (8, "2", "root", 0, "INFO"), (16, "cm", "interval.ms", 0, "1000")]
        walker = _Walker(target, names["walker"])
        try:
            out = {"describe": walker.send(32, 4, {"resources": [
                {"resource_type": t, "resource_name": n, "configuration_keys": None} for t, n in described],
                "include_synonyms": False, "include_documentation": False})}
            for i, (t, n, key, op, value) in enumerate(changes):
                out[f"incremental {i}"] = walker.send(44, 1, {"resources": [{"resource_type": t, "resource_name": n,
                                                          "configs": [{"name": key, "config_operation": op,
                                                                       "value": value}]}], "validate_only": True})
            out["legacy"] = walker.send(33, 2, {"resources": [
                {"resource_type": t, "resource_name": n, "configs": [{"name": key, "value": value}]}
                for t, n, key, _, value in changes[:5] + changes[8:]], "validate_only": True})
        finally:
            walker.close()
        return {label: _errors(normalize(answer, target)) for label, answer in out.items()}

    assert_same(sasl_pair.run(scenario), "config resources as an unprivileged user")

