"""docs/api-coverage.md against the repository alone (never Kafka's definitions, which a checkout does not have):
the table names every API key from 0 without a gap, its `served` rows are exactly the APIs we have schema files
for, and every API not served says why. `tools/api_coverage.py --spec` checks the names and listeners against
Kafka's definitions; tests/integration/server/test_api_coverage.py checks a running broker against the table."""

from __future__ import annotations

from protocol import schema
from tools.api_coverage import NOT_BROKER, SERVED, load_table


def test_one_row_per_api_key_without_gaps():
    keys = [r.key for r in load_table()]
    assert keys == sorted(set(keys)), "rows out of order or repeated"
    assert keys == list(range(len(keys)))
    assert len(keys) > max(schema.api_specs())


def test_served_rows_are_the_apis_with_schema_files():
    specs = schema.api_specs()
    rows = {r.key: r for r in load_table()}
    served = {k for k, r in rows.items() if r.status == SERVED}
    assert {k: rows[k].name for k in served - set(specs)} == {}, "served rows without schema files"
    assert {k: specs[k].name for k in set(specs) - served} == {}, "schema files for an API not served"
    assert {k: (rows[k].name, specs[k].name) for k in served & set(specs) if rows[k].name != specs[k].name} == {}


def test_every_api_not_served_says_why():
    for row in load_table():
        if row.status == SERVED:
            assert not row.reason, row
            assert "broker" in row.listeners, row  # Kafka serves it to clients too
        else:
            assert len(row.reason) > 20, row
        if row.status == NOT_BROKER:
            assert "broker" not in row.listeners, row
