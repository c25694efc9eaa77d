"""pytest hooks and fixtures: the ``trajectory`` marker, parametrization over substrates and
rounds, the xdist hand-off and the terminal summary (the options: settings.py). No substrate
logic."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from .. import __version__
from ..core.record import Rollout
from ..core.sandbox import Sandbox
from ..core.substrate import Substrate, new_id
from ..errors import CredentialsMissing, RolloutTaxError, reason_of
from ..fleet import burst
from ..fleet.pool import PoolStats
from ..fleet.substrates import SubstratePool
from ..gate import compare, history
from ..report import html as html_report
from ..report.aggregate import GATE_COLUMNS, STEP_CHOICES, Aggregate
from ..report.build import Fleet, for_saving, summarize
from ..report.machine import commit_info, machine_info
from ..report.terminal import render_summary, write_json
from ..substrates.registry import Registry
from .marker import Trajectory
from .order import Slot, interleave
from .progress import ColdStartProgress, TerminalLine
from .replay_files import ReplayFile, Sources
from .settings import Settings, add_options, ini_name

REPORT_ATTRIBUTE = "rollout_tax"  # a teardown report's record; xdist ships it to the controller
WORKERINPUT_KEY = "rollout_tax_session"
USAGE_ERRORS_KEY = "rollout_tax_usage_errors"  # a worker's marker errors, raised on the controller
POOLS_KEY = "rollout_tax_pools"  # a worker's warm-pool stats, merged on the controller
MARKER = (
    "trajectory(steps=None, rounds=1, timeout=None, substrates=None): a rollout-tax workload. "
    "steps: the trajectory length it stands for (projection); rounds: fresh rollouts per "
    "substrate; timeout: default seconds per step; substrates: names it may run on."
)

rollout_key = pytest.StashKey[Rollout]()


# -- options: declared and checked in settings.py -----------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


# -- the marker --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What one parametrized test instance runs on."""

    substrate: str
    round: int
    trajectory: Trajectory

    @property
    def id(self) -> str:
        return f"{self.substrate}-{self.round}"


# -- the plugin --------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    if config.option.rollout_reap:
        return
    registry = Registry.discover()
    settings = Settings.from_config(config, registry)
    workerinput = getattr(config, "workerinput", None)
    session_id = workerinput[WORKERINPUT_KEY] if workerinput else new_id()
    pool = SubstratePool(settings.specs, registry, session_id, settings.output_cap)
    try:
        pool.validate()
    except RolloutTaxError as exc:
        raise pytest.UsageError(str(exc)) from None
    plugin = RolloutTaxPlugin(config, settings, pool)
    config.pluginmanager.register(plugin, "rollout-tax")
    _add_replay_paths(config, settings.replay_paths)
    if workerinput is None:
        config.pluginmanager.register(ReportBridges(plugin), "rollout-tax-reports")
    if config.pluginmanager.hasplugin("xdist") and workerinput is None:
        config.pluginmanager.register(XdistController(plugin), "rollout-tax-xdist")


def _add_replay_paths(config: pytest.Config, paths: tuple[Path, ...]) -> None:
    """Collect ``paths`` too; alone when given on the command line without test paths."""
    if not paths:
        return
    from_cli = bool(config.getoption(ini_name("--rollout-replay")))
    if from_cli and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = []
    given = set(config.args)
    config.args += [str(path) for path in paths if str(path) not in given]


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.option.rollout_reap:
        return None
    try:
        registry = Registry.discover()
        settings = Settings.from_config(config, registry)
    except pytest.UsageError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return pytest.ExitCode.USAGE_ERROR
    pool = SubstratePool(settings.specs, registry, new_id())
    status = pytest.ExitCode.OK
    for name in settings.specs:
        try:
            count = pool.get(name).reap(None)
        except RolloutTaxError as exc:
            print(f"rollout-tax: {name}: cannot reap: {exc}", file=sys.stderr)
            status = pytest.ExitCode.USAGE_ERROR
        else:
            print(f"rollout-tax: {name}: removed {count} leftover sandbox(es)")
    pool.close()
    return status


class RolloutTaxPlugin:
    """The hooks and fixtures of one pytest process (controller, worker or serial run)."""

    def __init__(self, config: pytest.Config, settings: Settings, pool: SubstratePool) -> None:
        self.config = config
        self.settings = settings
        self.pool = pool
        # finished rollouts, from teardown reports (this process's or a worker's)
        self.aggregate = Aggregate(STEP_CHOICES[settings.json_steps] or GATE_COLUMNS)
        self.running: list[Rollout] = []  # started in this process, not yet torn down
        self.is_worker = hasattr(config, "workerinput")
        self.summary_lines: list[str] = []
        self.regression_lines: list[str] = []
        self.report: dict | None = None  # the session's report, once it is made
        # bad markers and unreadable trajectories, raised once collection is done
        self.marker_errors: list[str] = []
        self.replay_sources = Sources(settings.replay_paths)
        self.bursts: dict[str, list[dict]] = {}  # burst levels measured, by substrate
        self.pool_records: dict[str, list[dict]] = {}  # warm pools' stats (xdist: per worker)
        self.control_planes: dict[str, dict] = {}  # timed at the end of the session
        self.progress = ColdStartProgress(None)  # given its terminal line at session start
        self._previous_sigterm: Any = None

    # -- collection, parametrization and fixtures ------------------------------------------

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        """Trajectory files as workloads (see replay_items)."""
        if not self.replay_sources.collects(file_path):
            return None
        return ReplayFile.from_parent(
            parent,
            path=file_path,
            mode=self.settings.replay_mode,
            errors=self.marker_errors,
            output_cap=self.settings.output_cap,
        )

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "_rollout_target" not in metafunc.fixturenames:
            return  # no rollout fixture, or the test's own fixtures shadow ours
        definition = metafunc.definition
        try:
            trajectory = Trajectory.from_marker(
                definition.get_closest_marker("trajectory"),
                definition.nodeid,
                self.settings.catalog.names,
            )
        except ValueError as exc:
            # A usage error, raised once collection is done: raised here, pytest would report
            # it as a collection error with a traceback (exit status 2).
            self.marker_errors.append(str(exc))
            return
        names = [name for name in self.settings.specs if self._runs_on(trajectory, name)]
        if self.settings.rounds_from_cli or trajectory.rounds is None:
            rounds = self.settings.rounds
        else:
            rounds = trajectory.rounds
        targets = [Target(name, r, trajectory) for name in names for r in range(1, rounds + 1)]
        metafunc.parametrize(
            "_rollout_target", targets, ids=[t.id for t in targets], indirect=True, scope="function"
        )

    def _runs_on(self, trajectory: Trajectory, name: str) -> bool:
        """Whether a test with ``trajectory`` runs on the selected substrate ``name``."""
        wanted = trajectory.substrates
        return wanted is None or any(self.settings.catalog.same(name, w) for w in wanted)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Stop on a bad marker with a usage error (an xdist worker's goes to the controller);
        else order the rollouts as ``--rollout-order`` asks."""
        if not self.marker_errors:
            if self.settings.order == "interleave":
                items[:] = interleave(items, _slot)
            return
        if self.is_worker:  # XdistController raises it when this worker goes down
            self.config.workeroutput[USAGE_ERRORS_KEY] = self.marker_errors
            items.clear()
            return
        raise pytest.UsageError(*self.marker_errors)

    @pytest.fixture
    def _rollout_target(self, request: pytest.FixtureRequest) -> Target:
        return request.param

    @pytest.fixture
    def substrate(self, request: pytest.FixtureRequest, _rollout_target: Target) -> Substrate:
        """The Substrate the current rollout runs on."""
        try:
            return self.pool.get(_rollout_target.substrate)
        except RolloutTaxError as exc:
            error = exc
        if "sandbox" in request.fixturenames and not isinstance(error, CredentialsMissing):
            self._begin_rollout(request, _rollout_target).fail(failure_reason(error))
        _skip_or_fail(error)

    @pytest.fixture
    def sandbox(self, request: pytest.FixtureRequest, _rollout_target: Target) -> Iterator[Sandbox]:
        """A fresh sandbox for this rollout, on the current substrate; deleted afterwards."""
        target = _rollout_target
        rollout = self._begin_rollout(request, target)
        sandbox = None
        try:
            token = self.progress.starting(target.substrate)
            try:
                sandbox = self.pool.start(
                    target.substrate, rollout, timeout=target.trajectory.timeout
                )
            finally:
                self.progress.finished(token, rollout.cold_start_s)
            sandbox.probe(self.settings.probes)
        except RolloutTaxError as exc:
            error = exc
        else:
            error = None
        if error is not None:  # outside the except block: no chained traceback in the report
            if sandbox is not None:  # started, but its probes failed
                _close_quietly(sandbox)
            if isinstance(error, CredentialsMissing):
                del request.node.stash[rollout_key]
                self.running.remove(rollout)
            else:
                rollout.fail(failure_reason(error))
            _skip_or_fail(error)
        try:
            yield sandbox
        finally:
            teardown_error = _close_quietly(sandbox)
        if teardown_error is not None:  # one line, no traceback, counted as the rollout's failure
            rollout.fail(failure_reason(teardown_error))
            pytest.fail(f"{target.substrate}: teardown: {teardown_error}", pytrace=False)

    def _begin_rollout(self, request: pytest.FixtureRequest, target: Target) -> Rollout:
        """A new record for this test's rollout, finished by its teardown report."""
        rollout = Rollout(
            test=request.node.nodeid,
            substrate=target.substrate,
            round=target.round,
            planned_steps=target.trajectory.steps,
        )
        replayed = getattr(request.function, "rollout_replay", None)  # a trajectory file's item
        if replayed is not None:
            rollout.replay = replayed.to_dict()
        request.node.stash[rollout_key] = rollout
        self.running.append(rollout)
        return rollout

    @pytest.fixture
    def rollout(self, sandbox: Sandbox) -> Rollout:
        """The current rollout's record: its phases, steps and probes so far."""
        return sandbox.rollout

    # -- outcomes ----------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report = (yield).get_result()
        rollout = item.stash.get(rollout_key, None)
        if rollout is None:
            return
        if report.failed and call.excinfo is not None:
            rollout.fail(failure_reason(call.excinfo.value))
        if report.when == "call" or (report.when == "setup" and not report.passed):
            rollout.outcome = (
                "error" if report.when == "setup" and report.failed else report.outcome
            )
        elif report.when == "teardown":
            if report.failed and rollout.outcome == "passed":
                rollout.outcome = "error"
            setattr(report, REPORT_ATTRIBUTE, rollout.to_dict())
            self.running.remove(rollout)
            del item.stash[rollout_key]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, REPORT_ATTRIBUTE, None)
        if record is not None and not self.is_worker:
            self.aggregate.add(record)
            delattr(report, REPORT_ATTRIBUTE)  # the terminal reporter keeps every report

    # -- the end of the session ------------------------------------------------------------

    def pytest_sessionstart(self) -> None:
        self._previous_sigterm = _install_sigterm_handler()
        self.progress = ColdStartProgress(self._live_line())

    def _live_line(self) -> TerminalLine | None:
        """Where the cold-start progress line goes: a terminal, unless -q or an xdist worker
        (whose output is not the terminal) or the output is a file or a pipe."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.is_worker or self.config.get_verbosity() < 0:
            return None
        if not reporter.isatty():
            return None
        capture = self.config.pluginmanager.get_plugin("capturemanager")

        def write(text: str) -> None:
            # A cold start runs in a fixture, while pytest captures the output: past it.
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                reporter.write_raw(text, flush=True)

        return TerminalLine(write)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        params = (getattr(getattr(item, "callspec", None), "params", {}) for item in session.items)
        planned = Counter(
            target.substrate
            for target in (p.get("_rollout_target") for p in params)
            if isinstance(target, Target)  # not a test that no selected substrate runs
        )
        for name, count in planned.items():
            self.progress.expect(name, count)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        """Before the tests, the bursts: once, in the controller or a serial run (xdist workers
        have collected and wait meanwhile, so nothing else runs on the substrates)."""
        collected = not session.config.option.collectonly and not session.testsfailed
        if self.settings.bursts and not self.is_worker and collected:
            for name in self.settings.specs:
                self.bursts[name] = self._burst(name)
        return (yield)

    def _burst(self, name: str) -> list[dict]:
        """The burst levels of substrate ``name``: none without credentials (its rollouts are
        skipped too), and every start failed on a substrate that is unusable otherwise."""
        try:
            substrate = self.pool.get(name)
        except CredentialsMissing:
            return []
        except RolloutTaxError as exc:
            return [
                burst.BurstLevel(n, failure_reasons=Counter({reason_of(exc): n})).to_dict()
                for n in self.settings.bursts
            ]
        return [level.to_dict() for level in burst.run(substrate, self.settings.bursts)]

    @pytest.hookimpl(trylast=True)  # after pytest has torn down the fixtures of an interrupted test
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.progress.close()
        for name, stats in self.pool.close_pools().items():  # unclaimed pooled sandboxes go
            self.pool_records.setdefault(name, []).append(stats.to_record())
        if self.is_worker:
            self.config.workeroutput[POOLS_KEY] = self.pool_records
        else:
            # xdist workers share one session id: a worker that finishes first must not reap
            # the sandboxes other workers still use (XdistController reaps after a crash).
            self.pool.reap_session()
            self.control_planes = self._control_planes()
        self.pool.close()
        for rollout in self.running:  # the session was interrupted while these ran
            rollout.outcome = "interrupted"
        for rollout in self.running:
            self.aggregate.add(rollout.to_dict())
        if self.is_worker or not self.aggregate:
            return
        report = self.report = self.summarize()
        self.summary_lines = render_summary(report)
        if self.settings.json_path:
            try:
                path = write_json(self.settings.json_path, report)
            except OSError as exc:
                self.summary_lines.append(
                    f"rollout-tax: error: cannot write {self.settings.json_path}: "
                    f"{exc.strerror or exc}"
                )
            else:
                self.summary_lines.append(f"report written to {path}")
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        verdict = self.settings.gate.finish(for_saving(report), save=not interrupted)
        self.summary_lines += verdict.summary
        self.regression_lines = verdict.regression
        failed = verdict.failed or bool(report["shared_sandboxes"])
        if self.settings.history_fail:
            failed = self._history_gate(verdict.saved) or failed
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.settings.html_path:
            self.summary_lines.append(self._write_html(report, verdict))

    def summarize(self) -> dict:
        """The report of the rollouts finished so far (``rollouts[]`` made on demand)."""
        return summarize(
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
        )

    def _write_html(self, report: dict, verdict: compare.Verdict) -> str:
        """Write the HTML page of ``report`` (with the baseline and the gate's verdict, if any)."""
        gate = self.settings.gate
        baseline = gate.baseline
        try:
            page = html_report.render(
                report,
                baseline=baseline.report if baseline else None,
                baseline_label=baseline.label if baseline else "",
                verdict=verdict.lines if gate.compare is not None else (),
            )
            path = html_report.write(self.settings.html_path, page)
        except OSError as exc:
            return (
                f"rollout-tax: error: cannot write {self.settings.html_path}: {exc.strerror or exc}"
            )
        return f"HTML report written to {path}"

    def _control_planes(self) -> dict[str, dict]:
        """Each measured substrate's control plane, timed from this process (the client)."""
        planes = {}
        for name in self.aggregate.samples:
            try:
                plane = self.pool.get(name).control_plane()
            except RolloutTaxError:  # e.g. no credentials: it measured nothing either
                continue
            if plane is not None:
                planes[name] = plane.to_dict()
        return planes

    def _history_gate(self, saved: tuple) -> bool:
        """Add the history gate's lines; whether it found a new slowdown."""
        if not saved:
            self.summary_lines.append(
                "rollout-tax: --rollout-history-fail has no effect: this run was not saved "
                "(add --rollout-autosave)"
            )
            return False
        lines, regression = history.new_change_points(self.settings.gate.storage, saved)
        self.summary_lines += lines
        self.regression_lines = [*self.regression_lines, *regression]
        return bool(regression)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.summary_lines:
            return
        terminalreporter.write_sep("=", "rollout tax")
        for line in self.summary_lines:
            terminalreporter.write_line(line)
        if self.regression_lines:
            terminalreporter.write_sep("=", compare.REGRESSION_HEADING, red=True)
            for line in self.regression_lines:
                terminalreporter.write_line(line)

    def pytest_unconfigure(self) -> None:
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)


class ReportBridges:
    """Hooks of pytest-html and pytest-json-report, called only where they are installed: the
    rollout summary and plots in pytest-html's page, the summary in pytest-json-report's JSON."""

    def __init__(self, plugin: RolloutTaxPlugin) -> None:
        self.plugin = plugin

    def _report(self) -> dict | None:
        """The session's report; before the plugin has made it (these plugins' session-finish
        hooks may run first), the report of every rollout finished so far."""
        if self.plugin.report is not None:
            return self.plugin.report
        return self.plugin.summarize() if self.plugin.aggregate else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list, summary: list, postfix: list) -> None:
        report = self._report()
        if report is not None:
            postfix.append(html_report.fragment(report, render_summary(report)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict) -> None:
        report = self._report()
        if report is not None:
            json_report["rollout_tax"] = {k: v for k, v in report.items() if k != "rollouts"}


class XdistController:
    """Controller-side xdist hooks: hand the session id out, reap after a crashed worker.

    The workers' records arrive with their teardown reports (``pytest_runtest_logreport``), so
    a worker that crashes loses only the rollout it was running.
    """

    def __init__(self, plugin: RolloutTaxPlugin) -> None:
        self.plugin = plugin
        self.crashed = False

    def pytest_configure_node(self, node) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.plugin.pool.session_id

    def pytest_testnodedown(self, node, error) -> None:
        self.crashed = self.crashed or error is not None
        output = getattr(node, "workeroutput", {})
        for name, records in output.get(POOLS_KEY, {}).items():  # one warm pool per worker
            self.plugin.pool_records.setdefault(name, []).extend(records)
        usage_errors = output.get(USAGE_ERRORS_KEY)
        if usage_errors:  # a bad marker found by the worker's collection
            raise pytest.UsageError(*usage_errors)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        if self.crashed:  # a worker died without cleaning up: reap what it left
            self.plugin.pool.reap_session(list(self.plugin.settings.specs))


def _slot(item: pytest.Item) -> Slot | None:
    """An item's place in the round-robin: (round, workload, substrate), or None."""
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get("_rollout_target") if callspec else None
    if not isinstance(target, Target):
        return None
    return target.round, item.nodeid.replace(target.id, "", 1), target.substrate


def _close_quietly(sandbox: Sandbox) -> RolloutTaxError | None:
    """Close ``sandbox``; return (not raise) a RolloutTaxError, so it reports as one line."""
    try:
        sandbox.close()
    except RolloutTaxError as exc:
        return exc
    return None


def _skip_or_fail(error: RolloutTaxError) -> NoReturn:
    """Skip a rollout for missing credentials; fail it with a one-line reason otherwise."""
    if isinstance(error, CredentialsMissing):
        pytest.skip(str(error))
    pytest.fail(str(error), pytrace=False)


def failure_reason(exc: BaseException) -> str:
    """A short, countable reason: the message of our errors (sandbox ids as ``<id>``, as
    bursts and pools count them), the type of a workload's."""
    if isinstance(exc, RolloutTaxError):
        return reason_of(exc)
    if isinstance(exc, pytest.fail.Exception):
        return str(exc).splitlines()[0][:200] if str(exc) else "failed"
    return f"test failed: {type(exc).__name__}"


def _install_sigterm_handler() -> Any:
    """Turn SIGTERM into KeyboardInterrupt so fixtures tear their sandboxes down."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        return signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        return None
