"""The rollout-tax side of one pytest session: what it gathers while tests run, and its end.

:class:`RolloutTaxSession` is the one object behind the hooks (as pytest-benchmark's
``BenchmarkSession`` is): it holds the session's substrates and the records of its rollouts,
and at the end :meth:`~RolloutTaxSession.finish` releases every sandbox, builds the report,
judges it and hands it to the outputs, and :meth:`~RolloutTaxSession.display` prints what they
returned.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..core.control_plane import ControlPlane
from ..core.pool_stats import PoolStats
from ..core.record import STEP_COLUMNS, Rollout
from ..errors import CredentialsMissing, RolloutTaxError, reason_of
from ..fleet import burst
from ..fleet.instances import Substrates
from ..gate import compare, history, latest, testbed
from ..gate.latest import Latest
from ..outputs import saved_run
from ..outputs.outcome import SessionOutcome
from ..report.aggregate import GATE_COLUMNS, STEP_CHOICES, Aggregate, Row
from ..report.build import Fleet, absent, for_saving, summarize
from ..report.document import Report
from ..report.machine import commit_info, machine_info
from ..report.training import with_training
from ..summary import sections
from ..summary.terminal import render_nothing_ran
from ..text.width import MIN_WIDTH, terminal_width
from . import xdist
from .gating import Gate
from .output_calls import call_outputs
from .progress import ColdStartProgress
from .rollouts import slot
from .settings import Settings
from .shard import Client
from .verdict import SessionVerdict, session_verdict


class RolloutTaxSession:
    """One pytest process's rollouts (controller, xdist worker or serial run) and their end."""

    def __init__(
        self, config: pytest.Config, settings: Settings, substrates: Substrates, gate: Gate
    ) -> None:
        self.config = config
        self.settings = settings
        #: Compares the run with its baseline (``plugin/gating.py``).
        self.gate = gate
        self.substrates = substrates
        self.is_worker = hasattr(config, "workerinput")
        #: Finished rollouts, from teardown reports (this process's or an xdist worker's).
        #: (A training projection reads each step's think and recorded command time: all kept.)
        self.aggregate = Aggregate(
            STEP_COLUMNS if settings.train else STEP_CHOICES[settings.json_steps] or GATE_COLUMNS
        )
        #: Rollouts started in this process and not yet torn down.
        self.running: list[Rollout] = []
        #: Burst levels measured before the tests, by substrate.
        self.bursts: dict[str, list[burst.BurstLevel]] = {}
        #: Warm pools' stats records, by substrate (xdist: one per worker).
        self.pool_records: dict[str, list[dict[str, Any]]] = {}
        #: Each measured substrate's control plane, timed at the end of the session.
        self.control_planes: dict[str, ControlPlane] = {}
        self.progress = ColdStartProgress(None)
        #: This client's shard, synchronized start, workload fingerprint and saturation.
        self.client = Client(settings.shard, settings.start_at, settings.scale, __version__, slot)
        #: The session's report, once :meth:`finish` has made it.
        self.report: Report | None = None
        #: What the summary prints: the outputs' lines (the terminal summary first), then the
        #: history gate's; or why nothing ran.
        self.lines: list[str] = []
        self.regression_lines: list[str] = []
        #: The verdict of a gated session, or of one the rollout tax failed (else None).
        self.verdict: SessionVerdict | None = None
        #: The session's exit status, once :meth:`finish` has decided it.
        self.exit_status = 0

    # -- while the tests run ---------------------------------------------------------------

    def run_bursts(self) -> None:
        """Measure ``--rollout-burst`` on every selected substrate, before the tests."""
        for name in self.settings.specs:
            self.bursts[name] = self._burst(name)

    def _burst(self, name: str) -> list[burst.BurstLevel]:
        """The burst levels of substrate ``name``: none without credentials (its rollouts are
        skipped too), and every start failed on a substrate that is unusable otherwise."""
        try:
            substrate = self.substrates.get(name)
        except CredentialsMissing:
            return []
        except RolloutTaxError as exc:
            return [
                burst.BurstLevel(n, failure_reasons=Counter({reason_of(exc): n}))
                for n in self.settings.bursts
            ]
        return burst.run(substrate, self.settings.bursts)

    def add_pool_records(self, records: dict[str, list[dict[str, Any]]]) -> None:
        """Warm-pool stats from a process that used the substrates (this one or a worker)."""
        for name, stats in records.items():
            self.pool_records.setdefault(name, []).extend(stats)

    # -- the end ---------------------------------------------------------------------------

    def finish(self, exitstatus: int) -> int:
        """End the session: release every sandbox, then (controller or serial run) build the
        report, judge it (the gate) and hand it to every output through the
        ``pytest_rollout_tax_report`` hook. Returns the session's exit status."""
        self._release()
        if self.is_worker:
            xdist.hand_over(self.config, xdist.POOLS_KEY, self.pool_records)
            return exitstatus
        if not self.aggregate:
            if self._selected():  # asked to measure: say why nothing was
                not_run = absent(self.settings.specs, (), self._why_not_run)
                self.lines = render_nothing_ran(not_run)
            return exitstatus
        report = self.report = testbed.stamped(self.summarize())
        verdict = self.gate.judge(for_saving(report), width=self._width())
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        saved, saving = saved_run.save(
            self.config, report, interrupted=interrupted, width=verdict.width
        )
        found = None
        if self._gated() and verdict.state != "refused":
            found, changes = self._look_back(report, saved)
            verdict = dataclasses.replace(verdict, history=changes)
        outcome = SessionOutcome(
            report,
            sections.summarize(report),
            verdict,
            saved=saved,
            interrupted=interrupted,
            baseline=self.gate.baseline,
            compared=self.gate.compare is not None,
        )
        # each output called on its own, so one that raises costs only itself
        returned = call_outputs(
            self.config, report=report, summary=outcome.summary, verdict=verdict, outcome=outcome
        )
        # the terminal summary first, then the outputs' lines (the JSON file first, the page
        # last), the gate's (outputs/terminal_summary.py), and the saved run's last
        results = [*returned, saving]
        self.lines = [line for result in results for line in result.lines]
        # an output that was asked for could not be written (the summary's own error lines
        # are findings about the run, which the verdict counts on its own)
        write_failed = any(result.failed for result in results)
        self.regression_lines = verdict.regression_lines
        history_failed = self.settings.history_fail and self._history_gate(found, saved)
        self.verdict = session_verdict(
            self.gate,
            verdict,
            shared=len(report.shared_sandboxes),
            history_fail=self.settings.history_fail,
            history_failed=history_failed,
            write_failed=write_failed,
        )
        if self.verdict is not None:
            exitstatus = self.verdict.exit_status(exitstatus)
        self.exit_status = int(exitstatus)
        return exitstatus

    def _width(self) -> int:
        """The width the gate's lines fit: pytest's terminal's, at least the summary's."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return terminal_width()
        return max(MIN_WIDTH, self.config.get_terminal_writer().fullwidth)

    def display(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Print the verdict, the outputs' lines, and the regressions the gate found."""
        if not self.lines:
            return
        terminalreporter.write_sep("=", "rollout tax")
        if self.verdict is not None:  # the verdict first; FinalLine repeats it last
            self.verdict.write(terminalreporter, self.exit_status)
        for line in self.lines:
            terminalreporter.write_line(line)
        for line in relay_lines(self.aggregate.rows):
            terminalreporter.write_line(line)
        if self.regression_lines:
            terminalreporter.write_sep("=", compare.REGRESSION_HEADING, red=True)
            for line in self.regression_lines:
                terminalreporter.write_line(line)

    def current_report(self) -> Report | None:
        """The session's report; before :meth:`finish` has made it (other plugins' session-end
        hooks may run first), the report of every rollout finished so far (None: none yet)."""
        if self.report is not None:
            return self.report
        return self.summarize() if self.aggregate else None

    def summarize(self) -> Report:
        """The report of the rollouts finished so far (``rollouts[]`` made on demand), with
        its training section when ``--rollout-train`` (or ranking by it) asked for one."""
        report = summarize(
            self.aggregate,
            self.settings.scale,
            plugin_version=__version__,
            machine=machine_info(),
            commit=commit_info(self.config.rootpath),
            steps=self.settings.json_steps,
            fleet=Fleet(
                bursts=self.bursts,
                pools={n: PoolStats.merge(r) for n, r in self.pool_records.items() if r},
                workers=self.settings.fleet,
            ),
            control_planes=self.control_planes,
            client=self.client.report(),
            not_run=absent(self.settings.specs, self.aggregate.samples, self._why_not_run),
        )
        return with_training(report, self.settings.train)

    def _selected(self) -> bool:
        """True when substrates were selected (``--substrate`` or its ini twin), not defaulted."""
        return bool(self.config.getoption("rollout_substrates", None)) or self.config.getini(
            "rollout_substrates"
        ) != ["local"]

    def _why_not_run(self, name: str) -> str | None:
        """Why a selected substrate that ran no rollout could not start one, if it could not."""
        try:
            self.substrates.get(name)
        except RolloutTaxError as exc:
            return reason_of(exc)
        return None

    def _release(self) -> None:
        """Destroy unclaimed pooled sandboxes and whatever this session left, time the control
        planes, and record the rollouts an interruption left running."""
        self.progress.close()
        for name, stats in self.substrates.close_pools().items():
            self.pool_records.setdefault(name, []).append(stats.to_record())
        if not self.is_worker:
            # xdist workers share one session id: a worker that finishes first must not reap
            # the sandboxes other workers still use (the controller reaps after a crash).
            self.substrates.reap_session()
            self.control_planes = self._control_planes()
        self.substrates.close()
        for rollout in self.running:  # the session was interrupted while these ran
            rollout.outcome = "interrupted"
            self.aggregate.add(rollout.to_dict())

    def _control_planes(self) -> dict[str, ControlPlane]:
        """Each measured substrate's control plane, timed from this process (the client)."""
        planes = {}
        for name in self.aggregate.samples:
            try:
                plane = self.substrates.get(name).control_plane()
            except RolloutTaxError:  # e.g. no credentials: it measured nothing either
                continue
            if plane is not None:
                planes[name] = plane
        return planes

    def _gated(self) -> bool:
        """Whether the session is gated: checks against a baseline, or the history gate."""
        return bool(self.gate.checks and self.gate.compare is not None) or bool(
            self.settings.history_fail
        )

    def _look_back(
        self, report: Report, saved: tuple[Path, ...]
    ) -> tuple[history.History | None, Latest]:
        """The saved runs' history, this run included (when not saved, as ``this run``), and
        its latest change points; None and why, when it cannot be read."""
        extra = () if saved else (("this run", report),)
        try:
            history.require()
            found = history.of_storage(self.gate.storage, extra=extra)
        except RolloutTaxError as exc:
            return None, latest.unavailable(str(exc))
        return found, latest.latest(found, report)

    def _history_gate(self, found: history.History | None, saved: tuple[Path, ...]) -> bool:
        """Add the history gate's lines; whether it found a new slowdown."""
        if not saved:
            self.lines.append(
                "rollout-tax: --rollout-history-fail has no effect: this run was not saved "
                "(add --rollout-autosave)"
            )
            return False
        if found is None:  # the gate's lines say why
            return False
        lines, regression = history.new_change_points(found, self.gate.storage, saved)
        self.lines += lines
        self.regression_lines = [*self.regression_lines, *regression]
        return bool(regression)


def relay_lines(rows: list[Row]) -> list[str]:
    """Once per run, for each substrate and reason: its session steps went through the shell's
    relay, not the step helper (``core/stepper.py``), and why."""
    said = dict.fromkeys(
        (row.fields["substrate"], row.fields["relay_reason"])
        for row in rows
        if row.fields.get("relay_reason")
    )
    return [
        f"{name}: session steps went through the shell's relay, not the step helper: {why}"
        for name, why in said
    ]
