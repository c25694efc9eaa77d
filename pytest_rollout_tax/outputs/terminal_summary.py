"""The terminal summary: the report's sections wrapped to the terminal (summary/terminal.py),
first among the outputs' lines, and the gate's comparison last."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from ..summary.terminal import render
from .outcome import OutputResult, Returned, SessionOutcome


@pytest.hookimpl(wrapper=True)
def pytest_rollout_tax_report(
    outcome: SessionOutcome,
) -> Generator[None, list[Returned], list[Returned]]:
    """The summary's lines before every other output's, the gate's lines after them."""
    written = yield
    summary = OutputResult(tuple(render(outcome.summary)))
    return [summary, *written, OutputResult(tuple(outcome.verdict.summary_lines))]
