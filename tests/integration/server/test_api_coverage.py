"""A real broker against docs/api-coverage.md: its ApiVersions advertises exactly the APIs the table says are
served, each within the versions of our schema files; every other API Kafka's brokers serve is in the table as
not served, with its reason (tests/unit/tools/test_api_coverage_table.py)."""

from __future__ import annotations

import pytest

from protocol import schema
from tests.helpers.raw_client import RawClient
from tools.api_coverage import SERVED, load_table

pytestmark = pytest.mark.integration

API_VERSIONS = 18


def test_broker_advertises_exactly_the_served_rows(broker_module):
    with RawClient(broker_module.port) as c:
        resp = c.call(API_VERSIONS, 5, {"client_software_name": "coverage", "client_software_version": "1"})
    assert resp.error_code == 0
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    rows = {r.key: r for r in load_table()}
    served = {k for k, r in rows.items() if r.status == SERVED}
    assert {k: rows[k].name for k in served - set(advertised)} == {}, "served in the table, not advertised"
    assert {k: rows.get(k) for k in set(advertised) - served} == {}, "advertised, not served in the table"
    specs = schema.api_specs()
    listed_below_served = {0: 0}  # Produce: Kafka 4 lists v0 though it serves v3+ (KAFKA-18659), as Shoal
    for key, (lo, hi) in advertised.items():
        lowest = listed_below_served.get(key, specs[key].min_version)
        assert lowest <= lo <= hi <= specs[key].max_version, (key, lo, hi)
