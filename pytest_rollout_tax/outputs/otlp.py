"""``--rollout-otlp``: the run's traces and metrics over OTLP/HTTP, in OpenTelemetry's GenAI
names (docs/telemetry.md). Nothing is exported, and OpenTelemetry is not imported, unless an
endpoint is given here or in the standard ``OTEL_EXPORTER_OTLP_*`` variables."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

from ..report.document import Report
from . import add_option, option

FLAG = "--rollout-otlp"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLE = "OTEL_EXPORTER_OTLP_PROTOCOL"
PROTOCOL = "http/protobuf"
EXTRA = "pip install 'pytest-rollout-tax[otel]'"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser, FLAG, "send the run's traces and metrics over OTLP/HTTP (protobuf) to the "
               "collector at URL (default: OTEL_EXPORTER_OTLP_ENDPOINT; none: nothing exported)",
               "string", None, metavar="URL")  # fmt: skip


def endpoint(config: pytest.Config) -> str | None:
    """Where the telemetry goes: ``--rollout-otlp``, else the standard variables."""
    given: str | None = option(config, FLAG)
    if given:
        return given
    return next((os.environ[name] for name in ENDPOINT_VARIABLES if os.environ.get(name)), None)


def pytest_configure(config: pytest.Config) -> None:
    """An endpoint the run cannot export to is a usage error before any test runs."""
    if endpoint(config) is None:
        return
    protocol = os.environ.get(PROTOCOL_VARIABLE)
    if protocol and protocol != PROTOCOL:
        raise pytest.UsageError(f"{PROTOCOL_VARIABLE}={protocol!r}: rollout-tax exports {PROTOCOL}")
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        raise pytest.UsageError(f"{FLAG} needs the [otel] extra: {EXTRA}")


def pytest_rollout_tax_report(
    config: pytest.Config, report: Report, summary: Any, verdict: Any
) -> list[str] | None:
    target = endpoint(config)
    if target is None:
        return None
    from ..telemetry import otel, timeline

    warning = otel.export(timeline.records_of(report), target)
    return [warning or f"traces and metrics sent to {target} (OTLP/HTTP)"]
