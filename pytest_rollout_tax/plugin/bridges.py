"""Hooks of pytest-html and pytest-json-report, called only where they are installed: the
rollout summary and plots in pytest-html's page, the summary in pytest-json-report's JSON."""

from __future__ import annotations

import pytest

from ..report import html
from ..report.terminal import render_summary
from .session import RolloutTaxSession


class ReportBridges:
    """The session's report in other plugins' reports."""

    def __init__(self, session: RolloutTaxSession) -> None:
        self.session = session

    def _report(self) -> dict | None:
        """The session's report; before the session has made it (these plugins' session-finish
        hooks may run first), the report of every rollout finished so far."""
        if self.session.report is not None:
            return self.session.report
        return self.session.summarize() if self.session.aggregate else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list, summary: list, postfix: list) -> None:
        report = self._report()
        if report is not None:
            postfix.append(html.fragment(report, render_summary(report)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict) -> None:
        report = self._report()
        if report is not None:
            json_report["rollout_tax"] = {k: v for k, v in report.items() if k != "rollouts"}
