"""The members part's figure for repeated drains: the median rate, every run kept."""

from bench.__main__ import median_drain


def _run(rate: int) -> dict:
    return {"kind": "share", "members": 4, "records": 100_000, "records_s": rate, "seconds": 100_000 / rate}


def test_median_of_odd_runs_is_the_middle_rate() -> None:
    row = median_drain([_run(r) for r in (300_000, 200_000, 250_000)])
    assert row["records_s"] == 250_000
    assert row["seconds"] == 0.4
    assert row["runs"] == 3
    assert row["runs_records_s"] == [300_000, 200_000, 250_000]
    assert (row["kind"], row["members"]) == ("share", 4)


def test_median_of_even_runs_is_the_mean_of_the_middle_two() -> None:
    assert median_drain([_run(r) for r in (100, 400, 200, 300)])["records_s"] == 250
    assert median_drain([_run(123)])["records_s"] == 123
