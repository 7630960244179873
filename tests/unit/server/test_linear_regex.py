"""broker.linear_regex: RE2 syntax and whole-name matches as Kafka's RE2/J, bounded patterns, and the worker
process that compiles and matches them for the broker."""

from __future__ import annotations

import asyncio

import pytest

from broker import linear_regex
from broker.linear_regex import (
    RegexError,
    RegexUnavailable,
    RegexWorker,
    compile_pattern,
    full_matches,
    match_all,
)

SLOW = "(.*a.*b|.*c.*d)*z"  # about 0.2 ms per 4 000-character name


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


def test_the_worker_process_matches_and_keeps_a_family_of_names():
    async def main():
        worker = RegexWorker()
        try:
            got = await worker.match(["(?=x)"], ["orders.*"], ["orders.eu", "pay"], ("topics", 1))
            assert isinstance(got["(?=x)"], RegexError) and got["orders.*"] == ["orders.eu"]
            # Same version: the names are not sent again, the child still has them.
            assert (await worker.match([], ["pay"], [], ("topics", 1)))["pay"] == ["pay"]
            # Names without a family come with the request.
            assert (await worker.match([], ["a+"], ["aa", "b"]))["a+"] == ["aa"]
            pid = worker._proc.pid
            # A pattern RE2 refuses only after tens of milliseconds of compiling, in the child.
            assert isinstance((await worker.match([r"\pL{1000}"], [], []))[r"\pL{1000}"], RegexError)
            assert worker._proc.pid == pid
        finally:
            await worker.close()

    asyncio.run(main())


def test_a_worker_that_dies_is_started_again():
    async def main():
        worker = RegexWorker()
        try:
            await worker.start()
            await worker.match([], ["a"], ["a"], ("topics", 3))
            # Dead between two requests: a new child, given the family's names again.
            worker._proc.kill()
            await worker._proc.wait()
            assert (await worker.match([], ["a"], ["a"], ("topics", 3)))["a"] == ["a"]
            # Dead during a request: that request fails (retriable), the next one has a new child.
            slow = asyncio.ensure_future(worker.match([], [SLOW], ["ab" * 2000] * 20_000))  # seconds of work
            await asyncio.sleep(0.2)
            worker._proc.kill()
            with pytest.raises(RegexUnavailable):
                await slow
            assert (await worker.match([], ["a"], ["a"], ("topics", 3)))["a"] == ["a"]
        finally:
            await worker.close()

    asyncio.run(main())


def test_a_cancelled_caller_leaves_the_exchange_whole():
    async def main():
        worker = RegexWorker()
        try:
            slow = asyncio.ensure_future(worker.match([], [SLOW], ["ab" * 2000] * 2_000))
            await asyncio.sleep(0.05)
            slow.cancel()
            assert (await worker.match([], ["x"], ["x", "y"]))["x"] == ["x"]
        finally:
            await worker.close()

    asyncio.run(main())


def test_matching_past_the_budget_is_refused_as_too_costly():
    results = match_all(["ok"], [SLOW, "ok"], ["ab" * 2000] * 20_000, budget_s=0.2)
    assert isinstance(results[SLOW], RegexError) and results[SLOW].too_costly
    assert isinstance(results["ok"], RegexError) and results["ok"].too_costly  # the budget is the whole call's
    assert match_all([], ["a+"], ["aa"] * 100, budget_s=5.0)["a+"] == ["aa"] * 100
