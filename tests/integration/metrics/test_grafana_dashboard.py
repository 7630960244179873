"""The Grafana dashboard in docker/ asks only for metrics the broker exports: every panel query's metric names,
taken from its PromQL by a small tokenizer, are checked against the families a real broker's /metrics lists (with
the sample suffixes of counters and histograms), and the provisioning files point at the dashboard and the
datasource uid its panels use."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers.broker_process import REPO
from tests.helpers.prometheus_scrape import families

pytestmark = pytest.mark.integration

DASHBOARDS = REPO / "docker" / "grafana" / "dashboards"
PROVISIONING = REPO / "docker" / "grafana" / "provisioning"

# What a family's samples are called, by its type (prometheus-client's text format).
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"),
            "summary": ("", "_count", "_sum", "_created"), "gauge": ("",), "info": ("_info",), "unknown": ("",)}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
            "unless", "inf", "nan"}
IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric identifiers of a PromQL expression: not functions (followed by '('), not label names (inside
    {...} or the lists after by/without/on/ignoring/group_*), not keywords, durations, numbers or strings."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # range and subquery durations
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)  # label lists
    names = set()
    for m in IDENT.finditer(expr):
        if m.start() > 0 and (expr[m.start() - 1].isdigit() or expr[m.start() - 1] == "."):
            continue  # part of a number like 1e3
        if expr[m.end():].lstrip().startswith("("):
            continue  # a function or aggregation
        if m.group().lower() not in KEYWORDS:
            names.add(m.group())
    return names


def test_tokenizer():
    assert metric_names('histogram_quantile(0.99, sum by (le, api) (rate(a_bucket{api!~"x.*"}[1m])))') == {
        "a_bucket"}
    assert metric_names("sum(rate(b_total[5m])) / ignoring(x) c * 60 and on(job) d offset 5m") == {"b_total", "c",
                                                                                                   "d"}
    assert metric_names("max without (instance) (e) > bool 1e3") == {"e"}


def exported(port: int) -> set[str]:
    return {family.name + suffix for family in families(port) for suffix in SUFFIXES[family.type]}


def panels(dashboard: dict):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", ())


def test_every_dashboard_query_names_exported_metrics(broker_factory):
    broker = broker_factory({"metrics.prometheus.listener": "127.0.0.1:0"})
    names = exported(broker.ports["prometheus"])
    assert {"shoal_requests_total", "shoal_request_latency_seconds_bucket", "shoal_share_partition_lag"} <= names
    files = sorted(DASHBOARDS.glob("*.json"))
    assert files
    asked: set[str] = set()
    for path in files:
        dashboard = json.loads(path.read_text())
        queries = [(p["title"], t["expr"]) for p in panels(dashboard) for t in p.get("targets", ())]
        assert queries, path
        for title, expr in queries:
            used = metric_names(expr)
            assert used, (title, expr)
            assert used <= names, (path.name, title, sorted(used - names))
            asked |= used
    # The areas the dashboard is meant to cover each have a panel.
    for prefix in ("shoal_request", "shoal_log_", "shoal_share_partition_", "shoal_group", "shoal_share_dlq",
                   "shoal_event_loop", "shoal_transactions", "shoal_partition_lso_lag", "process_"):
        assert any(n.startswith(prefix) for n in asked), prefix


def test_provisioning_points_at_the_dashboard_and_its_datasource():
    datasources = (PROVISIONING / "datasources" / "prometheus.yaml").read_text()
    uid = re.search(r"^\s*uid:\s*(\S+)", datasources, re.M).group(1)
    for path in DASHBOARDS.glob("*.json"):
        for panel in panels(json.loads(path.read_text())):
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == uid, panel["title"]
    provider = (PROVISIONING / "dashboards" / "shoal.yaml").read_text()
    assert "path: /var/lib/grafana/dashboards" in provider
    compose = (REPO / "docker" / "compose.yaml").read_text()
    assert "./grafana/dashboards:/var/lib/grafana/dashboards" in compose
    assert "./grafana/provisioning:/etc/grafana/provisioning" in compose
    assert "shoal:9404" in (REPO / "docker" / "prometheus.yml").read_text()
    assert "metrics.prometheus.listener=0.0.0.0:9404" in compose
