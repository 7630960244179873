"""Kafka's QuotaConfig: the samples client and controller-mutation rates are measured over (defaults from the
broker's config table)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.components import ComponentConfig, setting
from broker.quotas.stats import MetricConfig


@dataclass(frozen=True)
class QuotaConfig(ComponentConfig):
    num_quota_samples: int = setting("quota.window.num")
    quota_window_size_ms: int = setting("quota.window.size.seconds", scale=1000)
    num_controller_quota_samples: int = setting("controller.quota.window.num")
    controller_quota_window_size_ms: int = setting("controller.quota.window.size.seconds", scale=1000)

    @property
    def client_window(self) -> MetricConfig:
        """The window of client quotas (produce, fetch, request) and of connection creation rates."""
        return MetricConfig(self.num_quota_samples, self.quota_window_size_ms)

    @property
    def controller_window(self) -> MetricConfig:
        """The window of controller mutation quotas."""
        return MetricConfig(self.num_controller_quota_samples, self.controller_quota_window_size_ms)
