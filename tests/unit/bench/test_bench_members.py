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


def test_members_table_sets_each_share_client_against_the_classic_group() -> None:
    from bench.report import members_table

    rows = [{"server": "shoal", "kind": "group", "members": 4, "records_s": 200_000},
            {"server": "shoal", "kind": "share", "members": 4, "records_s": 180_000},
            {"server": "shoal", "kind": "shoal-share", "members": 4, "records_s": 220_000},
            {"server": "shoal", "kind": "group", "members": 4, "p99_ms": 30.5},
            {"server": "shoal", "kind": "share", "members": 4, "p99_ms": 40.0},
            {"server": "kafka", "kind": "group", "members": 4, "records_s": 100_000},
            {"server": "kafka", "kind": "share", "members": 4, "records_s": 50_000}]
    header, _rule, shoal, kafka = members_table(rows)
    assert header.count("|") == 11 and header.startswith("| server | members |")
    assert shoal == "| shoal | 4 | 200000 | 180000 | 0.90 | 220000 | 1.10 | 30.5 | 40.0 | - |"
    assert kafka == "| kafka | 4 | 100000 | 50000 | 0.50 | - | - | - | - | - |"
