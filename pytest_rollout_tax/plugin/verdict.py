"""The session's verdict in one line, first in the rollout-tax summary and last in the session,
and pytest's final line kept from reading as a success when the rollout tax failed the session
(docs/gating.md#the-verdict-first-and-last)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

import pytest

from .. import flags
from ..gate.compare import Verdict
from ..gate.lines import brief
from ..text.width import MIN_WIDTH, wrap
from .gating import Gate

#: A pytest hook wrapper: it yields once, and returns what the wrapped hooks returned.
Wrapper = Generator[None, object, object]

#: The count pytest's final line gains when the rollout tax failed the session
#: (``6 passed, 1 rollout-tax gate failed in 1.20s``).
STATS_KEY = "rollout-tax gate failed"


#: How the verdict line reads in each state: red when failed, green when passed, yellow when
#: the gate judged nothing (never green for what it could not judge).
COLOURS = {"failed": "red", "passed": "green", "not applicable": "yellow", "no baseline": "yellow"}


@dataclass(frozen=True)
class SessionVerdict:
    """Why the rollout tax failed the session (none: it did not), what a gated run checked,
    and the gate's state, all read from the one tally the gate's section ends with."""

    reasons: tuple[str, ...] = ()
    #: What the gate checked (``2 check(s): 2 passed, against main.json``).
    checked: tuple[str, ...] = ()
    #: The width its line is wrapped to: the gate's (the terminal's).
    width: int = MIN_WIDTH
    #: ``passed``, ``failed``, ``not applicable`` (no check judged) or ``no baseline``.
    state: str = "passed"
    #: A usage error (``--rollout-compare-strict`` across testbeds): exit status 4.
    usage: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.reasons)

    def exit_status(self, exitstatus: int) -> int:
        """The session's exit status: a usage error's, else failed when the tests passed."""
        if self.usage:
            return int(pytest.ExitCode.USAGE_ERROR)
        if self.failed and exitstatus == pytest.ExitCode.OK:
            return int(pytest.ExitCode.TESTS_FAILED)
        return int(exitstatus)

    def line(self, exit_status: int) -> str:
        """``rollout-tax gate: FAILED (exit status 1; 2 check(s): 1 failed, 1 passed, against
        main.json): local cold_start.p50 +94.9% (threshold 15%)``."""
        checked = "; ".join(self.checked)
        if self.failed:
            what = f"exit status {exit_status}" + (f"; {checked}" if checked else "")
            return f"rollout-tax gate: FAILED ({what}): {'; '.join(self.reasons)}"
        return f"rollout-tax gate: {self.state} ({checked})"

    def write(self, reporter: pytest.TerminalReporter, exit_status: int) -> None:
        """The line, wrapped to the width, in its state's colour."""
        colour = "red" if self.failed else COLOURS.get(self.state, "yellow")
        for part in wrap(self.line(exit_status), self.width):
            reporter.write_line(part, **{colour: True}, bold=True)


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
    reasons = [brief(outcome) for outcome in verdict.outcomes if outcome.status == "failed"]
    if verdict.state == "refused":
        reasons += verdict.summary
    if history_failed:
        reasons.append("a new slowdown in the saved runs' history")
    if shared:
        reasons.append(f"{shared} sandbox(es) served more than one rollout")
    if write_failed:
        reasons.append("an output asked for was not written")
    checked = []
    state = "passed"
    if gate.checks and gate.compare is not None:
        if gate.baseline is None:
            state = "no baseline"
            checked.append(
                f"{gate.missing_name()}: {len(gate.checks)} check(s) not applied, "
                f"{flags.MISSING.plugin}=pass"
            )
        elif verdict.state != "refused":
            tally = verdict.tally
            state = tally.state
            checked.append(f"{tally.text()}, against {gate.baseline.path.name}")
    if history_fail:
        checked.append("no new slowdown in the saved runs' history")
    if not reasons and not checked:
        return None
    usage = verdict.state == "refused"
    return SessionVerdict(tuple(reasons), tuple(checked), verdict.width, state, usage)


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
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> Wrapper:
        result = yield
        verdict = self.verdict()
        if verdict is not None and verdict.failed:
            mark_final_line(terminalreporter, verdict)
        return result

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after pytest's final line
    def pytest_sessionfinish(self, session: pytest.Session) -> Wrapper:
        result = yield
        verdict = self.verdict()
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if verdict is not None and reporter is not None:
            verdict.write(reporter, int(session.exitstatus))
        return result
