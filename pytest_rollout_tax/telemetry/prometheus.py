"""Prometheus histograms of a run, named and bucketed as kubernetes-sigs/agent-sandbox's.

``rollout_tax_sandbox_startup_latency_ms{substrate, launch_type, template}`` has the buckets of
agent-sandbox's ``agent_sandbox_claim_startup_latency_ms``, so a dashboard's
``histogram_quantile`` queries and its gates (p50 and p90 under 1 s, p99 under 5 s) work
unchanged; ``template`` is the sandbox's image or template (a rollout's ``template``), empty
(which Prometheus reads as no label) where the substrate has none. Steps and the per-action
tax (``rollout_tax_action_latency_ms``, each no-op probe) have buckets from 50 µs, so a local or
session step falls in a bucket of its own size. Pushed to a Pushgateway
(``--rollout-prometheus-push``) or written for the node exporter's textfile collector
(``--rollout-prometheus-file``), atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from ..core.transport import one_line
from ..core.urls import redact_text, redact_url, with_scheme
from ..errors import ConfigError
from .timeline import spans_of

try:
    from prometheus_client import (
        CollectorRegistry,
        Counter,
        Histogram,
        push_to_gateway,
        write_to_textfile,
    )
    from prometheus_client.exposition import basic_auth_handler, default_handler
except ImportError as exc:  # pragma: no cover - exercised by a test that hides the extra
    raise ConfigError(
        "Prometheus export needs the [prometheus] extra: "
        f"pip install 'pytest-rollout-tax[prometheus]' ({exc.name} is missing)"
    ) from None

JOB = "rollout_tax"
#: agent-sandbox's startup buckets, 100 ms to 4 minutes.
STARTUP_BUCKETS_MS = (100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 5000, 10000, 30000,
                      60000, 120000, 240000)  # fmt: skip
#: Step and action buckets, in milliseconds: sub-millisecond ones for local and session steps
#: (tens of µs to a few ms), then the GenAI ``execute_tool`` buckets from 10 ms.
STEP_BUCKETS_MS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560,
                   5120, 10240, 20480, 40960, 81920)  # fmt: skip
SANDBOX_LABELS = ("substrate", "launch_type", "template")


def registry_of(records: Iterable[dict[str, Any]]) -> CollectorRegistry:
    """The run's histograms and counters, from ``rollouts[]`` items with every step column."""
    registry = CollectorRegistry()
    startup = Histogram(
        "rollout_tax_sandbox_startup_latency_ms",
        "A sandbox's cold start: the create request to its first no-op exec, in milliseconds.",
        SANDBOX_LABELS,
        buckets=STARTUP_BUCKETS_MS,
        registry=registry,
    )
    teardown = Histogram(
        "rollout_tax_sandbox_teardown_latency_ms",
        "A sandbox's teardown: the delete request until it is gone, in milliseconds.",
        SANDBOX_LABELS,
        buckets=STARTUP_BUCKETS_MS,
        registry=registry,
    )
    steps = Histogram(
        "rollout_tax_step_latency_ms",
        "One tool call (exec, write_file, read_file) as the workload waited for it, in ms.",
        ("substrate", "tool"),
        buckets=STEP_BUCKETS_MS,
        registry=registry,
    )
    actions = Histogram(
        "rollout_tax_action_latency_ms",
        "The per-action tax: one no-op exec on the path every step takes, in milliseconds.",
        ("substrate", "template"),
        buckets=STEP_BUCKETS_MS,
        registry=registry,
    )
    rollouts = Counter(
        "rollout_tax_rollouts",
        "Rollouts by outcome (passed, failed, error, infra_failed, interrupted, ...).",
        ("substrate", "outcome"),
        registry=registry,
    )
    for record in records:
        substrate = record.get("substrate", "")
        rollouts.labels(substrate, record.get("outcome", "")).inc()
        for probe in record.get("action_probes_s") or ():
            actions.labels(substrate, record.get("template") or "").observe(probe * 1000)
        timeline = spans_of(record)
        if timeline is None:
            continue
        labels = (substrate, timeline.launch_type, record.get("template") or "")
        if record.get("cold_start_s") is not None:
            startup.labels(*labels).observe(record["cold_start_s"] * 1000)
        if record.get("teardown_s") is not None:
            teardown.labels(*labels).observe(record["teardown_s"] * 1000)
        for span in timeline.children:
            if span.name.startswith("execute_tool "):
                tool = span.attributes["gen_ai.tool.name"]
                steps.labels(substrate, tool).observe(span.duration_s * 1000)
    return registry


def push(records: Iterable[dict[str, Any]], gateway: str, *, timeout: float = 10.0) -> str | None:
    """Push the run's metrics to the Pushgateway at ``gateway`` (``HOST:PORT`` is ``http://``,
    as prometheus_client reads it; a ``user:password@`` in it is sent as HTTP basic auth); a
    warning line, without any credential, on failure."""
    try:
        parts = urlsplit(with_scheme(gateway, "http"))
        handler = default_handler if parts.username is None else _basic_auth(parts)
        url = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        push_to_gateway(
            url, job=JOB, registry=registry_of(records), timeout=timeout, handler=handler
        )
    except (OSError, ValueError) as exc:  # unreachable, refused (an HTTPError), a bad URL
        why = redact_text(one_line(exc), gateway)
        return f"rollout-tax: Prometheus push to {redact_url(gateway)} failed: {why}"
    return None


def _basic_auth(parts: SplitResult) -> Callable[..., Any]:
    """prometheus_client's basic-auth handler with the URL's user and password."""
    user, password = unquote(parts.username or ""), unquote(parts.password or "")

    def handler(url: str, method: str, timeout: Any, headers: Any, data: bytes) -> Any:
        return basic_auth_handler(url, method, timeout, headers, data, user, password)

    return handler


def write(records: Iterable[dict[str, Any]], path: str) -> str | None:
    """Write the run's metrics in the text format at ``path`` (the textfile collector reads
    ``*.prom``), atomically; a warning line on failure."""
    try:
        write_to_textfile(path, registry_of(records))
    except OSError as exc:
        return f"rollout-tax: cannot write Prometheus metrics to {path}: {exc.strerror or exc}"
    return None
