"""The session's verdict in one line, first in the rollout-tax summary and last in the session,
and pytest's final line kept from reading as a success when the rollout tax failed the session
(docs/gating.md#the-verdict-first-and-last)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

import pytest

from ..gate.compare import Verdict
from ..text.width import MIN_WIDTH, wrap
from .gating import Gate

#: The count pytest's final line gains when the rollout tax failed the session
#: (``6 passed, 1 rollout-tax gate failed in 1.20s``).
STATS_KEY = "rollout-tax gate failed"


@dataclass(frozen=True)
class SessionVerdict:
    """Why the rollout tax failed the session (none: it did not), and what a gated run
    checked."""

    reasons: tuple[str, ...] = ()
    #: What the gate checked (``2 check(s) against main.json``), for a run that passed.
    checked: tuple[str, ...] = ()
    #: The width its line is wrapped to: the gate's (the terminal's).
    width: int = MIN_WIDTH

    @property
    def failed(self) -> bool:
        return bool(self.reasons)

    def line(self, exit_status: int) -> str:
        """``rollout-tax gate: FAILED (exit status 1): local cold_start.p50 +94.9% (...)``."""
        if self.failed:
            why = "; ".join(self.reasons)
            return f"rollout-tax gate: FAILED (exit status {exit_status}): {why}"
        return f"rollout-tax gate: passed ({'; '.join(self.checked)})"

    def write(self, reporter: pytest.TerminalReporter, exit_status: int) -> None:
        """The line, wrapped to the width, red when failed and green when passed."""
        for part in wrap(self.line(exit_status), self.width):
            reporter.write_line(part, red=self.failed, green=not self.failed, bold=True)


def session_verdict(
    gate: Gate,
    verdict: Verdict,
    *,
    shared: int,
    history_fail: bool,
    history_failed: bool,
    write_failed: bool,
) -> SessionVerdict | None:
    """The verdict of a session gated (checks with ``--rollout-compare``, or
    ``--rollout-history-fail``) or failed by the rollout tax; None for any other."""
    reasons = [outcome.brief() for outcome in verdict.outcomes if outcome.status == "failed"]
    if history_failed:
        reasons.append("a new slowdown in the saved runs' history")
    if shared:
        reasons.append(f"{shared} sandbox(es) served more than one rollout")
    if write_failed:
        reasons.append("an output asked for was not written")
    checked = []
    if gate.checks and gate.compare is not None:
        count = f"{len(gate.checks)} check(s)"
        if gate.baseline is None:
            checked.append(f"no baseline: {count} not applied")
        else:
            checked.append(f"{count} against {gate.baseline.path.name}")
    if history_fail:
        checked.append("no new slowdown in the saved runs' history")
    if not reasons and not checked:
        return None
    return SessionVerdict(tuple(reasons), tuple(checked), verdict.width)


def mark_final_line(reporter: pytest.TerminalReporter, verdict: SessionVerdict) -> None:
    """Make pytest's final line red and count the failed gate in it.

    An empty ``failed`` entry turns the line red as a failed test does, counting no test; the
    ``STATS_KEY`` entry adds ``1 rollout-tax gate failed``. pytest caches the line's colour and
    the counts it names, so they are worked out again."""
    reporter.stats.setdefault("failed", [])
    reporter.stats.setdefault(STATS_KEY, []).append(verdict)
    refresh = getattr(reporter, "_set_main_color", None)  # no public way; pytest 7.0 to 9.2
    if refresh is not None:
        refresh()


class FinalLine:
    """The session's end: pytest's final line marked when the rollout tax failed the session,
    then the verdict as the session's last line. ``verdict`` is the session's, or None
    (an ungated run that did not fail: nothing to say)."""

    def __init__(self, verdict: Callable[[], SessionVerdict | None]) -> None:
        self.verdict = verdict

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after pytest's short summary
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> Generator:
        result = yield
        verdict = self.verdict()
        if verdict is not None and verdict.failed:
            mark_final_line(terminalreporter, verdict)
        return result

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after pytest's final line
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator:
        result = yield
        verdict = self.verdict()
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if verdict is not None and reporter is not None:
            verdict.write(reporter, int(session.exitstatus))
        return result
