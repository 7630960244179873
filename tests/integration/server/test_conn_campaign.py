"""1 000 concurrent connections and a share group of 100 members (10 confluent ShareConsumers, 90 shoal_client
members) on one broker process: every connection served, every member listed by ShareGroupDescribe, every record
delivered and accepted exactly once, the broker's sockets back to their start after everyone left
(tests/campaigns/connections.py; `make conn-campaign` runs it with more records and prints the figures)."""

from __future__ import annotations

import pytest

from tests.campaigns.connections import ConnectionCampaign

pytestmark = pytest.mark.integration

RSS_BOUND_MIB = 768


def test_thousand_connections_and_hundred_share_members(tmp_path):
    from tests.helpers.broker_process import venv_python

    campaign = ConnectionCampaign(tmp_path, connections=1000, members=100, confluent=10, records=5000,
                                  python=venv_python(), progress=print)
    try:
        report = campaign.run()
    finally:
        campaign.close(keep=True)
    print(report)
    conns, members, records, broker = (report["connections"], report["members"], report["records"],
                                       report["broker"])
    assert conns["opened"] == 1000 and conns["failed"] == {} and conns["still_served"] == 1000
    assert broker["sockets"]["with_raw_connections"] >= 1000
    assert members["all_joined"] and members["described_max"] == 100
    assert records["produced"] == 5000
    assert records["not_delivered"] == 0
    assert records["accepted"] == 5000 and records["accepted_twice"] == 0
    assert records["accepted_outside_produced"] == 0
    assert broker["sockets"]["settled"], broker["sockets"]
    assert broker["rss_mib"]["peak_hwm"] < RSS_BOUND_MIB
    assert report["log_problems"] == []
    assert report["ok"]
