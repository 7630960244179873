"""Regular-expression subscriptions of consumer groups in the sans-IO coordinator: RE2 verdicts, resolutions
filtered by the DESCRIBE permission of the pattern's subscribers, and resolved again when ACLs, topics or
subscribers change (the runtime resolves off the event loop; here on the test's thread, the same steps)."""

from __future__ import annotations

from broker.groups.consumer.regex import RegexWork, resolve_now
from protocol.errors import ErrorCode
from tests.unit.groups.group_helpers import Acls, Topics, assigned, cg_req, consumer_heartbeat, make

E = ErrorCode
PATTERN = r"orders\..*"


def setup():
    topics, acls = Topics(), Acls()
    ids = {name: topics.create(name, n) for name, n in (("orders.eu", 2), ("orders.us", 1), ("orders.secret", 2))}
    return make(topics, acls), topics, acls, ids


def hb(gc, req, principal="User:alice", now=1000):
    res = consumer_heartbeat(gc, req, 1, now, principal=principal)
    return res.response, res.records


def resolved(gc, pattern=PATTERN, gid="g"):
    return set(gc.consumer.groups[gid].resolved_regexes[pattern].topics)


def test_a_pattern_resolves_only_to_topics_the_member_may_describe():
    gc, _, acls, ids = setup()
    acls.allow("User:alice", "orders.eu", "orders.us")
    r, _ = hb(gc, cg_req("a", 0, regex=PATTERN))
    assert r["error_code"] == 0 and assigned(r) == {ids["orders.eu"]: {0, 1}, ids["orders.us"]: {0}}
    assert resolved(gc) == {"orders.eu", "orders.us"}
    # DESCRIBE granted: the next heartbeat resolves again and the topic comes into the assignment.
    acls.allow("User:alice", "orders.secret")
    r, _ = hb(gc, cg_req("a", 2, owned=assigned(r)))
    assert r["member_epoch"] == 3 and assigned(r)[ids["orders.secret"]] == {0, 1}
    # DESCRIBE taken away: the topic leaves the assignment.
    acls.deny("User:alice", "orders.us")
    r, _ = hb(gc, cg_req("a", 3, owned=assigned(r)))
    assert ids["orders.us"] not in assigned(r) and resolved(gc) == {"orders.eu", "orders.secret"}


def test_a_shared_pattern_resolves_to_what_every_subscriber_may_describe():
    gc, _, acls, ids = setup()
    acls.allow("User:alice", "orders.eu", "orders.us", "orders.secret")
    acls.allow("User:mallory", "orders.eu")
    hb(gc, cg_req("a", 0, regex=PATTERN))
    assert resolved(gc) == {"orders.eu", "orders.us", "orders.secret"}
    r, _ = hb(gc, cg_req("m", 0, regex=PATTERN), principal="User:mallory")
    assert resolved(gc) == {"orders.eu"}
    assert set(assigned(r) or {}) <= {ids["orders.eu"]}
    # Mallory leaves: alice's next heartbeat resolves with alice's permission alone.
    hb(gc, cg_req("m", -1), principal="User:mallory")
    hb(gc, cg_req("a", gc.consumer.groups["g"].members["a"].member_epoch))
    assert resolved(gc) == {"orders.eu", "orders.us", "orders.secret"}


def test_each_pattern_is_filtered_by_its_own_subscribers():
    """Mallory's `.*` in bob's group takes none of the partitions of topics only bob may read."""
    gc, _, acls, ids = setup()
    acls.allow("User:bob", "orders.eu", "orders.us", "orders.secret")
    acls.allow("User:mallory", "orders.eu")
    hb(gc, cg_req("b", 0, regex=PATTERN), principal="User:bob")
    hb(gc, cg_req("m", 0, regex=".*"), principal="User:mallory")
    assert resolved(gc, ".*") == {"orders.eu"} and resolved(gc) == {"orders.eu", "orders.us", "orders.secret"}
    target = gc.consumer.groups["g"].target_assignment
    assert set(target["m"]) <= {ids["orders.eu"]}
    assert target["b"][ids["orders.secret"]] == {0, 1} and target["b"][ids["orders.us"]] == {0}


def test_invalid_patterns_get_kafkas_error_and_change_nothing():
    gc, _, acls, _ = setup()
    for pattern in ("(?=orders)orders.*", r"(orders)\1", "[", "o" * 4097):
        r, records = hb(gc, cg_req("a", 0, regex=pattern))
        assert r["error_code"] == E.INVALID_REGULAR_EXPRESSION and records == [], pattern
        assert r["error_message"].startswith(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: ")
    assert "g" not in gc.consumer.groups
    # RE2 syntax Python's `re` refused.
    acls.allow("User:alice", "orders.eu")
    r, _ = hb(gc, cg_req("a", 0, regex=r"orders\.eu\z"))
    assert r["error_code"] == 0 and resolved(gc, r"orders\.eu\z") == {"orders.eu"}


def test_nothing_to_resolve_while_topics_acls_and_subscribers_are_unchanged():
    gc, topics, acls, _ = setup()
    acls.allow("User:alice", "orders.eu")
    r, _ = hb(gc, cg_req("a", 0, regex=PATTERN))
    identity = ("User:alice", "127.0.0.1")
    plain = cg_req("a", r["member_epoch"])
    assert not gc.consumer.regex_work(plain, identity)
    topics.create("orders.new", 1)
    assert gc.consumer.regex_work(plain, identity) == RegexWork(resolve={PATTERN: frozenset({identity})})
    hb(gc, plain)
    assert not gc.consumer.regex_work(plain, identity)
    acls.allow("User:alice", "orders.new")
    assert gc.consumer.regex_work(plain, identity).resolve == {PATTERN: frozenset({identity})}
    # Another identity on the same pattern is a change too; the request's own pattern is always checked.
    assert gc.consumer.regex_work(cg_req("b", 0, regex=PATTERN), ("User:bob", "127.0.0.1")) == RegexWork(
        check=frozenset({PATTERN}), resolve={PATTERN: frozenset({identity, ("User:bob", "127.0.0.1")})})


def test_after_a_reload_a_member_is_answered_only_after_its_own_identity_filtered_the_pattern():
    topics, acls = Topics(), Acls()
    topics.create("orders.eu", 2)
    secret = topics.create("orders.secret", 2)
    acls.allow("User:alice", "orders.eu", "orders.secret")
    acls.allow("User:mallory", "orders.eu")
    gc = make(topics, acls)
    written = []
    r_a, rec = hb(gc, cg_req("a", 0, regex=PATTERN))
    written += rec
    r_m, rec = hb(gc, cg_req("m", 0, regex=PATTERN), principal="User:mallory")
    written += rec
    loaded = make(topics, acls)
    for record in written:
        loaded.replay(record.key, record.value)
    loaded.loaded(2000)
    assert resolved(loaded) == {"orders.eu"}
    # Alice heartbeats first: only her identity is known, the pattern resolves with it alone.
    hb(loaded, cg_req("a", r_a["member_epoch"]), now=2000)
    assert resolved(loaded) == {"orders.eu", "orders.secret"}
    # Mallory's heartbeat brings her identity: resolved again before she is answered.
    r_m, _ = hb(loaded, cg_req("m", r_m["member_epoch"], owned={}), principal="User:mallory", now=2100)
    assert resolved(loaded) == {"orders.eu"}
    assert secret not in (assigned(r_m) or {}) and secret not in loaded.consumer.groups["g"].target_assignment["m"]


def test_a_pattern_too_costly_to_match_is_refused_when_new_and_matches_nothing_when_known():
    gc, topics, acls, ids = setup()
    acls.allow("User:alice", "orders.eu")
    identity = ("User:alice", "127.0.0.1")

    def costly(req):  # the worker ran out of its matching budget (broker.linear_regex.MAX_MATCH_SECONDS)
        work = gc.consumer.regex_work(req, identity)
        verdicts = resolve_now(work, list(topics.by_name), topics.version, acls.version, acls.may_describe,
                               budget_s=-1)
        return gc.consumer_group_heartbeat(req, 1, 1000, identity=identity, regexes=verdicts)

    r = costly(cg_req("a", 0, regex=PATTERN)).response
    assert r["error_code"] == E.INVALID_REGULAR_EXPRESSION and "too long" in r["error_message"]
    r, _ = hb(gc, cg_req("a", 0, regex=PATTERN))
    assert assigned(r) == {ids["orders.eu"]: {0, 1}}
    # Known, then too costly under new ACLs: no topics (not the resolution made under the old ACLs), and it is
    # not tried again until something changes.
    acls.allow("User:alice", "orders.us")
    r = costly(cg_req("a", r["member_epoch"], owned=assigned(r))).response
    assert resolved(gc) == set() and not assigned(r)
    assert not gc.consumer.regex_work(cg_req("a", r["member_epoch"]), identity)
