"""The terminal summary: the report's sections wrapped to the terminal (summary/terminal.py),
first among the outputs' lines, and the gate's comparison last."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from ..gate.compare import Verdict
from ..report.document import Report
from ..summary.terminal import render


@pytest.hookimpl(wrapper=True)
def pytest_rollout_tax_report(
    config: pytest.Config, report: Report, summary: Any, verdict: Verdict
) -> Generator[None, list, list]:
    """The summary's lines before every other output's, the gate's lines after them."""
    written = yield
    return [render(summary), *written, verdict.summary_lines]
