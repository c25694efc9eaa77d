"""``--rollout-prometheus-push`` and ``--rollout-prometheus-file``: the run's histograms in
agent-sandbox's names, to a Pushgateway or the node exporter's textfile collector
(docs/telemetry.md). The Prometheus client is imported only when one is given."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from ..core.files import check_report_path
from ..core.urls import check_url, redact_url
from ..report.document import Report
from . import add_option, option, spelled

PUSH = "--rollout-prometheus-push"
FILE = "--rollout-prometheus-file"
EXTRA = "pip install 'pytest-rollout-tax[prometheus]'"
EXAMPLE = "http://127.0.0.1:9091"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser, PUSH, "push the run's Prometheus metrics to the Pushgateway at URL "
               "(job rollout_tax)", "string", None, metavar="URL")  # fmt: skip
    add_option(parser, FILE, "write the run's Prometheus metrics in the text format to PATH, "
               "for the node exporter's textfile collector", "string", None,
               metavar="PATH")  # fmt: skip


def written_files(config: pytest.Config) -> list[tuple[str, str | None]]:
    """The file this output writes (``plugin/output_paths.py``: one path, one output)."""
    path = option(config, FILE)
    return [(f"{FILE}={path}", path)]


def pytest_configure(config: pytest.Config) -> None:
    """A gateway URL that can never work, a file that cannot be written, or a missing extra is
    a usage error before any test."""
    given = [flag for flag in (PUSH, FILE) if option(config, flag)]
    if not given:
        return
    gateway, path = option(config, PUSH), option(config, FILE)
    try:
        if gateway:
            check_url(gateway, spelled(config, PUSH), example=EXAMPLE, bare="http")
        if path:
            check_report_path(path, f"{FILE}={path}")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if importlib.util.find_spec("prometheus_client") is None:
        raise pytest.UsageError(f"{given[0]} needs the [prometheus] extra: {EXTRA}")


def pytest_rollout_tax_report(
    config: pytest.Config, report: Report, summary: Any, verdict: Any
) -> list[str] | None:
    gateway, path = option(config, PUSH), option(config, FILE)
    if not gateway and not path:
        return None
    from ..telemetry import prometheus, timeline

    records = list(timeline.records_of(report))
    lines = []
    if gateway:
        pushed = f"metrics pushed to {redact_url(gateway)}"
        lines.append(prometheus.push(records, gateway) or pushed)
    if path:
        lines.append(prometheus.write(records, path) or f"metrics written to {path}")
    return lines
