"""``--rollout-otlp``: the run's traces and metrics over OTLP/HTTP, in OpenTelemetry's GenAI
names (docs/telemetry.md). Nothing is exported, and OpenTelemetry is not imported, unless an
endpoint is given here or in the standard ``OTEL_EXPORTER_OTLP_*`` variables. The endpoint is
read and checked once, when the session starts, and shown only without its credentials."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

from ..core.urls import check_url, redact_url
from ..report.document import Report
from . import add_option, option, spelled

FLAG = "--rollout-otlp"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLE = "OTEL_EXPORTER_OTLP_PROTOCOL"
PROTOCOL = "http/protobuf"
EXTRA = "pip install 'pytest-rollout-tax[otel]'"
#: The collector's URL, checked when the session started (None: nothing is exported).
ENDPOINT = pytest.StashKey[str | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser, FLAG, "send the run's traces and metrics over OTLP/HTTP (protobuf) to the "
               "collector at URL (default: OTEL_EXPORTER_OTLP_ENDPOINT; none: nothing exported)",
               "string", None, metavar="URL")  # fmt: skip


def endpoint(config: pytest.Config) -> tuple[str, str] | None:
    """Where the telemetry goes, and what named it: ``--rollout-otlp`` (or its ini twin), else
    the first standard variable set."""
    given = option(config, FLAG)
    if given:
        return spelled(config, FLAG), given
    variables = (name for name in ENDPOINT_VARIABLES if os.environ.get(name))
    return next(((name, os.environ[name]) for name in variables), None)


def pytest_configure(config: pytest.Config) -> None:
    """An endpoint the run cannot export to is a usage error before any test runs."""
    found = endpoint(config)
    config.stash[ENDPOINT] = None
    if found is None:
        return
    try:
        url = check_url(found[1], found[0])
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    protocol = os.environ.get(PROTOCOL_VARIABLE)
    if protocol and protocol != PROTOCOL:
        raise pytest.UsageError(f"{PROTOCOL_VARIABLE}={protocol!r}: rollout-tax exports {PROTOCOL}")
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        raise pytest.UsageError(f"{FLAG} needs the [otel] extra: {EXTRA}")
    config.stash[ENDPOINT] = url


def pytest_rollout_tax_report(
    config: pytest.Config, report: Report, summary: Any, verdict: Any
) -> list[str] | None:
    target = config.stash.get(ENDPOINT, None)
    if target is None:
        return None
    from ..telemetry import otel, timeline

    warning = otel.export(timeline.records_of(report), target)
    return [warning or f"traces and metrics sent to {redact_url(target)} (OTLP/HTTP)"]
