"""Regular-expression subscriptions of consumer groups (KIP-848): what a heartbeat needs resolved, and the
resolution's steps, without IO.

A pattern resolves to the topics it matches whole (RE2, broker.linear_regex) that the members subscribing to it may
DESCRIBE, as Kafka's GroupMetadataManager.refreshRegularExpressions filters by the member's permission. Kafka
filters all of a group's patterns with the principal of whichever member's heartbeat triggered the refresh; Shoal
filters each pattern with every identity (principal and address, which ACLs may name) of the members subscribing
to it that has heartbeated since the coordinator loaded, so a member of a shared group is never assigned, and
never learns through its assignment, a topic it may not DESCRIBE.

A resolution is stamped with a key: the topics' version, the ACLs' version and those identities. When any of them
moves on (a topic created or deleted, an ACL created or deleted, a member with another identity subscribing) the
next heartbeat of the group resolves its patterns again, so a topic a member gains or loses DESCRIBE on comes into
or leaves its assignment (Kafka re-resolves on new topics and otherwise every group.consumer.regex.refresh.interval.ms,
10 minutes by default).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.linear_regex import MAX_PATTERN_LENGTH, RegexError, match_all

# (principal, client address) whose DESCRIBE permission filters a resolution; None when no authorizer runs.
Identity = tuple[str, str] | None
MayDescribe = Callable[[str, str, str], bool]  # (principal, host, topic) -> may that identity DESCRIBE the topic


@dataclass(frozen=True)
class ResolutionKey:
    topics_version: int
    acl_version: int
    identities: frozenset[Identity]


@dataclass(frozen=True)
class RegexWork:
    """What a heartbeat needs before the coordinator serves it: `check` the patterns to validate, `resolve` the
    patterns to resolve with the identities that filter each."""

    check: frozenset[str] = frozenset()
    resolve: Mapping[str, frozenset[Identity]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.check or self.resolve)


@dataclass(frozen=True)
class Resolution:
    """The verdict on a pattern: `error` (Kafka's message) if invalid or too costly to match (then with its key);
    else the topics it resolves to (None if it was only checked) and the key they were resolved under."""

    error: str | None = None
    topics: frozenset[str] | None = None
    key: ResolutionKey | None = None


def invalid_message(pattern: str, detail: str) -> str:
    """Kafka's INVALID_REGULAR_EXPRESSION message (the detail is RE2's description, not RE2/J's words)."""
    return f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {detail}."


def match(work: RegexWork, names: Sequence[str], max_length: int = MAX_PATTERN_LENGTH,
          budget_s: float | None = None) -> dict[str, RegexError | list[str]]:
    """Compile every pattern of `work` and match those to resolve against `names`, on the caller's thread
    (broker.linear_regex.match_all); the runtime has the regex worker process do this."""
    return match_all(work.check, work.resolve, names, max_length, budget_s)


def describable(names: Iterable[str], identities: frozenset[Identity], may_describe: MayDescribe) -> list[str]:
    """The names every identity may DESCRIBE (all of them when no authorizer runs: identity None)."""
    real = [i for i in identities if i is not None]
    if not real:
        return list(names)
    return [n for n in names if all(may_describe(principal, host, n) for principal, host in real)]


def resolve_now(work: RegexWork, names: Sequence[str], topics_version: int, acl_version: int,
                may_describe: MayDescribe, max_length: int = MAX_PATTERN_LENGTH,
                budget_s: float | None = None) -> dict[str, Resolution]:
    """All of a resolution in one call, on the caller's thread (tests and tools; the runtime splits it)."""
    matched = match(work, names, max_length, budget_s)
    kept = {p: describable(found, work.resolve[p], may_describe) for p, found in matched.items()
            if not isinstance(found, RegexError) and p in work.resolve}
    return finish(work, matched, kept, topics_version, acl_version)


def finish(work: RegexWork, matched: Mapping[str, RegexError | list[str]], kept: Mapping[str, list[str]],
           topics_version: int, acl_version: int) -> dict[str, Resolution]:
    """Verdicts from `match`'s answer and `kept`, the matching names each pattern's identities may DESCRIBE. A
    pattern too costly to match keeps its key, with no topics: it is not tried again until the key changes."""
    out: dict[str, Resolution] = {}
    for pattern, answer in matched.items():
        key = ResolutionKey(topics_version, acl_version, work.resolve[pattern]) if pattern in work.resolve else None
        if isinstance(answer, RegexError):
            out[pattern] = Resolution(error=invalid_message(pattern, answer.detail),
                                      key=key if answer.too_costly else None)
        elif key is not None:
            out[pattern] = Resolution(topics=frozenset(kept[pattern]), key=key)
        else:
            out[pattern] = Resolution()
    return out
