"""Hooks of pytest-html and pytest-json-report, called only where they are installed: the
rollout summary and plots in pytest-html's page, the summary in pytest-json-report's JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..page import html
from ..report.document import Report
from ..summary.terminal import render_summary


class ReportBridges:
    """The session's report in other plugins' reports."""

    def __init__(self, current_report: Callable[[], Report | None]) -> None:
        #: The session's report so far (None before any rollout finished).
        self._report = current_report

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str]
    ) -> None:
        report = self._report()
        if report is not None:
            postfix.append(html.fragment(report, render_summary(report)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        report = self._report()
        if report is not None:
            json_report["rollout_tax"] = {
                k: v for k, v in report.to_dict().items() if k != "rollouts"
            }
