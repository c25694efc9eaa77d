"""``--rollout-html``: the self-contained HTML page of the run (page/), with the baseline and
the gate's verdict when the run was compared."""

from __future__ import annotations

from typing import Any

import pytest

from ..core.files import check_report_path
from ..page import html, plots
from ..report.document import Report
from . import GATE, OUTPUT_ERROR, add_option, option

FLAG = "--rollout-html"


def pytest_addoption(parser: pytest.Parser) -> None:
    help_text = (
        "write the report as one self-contained HTML page with plots to PATH "
        "(needs the [html] extra: matplotlib)"
    )
    add_option(parser, FLAG, help_text, "string", None, metavar="PATH")


def pytest_configure(config: pytest.Config) -> None:
    """A path that cannot be written, or no matplotlib, is a usage error before any test."""
    path = option(config, FLAG)
    if not path:
        return
    where = f"{FLAG}={path}"
    try:
        check_report_path(path, where)
        plots.require()
    except plots.PlotsUnavailable as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(trylast=True)
def pytest_rollout_tax_report(config: pytest.Config, report: Report, summary: Any, verdict: Any):
    path = option(config, FLAG)
    if not path:
        return None
    gate = config.stash.get(GATE, None)
    baseline = gate.baseline if gate else None
    saved = verdict.saved if verdict else ()
    name = saved[0].name if saved else option(config, "--rollout-json")
    try:
        page = html.render(
            report,
            baseline=baseline.report if baseline else None,
            baseline_label=baseline.label if baseline else "",
            verdict=verdict if gate is not None and gate.compare is not None else None,
            title=html.run_title(report, name),
            summary=summary,
        )
        written = html.write(path, page)
    except OSError as exc:
        return [f"{OUTPUT_ERROR} cannot write {path}: {exc.strerror or exc}"]
    return [f"HTML report written to {written}"]
