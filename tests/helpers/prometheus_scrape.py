"""One scrape of a broker's Prometheus endpoint (`metrics.prometheus.listener`), as samples by name and labels."""

from __future__ import annotations

import urllib.request

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset], float]


def families(port: int) -> list[Metric]:
    """The metric families the endpoint lists, parsed by prometheus_client."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return list(text_string_to_metric_families(text))


def scrape(port: int) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value for family in families(port) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))
