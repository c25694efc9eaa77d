"""A rollout test's own pytest report without its rollout's secrets: every ``env`` value the
rollout passed and every credential its substrate holds become ``[REDACTED]`` in the failure
section (``longrepr``), the captured output sections and so in what xdist forwards (the
worker's report is redacted before it is sent). ``--rollout-no-redact`` keeps them, for
debugging on one's own machine."""

from __future__ import annotations

from typing import Any

import pytest

from ..core.record import Rollout


def redact_report(config: pytest.Config, report: pytest.TestReport, rollout: Rollout) -> None:
    """Replace ``report``'s failure and captured sections with their redacted copies, through
    pytest's own serialization (the one xdist uses), which keeps every part's structure."""
    if not rollout.secrets or (report.longrepr is None and not report.sections):
        return
    data = config.hook.pytest_report_to_serializable(config=config, report=report)
    if data is None:
        return
    clean = _redacted(data, rollout)
    if clean == data:
        return
    copy = config.hook.pytest_report_from_serializable(config=config, data=clean)
    if copy is not None:
        report.longrepr = copy.longrepr
        report.sections = copy.sections


def _redacted(value: Any, rollout: Rollout) -> Any:
    """``value`` (a report's JSON-able form) with each string redacted."""
    if isinstance(value, str):
        return rollout.redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item, rollout) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redacted(item, rollout) for item in value)
    return value
