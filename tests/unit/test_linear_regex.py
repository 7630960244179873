"""broker.linear_regex: RE2 syntax and whole-name matches as Kafka's RE2/J, bounded patterns, off-loop runs."""

from __future__ import annotations

import asyncio
import threading

import pytest

from broker import linear_regex
from broker.linear_regex import RegexError, compile_pattern, full_matches


@pytest.mark.parametrize("pattern", [
    "(?=orders)orders.*",  # lookahead
    r"(a)\1",  # backreference
    "a*+",  # possessive quantifier
    "(?>a)",  # atomic group
    "(?x) a",  # free-spacing flag (RE2/J has only i, m, s and U)
    "[",
    "a{1001}",  # repetition bound
    r"\pL{1000}",  # compiles beyond RE2's memory budget
])
def test_patterns_re2j_refuses_are_refused(pattern):
    with pytest.raises(RegexError) as err:
        compile_pattern(pattern)
    assert err.value.detail


@pytest.mark.parametrize("pattern", [r"orders\z", r"\p{Greek}+", r"(?P<x>o)rders", r"\Qa.b\E", "(?i)ORDERS",
                                     "(^orders.*)"])
def test_patterns_python_re_refused_or_read_differently_are_accepted(pattern):
    compile_pattern(pattern)


def test_a_match_is_of_the_whole_name():
    names = ["orders", "orders.eu", "xorders", "orders\n"]
    assert full_matches(compile_pattern("orders.*"), names) == ["orders", "orders.eu"]
    # librdkafka sends its `^` subscriptions joined as (^a)|(^b)
    assert full_matches(compile_pattern("(^orders.*)|(^pay.*)"), ["orders.eu", "payments", "x"]) == [
        "orders.eu", "payments"]


def test_the_pattern_length_is_bounded():
    compile_pattern("a" * linear_regex.MAX_PATTERN_LENGTH)
    with pytest.raises(RegexError, match="longer than"):
        compile_pattern("a" * (linear_regex.MAX_PATTERN_LENGTH + 1))
    with pytest.raises(RegexError):
        compile_pattern("a" * 11, max_length=10)


def test_the_backtracking_pathology_is_linear():
    # Python's `re` takes over a second on this name; RE2 answers at once.
    assert full_matches(compile_pattern("orders.eu-w(.*.*)*X"), ["orders.eu-west-1.payments"] * 1000) == []


def test_run_uses_the_worker_thread():
    async def main():
        return await linear_regex.run(lambda: threading.current_thread().name)

    assert asyncio.run(main()).startswith("shoal-regex")
