"""OTLP traces and metrics of a run's rollouts, in OpenTelemetry's GenAI names (docs/telemetry.md).

Per rollout one root span, its children the cold start's phases, one ``execute_tool`` span per
step and the teardown, each at its real epoch time; and the histograms of those durations. The
spans are made by the OpenTelemetry SDK and sent by its OTLP/HTTP exporter (protobuf), to
``--rollout-otlp`` or to the standard ``OTEL_EXPORTER_OTLP_*`` variables; a ``user:password@``
in the endpoint is sent as HTTP basic auth (requests reads it) and never shown. No command
text, output or ``env`` value is in a record, so none can be exported.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ..core.transport import one_line
from ..core.urls import redact_text, redact_url
from ..errors import ConfigError
from .timeline import RolloutSpans, TimedSpan, spans_of

try:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.trace import Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised by a test that hides the extra
    raise ConfigError(
        "OTLP export needs the [otel] extra: pip install 'pytest-rollout-tax[otel]' "
        f"({exc.name} is missing)"
    ) from None

SCOPE = "pytest_rollout_tax"
SERVICE = "pytest-rollout-tax"
#: ``gen_ai.execute_tool.duration``'s buckets, as the GenAI conventions advise (seconds).
TOOL_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
#: The sandbox histograms' buckets: agent-sandbox's, 100 ms to 4 minutes, in seconds.
STARTUP_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 5, 10, 30, 60, 120, 240)
SPANS_PER_REQUEST = 512
EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http"
EXPORTER_MODULES = ("trace_exporter", "metric_exporter")


def export(
    records: Iterable[dict[str, Any]], endpoint: str, *, timeout: float = 10.0
) -> str | None:
    """Send the traces and metrics of ``records`` (``rollouts[]`` items with every step
    column) to the OTLP/HTTP collector at ``endpoint`` (its base URL, or the traces URL the
    standard variable names); a warning line if it could not take them, else None."""
    timelines = [timeline for record in records if (timeline := spans_of(record)) is not None]
    base = endpoint.removesuffix("/v1/traces").rstrip("/")
    why = "the collector did not take the data"
    with _quiet_exporter_logs():
        try:
            sent = _send_spans(timelines, _signal(endpoint, "traces"), timeout) and (
                _send_metrics(timelines, _signal(endpoint, "metrics"), timeout)
            )
        except (OSError, ValueError) as exc:  # requests' errors: a URL it cannot use, ...
            sent, why = False, redact_text(one_line(exc), endpoint)
    if sent:
        return None
    return f"rollout-tax: OTLP export to {redact_url(base)} failed: {why}"


def _signal(endpoint: str, signal: str) -> str:
    """The URL of one signal (``/v1/traces``) at a collector's base URL or its traces URL,
    a query (a collector's token) kept after it; a URL that cannot be split as it is."""
    try:
        parts = urlsplit(endpoint)
    except ValueError:  # the exporter's own request says it, in the warning
        return endpoint
    base = parts.path.removesuffix("/v1/traces").rstrip("/")
    return parts._replace(path=f"{base}/v1/{signal}").geturl()


class _Collect(SpanProcessor):
    """Keeps the ended spans, to be sent in batches by the exporter whose result we read."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _send_spans(timelines: Sequence[RolloutSpans], url: str, timeout: float) -> bool:
    collected = _Collect()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(collected)
    tracer = provider.get_tracer(SCOPE)
    for timeline in timelines:
        root = _span(tracer, timeline.root, None)
        context = trace.set_span_in_context(root)
        for child in timeline.children:
            _span(tracer, child, context).end(end_time=child.end_ns)
        root.end(end_time=timeline.root.end_ns)
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
    try:
        return all(
            exporter.export(batch) == SpanExportResult.SUCCESS
            for batch in _batches(collected.spans, SPANS_PER_REQUEST)
        )
    finally:
        # the OTLP exporter's shutdown() carries no annotations
        exporter.shutdown()  # type: ignore[no-untyped-call]


def _span(tracer: Any, timed: TimedSpan, context: Any) -> Any:
    span = tracer.start_span(
        timed.name, context=context, start_time=timed.start_ns, attributes=timed.attributes
    )
    if timed.error is not None:
        span.set_attribute("error.type", timed.error)
        span.set_status(Status(StatusCode.ERROR))
    return span


def _send_metrics(timelines: Sequence[RolloutSpans], url: str, timeout: float) -> bool:
    reader = InMemoryMetricReader()
    provider = MeterProvider(
        metric_readers=[reader],
        resource=Resource.create({"service.name": SERVICE}),
        views=[
            View(
                instrument_name="gen_ai.execute_tool.duration",
                aggregation=ExplicitBucketHistogramAggregation(TOOL_BUCKETS),
            ),
            View(
                instrument_name="rollout_tax.sandbox.action.duration",
                aggregation=ExplicitBucketHistogramAggregation(TOOL_BUCKETS),
            ),
            *(
                View(
                    instrument_name=f"rollout_tax.sandbox.{name}.duration",
                    aggregation=ExplicitBucketHistogramAggregation(STARTUP_BUCKETS),
                )
                for name in ("startup", "teardown")
            ),
        ],
    )
    meter = provider.get_meter(SCOPE)
    tool = meter.create_histogram(
        "gen_ai.execute_tool.duration", unit="s", description="Duration of tool execution"
    )
    startup = meter.create_histogram(
        "rollout_tax.sandbox.startup.duration", unit="s", description="A sandbox's cold start"
    )
    teardown = meter.create_histogram(
        "rollout_tax.sandbox.teardown.duration", unit="s", description="A sandbox's teardown"
    )
    action = meter.create_histogram(
        "rollout_tax.sandbox.action.duration",
        unit="s",
        description="A no-op step on the path every step takes: the per-step tax",
    )
    for timeline in timelines:
        sandbox = _sandbox_attributes(timeline)
        for seconds in timeline.probes_s:
            action.record(seconds, sandbox)
        for span in timeline.children:
            if span.name.startswith("execute_tool "):
                tool.record(span.duration_s, _tool_attributes(span, sandbox))
            elif span.name.startswith("cold_start "):
                startup.record(span.duration_s, sandbox | span.attributes)
            elif span.name == "teardown":
                teardown.record(span.duration_s, sandbox)
        phases = [s for s in timeline.children if s.name.startswith("cold_start ")]
        if phases:
            total = sum(span.duration_s for span in phases)
            startup.record(total, sandbox | {"rollout_tax.phase": "cold_start"})
    data = reader.get_metrics_data()
    provider.shutdown()
    if data is None:
        return True
    exporter = OTLPMetricExporter(endpoint=url, timeout=timeout)
    try:
        return exporter.export(data).name == "SUCCESS"
    finally:
        exporter.shutdown()


def _sandbox_attributes(timeline: RolloutSpans) -> dict[str, Any]:
    root = timeline.root.attributes
    keys = ("rollout_tax.substrate", "rollout_tax.kind", "rollout_tax.transport")
    return {key: root[key] for key in keys if key in root} | {
        "rollout_tax.launch_type": timeline.launch_type
    }


def _tool_attributes(span: TimedSpan, sandbox: dict[str, Any]) -> dict[str, Any]:
    keys = ("gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.type")
    attributes = {key: span.attributes[key] for key in keys} | {
        "rollout_tax.substrate": sandbox.get("rollout_tax.substrate", "")
    }
    return attributes | ({"error.type": span.error} if span.error else {})


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@contextmanager
def _quiet_exporter_logs() -> Iterator[None]:
    """The exporter's own retry warnings stay out of the run's output: one line says it."""
    loggers = [logging.getLogger(f"{EXPORTER_LOGGER}.{name}") for name in EXPORTER_MODULES]
    previous = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, previous, strict=True):
            logger.disabled = disabled
