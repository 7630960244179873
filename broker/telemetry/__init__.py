"""Client telemetry (KIP-714): client-metrics subscriptions, the sans-IO `ClientMetricsManager` that serves
GetTelemetrySubscriptions and PushTelemetry, the OTLP payload decoder and the store of pushed metrics that the
Prometheus endpoint exports."""
