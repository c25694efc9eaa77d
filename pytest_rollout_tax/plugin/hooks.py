"""The pytest hooks and fixtures: the ``trajectory`` marker, parametrization over substrates
and rounds, a sandbox per rollout. Each hook hands its work to the session object
(:mod:`.session`), the options (:mod:`.settings`), replay collection (:mod:`.replay_files`) or
xdist (:mod:`.xdist`)."""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import sys
from collections import Counter
from collections.abc import Generator, Iterator
from pathlib import Path

import pluggy
import pytest

from .. import outputs
from ..core import infra
from ..core.record import RATE_LIMITED, UNBOUND, Rollout
from ..core.sandbox import Sandbox
from ..core.substrate import Substrate, new_id
from ..errors import CredentialsMissing, RateLimited, RolloutTaxError
from ..fleet.instances import Substrates
from ..outputs.bridges import ReportBridges
from ..substrates.registry import Registry
from . import hookspecs, xdist
from .gating import gate_of
from .identity import identity_of
from .marker import Trajectory
from .order import interleave
from .output_paths import check_distinct
from .presence import OptionYield, asked
from .progress import ColdStartProgress, TerminalLine
from .redaction import redact_report
from .replay_files import ReplayCollection, ReplayFile
from .rollouts import (
    TARGET_PARAM,
    SaidOnce,
    Target,
    close_quietly,
    failure_reason,
    rollout_key,
    skip_or_fail,
    slot,
    start_failed,
    target_of,
)
from .session import RolloutTaxSession
from .settings import (
    OPTIONS,
    Settings,
    add_options,
    check_replay_path,
    dests,
    ini_defaults,
    ini_name,
)
from .signals import SigtermChain
from .verdict import FinalLine

REPORT_ATTRIBUTE = "rollout_tax"  # a teardown report's record; xdist ships it to the controller
MARKER = (
    "trajectory(steps=None, rounds=1, timeout=None, substrates=None, prepare=None): a "
    "rollout-tax workload. steps: the trajectory length it stands for (projection); rounds: "
    "fresh rollouts per substrate; timeout: default seconds per step; substrates: names it "
    "may run on; prepare: FUNC(sandbox), the setup before the steps (phase prepare)."
)


#: The options of the parser being built, until pytest_configure takes them.
_options: OptionYield | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    global _options
    _options = OptionYield(parser, {flag: ini_name(flag) for flag, *_ in OPTIONS})
    add_options(parser, _options.taken)


def pytest_plugin_registered(plugin_name: str) -> None:
    """A plugin or conftest.py registered just now: the one that took a flag of ours."""
    if _options is not None and _options.pending:
        _options.owner(plugin_name)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """A replay alone (``--rollout-replay`` and no test paths) is only a replay: the conftests
    under ``testpaths`` are not loaded, as no test there is collected. A path that is no
    replay is a usage error here, before pytest would load the conftests of the invocation
    directory and its ``test*`` folders in its place."""
    namespace = early_config.known_args_namespace
    replayed = getattr(namespace, ini_name("--rollout-replay"), None)
    if replayed and not namespace.file_or_dir:
        for path in replayed:
            try:
                check_replay_path(Path(path))
            except ValueError as exc:
                raise pytest.UsageError(str(exc)) from None
        namespace.file_or_dir = list(replayed)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The output hook (``hookspecs.py``), and every output of ``outputs/``, each a module
    that declares its options and implements the hook."""
    pluginmanager.add_hookspecs(hookspecs)
    for found in pkgutil.iter_modules(outputs.__path__):
        module = importlib.import_module(f"{outputs.__name__}.{found.name}")
        if not pluginmanager.is_registered(module):
            pluginmanager.register(module, f"rollout-tax-output-{found.name}")


def pytest_configure(config: pytest.Config) -> None:
    global _options
    config.addinivalue_line("markers", MARKER)
    if _options is not None:
        if not hasattr(config, "workerinput"):
            for line in _options.lines():
                print(line, file=sys.stderr)
        _options = None
    if getattr(config.option, "rollout_reap", False):
        return
    try:
        check_distinct(config)
    except RolloutTaxError as exc:  # a bad --rollout-save name
        raise pytest.UsageError(str(exc)) from None
    registry = Registry.discover()
    settings = Settings.from_config(config, registry)
    session_id = xdist.controller_session_id(config) or new_id()
    substrates = Substrates(settings.specs, registry, session_id, settings.output_cap)
    try:
        substrates.validate()
    except RolloutTaxError as exc:
        raise pytest.UsageError(str(exc)) from None
    gate = gate_of(config)
    session = RolloutTaxSession(config, settings, substrates, gate)
    plugin = RolloutTaxPlugin(session)
    config.pluginmanager.register(plugin, "rollout-tax")
    config.pluginmanager.register(plugin.replay_collection, "rollout-tax-replay")
    config.pluginmanager.register(session.client, "rollout-tax-client")
    _add_replay_paths(config, settings.replay_paths)
    if session.is_worker:
        return
    config.pluginmanager.register(ReportBridges(session.current_report), "rollout-tax-reports")
    config.pluginmanager.register(FinalLine(lambda: session.verdict), "rollout-tax-verdict")
    if config.pluginmanager.hasplugin("xdist"):
        controller = xdist.XdistController(substrates, session.add_pool_records)
        config.pluginmanager.register(controller, "rollout-tax-xdist")


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
    """``--rollout-reap``: remove every substrate's leftovers, then exit."""
    if not getattr(config.option, "rollout_reap", False):
        return None
    try:
        settings = Settings.from_config(config, registry := Registry.discover())
    except pytest.UsageError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return pytest.ExitCode.USAGE_ERROR
    substrates = Substrates(settings.specs, registry, new_id())
    status = pytest.ExitCode.OK
    for name, removed in substrates.reap_leftovers():
        if isinstance(removed, RolloutTaxError):
            print(f"rollout-tax: {name}: cannot reap: {removed}", file=sys.stderr)
            status = pytest.ExitCode.USAGE_ERROR
        else:
            print(f"rollout-tax: {name}: removed {removed} leftover sandbox(es)")
    substrates.close()
    return status


class RolloutTaxPlugin:
    """The hooks and fixtures of one pytest process (controller, worker or serial run)."""

    def __init__(self, session: RolloutTaxSession) -> None:
        self.session = session
        self.config = session.config
        self.settings = session.settings
        # bad markers and unreadable trajectories, raised once collection is done
        self.marker_errors: list[str] = []
        self.replay_collection = ReplayCollection(self.config, self.settings, self.marker_errors)
        #: SIGTERM as an interrupt, while the plugin is active (see :meth:`_active`).
        self.sigterm = SigtermChain()
        self.said = SaidOnce()

    # -- collection, parametrization and fixtures ------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
        """Trajectory files as workloads, where the user asked for them (replay_files.py),
        and never a file another plugin collects."""
        collected = yield
        if collected:
            return collected
        ours: ReplayFile | None = self.replay_collection.collect(file_path, parent)
        return [ours] if ours is not None else collected

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if TARGET_PARAM not in metafunc.fixturenames:
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
        targets: list[object] = [
            Target(name, r, trajectory) for name in names for r in range(1, rounds + 1)
        ]
        if not targets:  # one skip saying why, not pytest's "got empty parameter set"
            reason = (
                f"@pytest.mark.trajectory(substrates={list(trajectory.substrates or ())}) "
                f"matches none of the selected substrates ({', '.join(self.settings.specs)})"
            )
            targets = [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="unselected")]
        metafunc.parametrize(
            TARGET_PARAM,
            targets,
            ids=[t.id if isinstance(t, Target) else None for t in targets],
            indirect=True,
            scope="function",
        )

    def _runs_on(self, trajectory: Trajectory, name: str) -> bool:
        """Whether a test with ``trajectory`` runs on the selected substrate ``name``."""
        wanted = trajectory.substrates
        return wanted is None or any(self.settings.catalog.same(name, w) for w in wanted)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Stop on a bad marker with a usage error (an xdist worker's goes to the controller);
        else order the rollouts as ``--rollout-order`` asks."""
        self.replay_collection.finish()
        if not self.marker_errors:
            if self.settings.order == "interleave":
                items[:] = interleave(items, slot)
            return
        if self.session.is_worker:  # XdistController raises it when this worker goes down
            xdist.hand_over(self.config, xdist.USAGE_ERRORS_KEY, self.marker_errors)
            items.clear()
            return
        raise pytest.UsageError(*self.marker_errors)

    @pytest.fixture
    def _rollout_target(self, request: pytest.FixtureRequest) -> Target:
        target: Target = request.param  # pytest_generate_tests parametrizes it with Targets
        return target

    @pytest.fixture
    def substrate(self, request: pytest.FixtureRequest, _rollout_target: Target) -> Substrate:
        """The Substrate the current rollout runs on."""
        __tracebackhide__ = True
        try:
            return self.session.substrates.get(_rollout_target.substrate)
        except RolloutTaxError as exc:
            error = exc
        if "sandbox" in request.fixturenames and not isinstance(error, CredentialsMissing):
            start_failed(self._begin_rollout(request, _rollout_target), error)
        skip_or_fail(
            error, self.said.message(error, _rollout_target.substrate, request.node.nodeid)
        )

    @pytest.fixture
    def sandbox(self, request: pytest.FixtureRequest, _rollout_target: Target) -> Iterator[Sandbox]:
        """A fresh sandbox for this rollout, on the current substrate; deleted afterwards."""
        __tracebackhide__ = True
        target = _rollout_target
        rollout = self._begin_rollout(request, target)
        sandbox = None
        error: RolloutTaxError | None
        try:
            token = self.session.progress.starting(target.substrate)
            try:
                sandbox = self.session.substrates.start(
                    target.substrate,
                    rollout,
                    timeout=target.trajectory.timeout,
                    prepare=target.trajectory.preparation(request.node.nodeid, target.id),
                )
            finally:
                self.session.progress.finished(token, rollout.cold_start_s)
            sandbox.probe(self.settings.probes)
        except RolloutTaxError as exc:
            error = exc
        else:
            error = None
        if error is not None:  # outside the except block: no chained traceback in the report
            if sandbox is not None:  # started, but its probes failed
                close_quietly(sandbox)
            if isinstance(error, CredentialsMissing):
                del request.node.stash[rollout_key]
                self.session.running.remove(rollout)
            elif isinstance(error, RateLimited):  # the provider's limiter, not the sandbox
                rollout.outcome, rollout.error = RATE_LIMITED, error.provider_message or None
                pytest.skip(str(error).splitlines()[0])
            else:
                start_failed(rollout, error)
            skip_or_fail(error, self.said.message(error, target.substrate, request.node.nodeid))
        assert sandbox is not None  # started: an error skipped or failed the rollout above
        try:
            yield sandbox
        finally:
            teardown_error = close_quietly(sandbox)
        if teardown_error is not None:  # one line, no traceback, counted as the rollout's failure
            rollout.fail(failure_reason(teardown_error))
            pytest.fail(f"{target.substrate}: teardown: {teardown_error}", pytrace=False)

    def _begin_rollout(self, request: pytest.FixtureRequest, target: Target) -> Rollout:
        """A new record for this test's rollout, finished by its teardown report."""
        rollout = Rollout(
            test=identity_of(request.node),
            substrate=target.substrate,
            round=target.round,
            planned_steps=target.trajectory.steps,
        )
        replayed = getattr(request.function, "rollout_replay", None)  # a trajectory file's item
        if replayed is not None:
            rollout.replay = replayed.to_dict()
        request.node.stash[rollout_key] = rollout
        self.session.running.append(rollout)
        return rollout

    @pytest.fixture
    def rollout(self, sandbox: Sandbox) -> Rollout:
        """The current rollout's record: its phases, steps and probes so far."""
        return sandbox.rollout

    # -- outcomes ----------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
        report = (yield).get_result()
        rollout = item.stash.get(rollout_key, None)
        if rollout is None:
            return
        if self.settings.redact:
            redact_report(self.config, report, rollout)
        if report.failed and call.excinfo is not None:
            rollout.fail(failure_reason(call.excinfo.value))
        own = rollout.outcome in (RATE_LIMITED, UNBOUND)  # whatever pytest calls it
        if not own and (report.when == "call" or (report.when == "setup" and not report.passed)):
            rollout.outcome = (
                "error" if report.when == "setup" and report.failed else report.outcome
            )
        elif report.when == "teardown":
            if report.failed and rollout.outcome == "passed":
                rollout.outcome = "error"
            infra.settle(rollout)  # a failure the infrastructure caused is its own outcome
            setattr(report, REPORT_ATTRIBUTE, rollout.to_dict())
            self.session.running.remove(rollout)
            del item.stash[rollout_key]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, REPORT_ATTRIBUTE, None)
        if record is not None and not self.session.is_worker:
            self.session.aggregate.add(record)
            delattr(report, REPORT_ATTRIBUTE)  # the terminal reporter keeps every report

    # -- the session -----------------------------------------------------------------------

    def pytest_sessionstart(self) -> None:
        self.session.progress = ColdStartProgress(self._live_line())

    def _live_line(self) -> TerminalLine | None:
        """Where the cold-start progress line goes: a terminal, unless -q or an xdist worker
        (whose output is not the terminal) or the output is a file or a pipe."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.session.is_worker or self.config.get_verbosity() < 0:
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
        planned = Counter(t.substrate for t in map(target_of, session.items) if t is not None)
        for name, count in planned.items():
            self.session.progress.expect(name, count)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """Before the tests, the bursts: once, in the controller or a serial run (xdist workers
        have collected and wait meanwhile, so nothing else runs on the substrates)."""
        if self._active(session):
            self.sigterm.install()
        collected = not session.config.option.collectonly and not session.testsfailed
        if self.settings.bursts and not self.session.is_worker and collected:
            self.session.run_bursts()
        return (yield)

    @pytest.hookimpl(trylast=True)  # after pytest has torn down the fixtures of an interrupted test
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        session.exitstatus = self.session.finish(session.exitstatus)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self.session.display(terminalreporter)

    def pytest_unconfigure(self) -> None:
        self.sigterm.restore()

    def _active(self, session: pytest.Session) -> bool:
        """Installed is not active: the plugin acts (SIGTERM handling) only when an option of
        it is given or a rollout was collected (an xdist controller collects none)."""
        if asked(self.config, dests(), ini_defaults()):
            return True
        return any(target_of(item) is not None for item in session.items)
