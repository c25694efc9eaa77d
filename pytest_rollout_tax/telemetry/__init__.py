"""A run's rollouts where platform teams look: OTLP traces and metrics in OpenTelemetry's GenAI
names, Prometheus histograms in agent-sandbox's (docs/telemetry.md). Plain library modules; the
outputs ``otlp`` and ``prometheus_metrics`` import them only when asked to export."""
