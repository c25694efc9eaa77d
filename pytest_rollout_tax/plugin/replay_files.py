"""Trajectory files as pytest collectors: one test function per recorded trajectory, which the
plugin parametrizes over substrates and rounds like any workload."""

from __future__ import annotations

import fnmatch
import re
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from ..core.sandbox import Sandbox
from ..replay import (
    DEFAULT_TIMEOUT_S,
    Mode,
    NotATrajectory,
    RecordedTrajectory,
    ReplayFailure,
    ReplayInfo,
    TrajectoryError,
    load,
    replay,
)
from ..replay.load import REPLAY_SUFFIXES
from ..replay.model import think_known
from ..replay.notes import file_note
from ..replay.swe_agent import TOOL_BUNDLES
from . import xdist

if TYPE_CHECKING:
    from .settings import Settings

#: The module name replay functions carry (pytest collects only a module's own functions).
MODULE = "pytest_rollout_tax.replayed"
#: Formats whose files hold rows: their items are named by trajectory id.
ROW_FORMATS = (
    "openai-messages",
    "swe-smith",
    "swe-agent-rows",
    "mini-swe-agent-text-rows",
    "openhands-text-rows",
    "openhands",
    "openhands-v1",
)
#: How many skipped files the summary names without -v.
SKIPPED_NAMED = 10
NOTHING_TO_REPLAY = "no action recorded (the run ended before its first): nothing to replay"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+#-]+")


#: Where a file to collect comes from: named (``--rollout-replay FILE`` or the command
#: line: unreadable is a usage error) or found (in a ``--rollout-replay`` folder or by
#: ``--rollout-replay-glob``: a file that is no trajectory is skipped and counted).
Origin = Literal["named", "found"]


class ReplayCollection:
    """Which files are trajectories: only those the user asks for (``--rollout-replay`` files
    and folders, ``--rollout-replay-glob``, trajectory files named on the command line), so a
    suite that merely contains trajectory-like test data runs as if the plugin were not there.
    A pytest plugin of its own for what collecting them found (Notes, in the summary)."""

    def __init__(self, config: pytest.Config, settings: Settings, errors: list[str]) -> None:
        self.config = config
        self.mode = settings.replay_mode
        #: ``--rollout-replay-strict``: a found file that cannot be read stops the run.
        self.strict = settings.replay_strict
        self.globs = settings.replay_globs
        #: Bytes of output a step keeps: a recorded output over it cannot be replayed.
        self.output_cap = settings.output_cap
        resolved = [path.resolve() for path in settings.replay_paths]
        self.files = {path for path in resolved if path.is_file()}
        self.directories = [path for path in resolved if path.is_dir()]
        #: Unreadable named files, raised as one usage error once collection is done.
        self.errors = errors
        self.notes = Notes()
        self._named: set[Path] | None = None

    def collect(self, path: Path, parent: pytest.Collector) -> ReplayFile | None:
        """The collector of ``path`` if it is a trajectory file the user asked for."""
        origin = self._origin(path)
        if origin is None:
            return None
        try:
            trajectories = load(path, max_bytes=self.output_cap)
        except NotATrajectory as exc:
            if origin == "found":
                self.notes.skipped.append(self._relative(path))
                return None
            self.errors.append(str(exc))
            trajectories = []  # collected, empty: pytest says ours, not "not found"
        except TrajectoryError as exc:
            if origin == "found" and not self.strict:  # one bad file does not stop the rest
                self.notes.unreadable.append(str(exc))
                return None
            self.errors.append(str(exc))
            trajectories = []
        self.notes.add(trajectories)
        self.notes.read += 1
        note = file_note(trajectories)
        if note is not None:
            self.notes.files.append(f"{self._relative(path)}: {note}")
        return ReplayFile.from_parent(parent, path=path, mode=self.mode, trajectories=trajectories)

    def finish(self) -> None:
        """Once collection is done: when the files found could none of them be read, the
        run stops with a usage error naming each one's problem."""
        if self.notes.unreadable and not self.notes.read:
            self.errors.extend(self.notes.unreadable)

    def _origin(self, path: Path) -> Origin | None:
        if not (self.files or self.directories or self.globs or _replayable(path)):
            return None  # a suite's own file, with nothing asked for: as without the plugin
        resolved = path.resolve()
        if resolved in self.files or (_replayable(path) and resolved in self._named_files()):
            return "named"
        if any(resolved.is_relative_to(directory) for directory in self.directories):
            if _replayable(path):
                return "found"
            if path.suffix != ".py":  # a log, a config: not a trajectory either
                self.notes.skipped.append(self._relative(path))
            return None
        relative = self._relative(path)
        return "found" if any(fnmatch.fnmatch(relative, glob) for glob in self.globs) else None

    def _named_files(self) -> set[Path]:
        """The files named on the command line (not directories: a suite's test data in
        them is not collected)."""
        if self._named is None:
            base = self.config.invocation_params.dir
            args = self.config.args
            if self.config.args_source != pytest.Config.ArgsSource.ARGS:
                args = []
            paths = ((base / arg.split("::")[0]).resolve() for arg in args)
            self._named = {path for path in paths if path.is_file()}
        return self._named

    def _relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.config.rootpath.resolve()).as_posix()
        except ValueError:
            return str(path)

    # -- hooks: the notes in the summary, and from xdist workers to the controller ----------

    def pytest_sessionfinish(self) -> None:
        if hasattr(self.config, "workerinput"):
            xdist.hand_over(self.config, xdist.REPLAY_NOTES_KEY, self.notes.to_dict())

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: xdist.WorkerNode, error: object) -> None:
        notes = xdist.handed_over(node).get(xdist.REPLAY_NOTES_KEY)
        if notes and not self.notes:  # every worker collects the same files
            self.notes = Notes.from_dict(notes)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        verbose = self.config.get_verbosity() > 0
        for line in self.notes.lines(self.mode, verbose):
            terminalreporter.write_line(line)


@dataclass
class Notes:
    """What collection found: files skipped, trajectories without an action or a think time,
    steps that call a harness's tools."""

    skipped: list[str] = field(default_factory=list)
    #: Trajectories that recorded no action: not replayed, so no cold start counts for them.
    zero_action: int = 0
    #: Trajectories without any think time, by format.
    think_unknown: Counter[str] = field(default_factory=Counter)
    #: Steps whose recorded output size is unknown, by format.
    size_unknown: Counter[str] = field(default_factory=Counter)
    #: Steps that call a SWE-agent tool, by tool.
    harness_tools: Counter[str] = field(default_factory=Counter)
    #: Files found that could not be read (each error's one line), and how many were read.
    unreadable: list[str] = field(default_factory=list)
    read: int = 0
    #: What reading a file left unknown or numbered, one line per file (replay/notes.py).
    files: list[str] = field(default_factory=list)

    def add(self, trajectories: list[RecordedTrajectory]) -> None:
        for trajectory in trajectories:
            if not trajectory.steps:
                self.zero_action += 1
                continue
            if think_known(trajectory) == "unknown":
                self.think_unknown[trajectory.format] += 1
            unknown = sum(step.output_bytes is None for step in trajectory.steps)
            if unknown:
                self.size_unknown[trajectory.format] += unknown
            self.harness_tools.update(s.tool for s in trajectory.steps if s.tool is not None)

    def __bool__(self) -> bool:
        return bool(
            self.skipped
            or self.zero_action
            or self.think_unknown
            or self.size_unknown
            or self.harness_tools
            or self.unreadable
            or self.files
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain types (xdist ships them from a worker)."""
        return {key: dict(value) if isinstance(value, Counter) else value
                for key, value in asdict(self).items()}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Notes:
        return cls(
            skipped=list(data["skipped"]),
            zero_action=data["zero_action"],
            think_unknown=Counter(data["think_unknown"]),
            size_unknown=Counter(data.get("size_unknown", {})),
            harness_tools=Counter(data["harness_tools"]),
            unreadable=list(data.get("unreadable", [])),
            read=data.get("read", 0),
            files=list(data.get("files", [])),
        )

    def lines(self, mode: Mode, verbose: bool = False) -> list[str]:
        """The summary's lines, one per note (``verbose``: every skipped file named)."""
        lines = []
        if self.skipped:
            shown = self.skipped if verbose else self.skipped[:SKIPPED_NAMED]
            more = len(self.skipped) - len(shown)
            names = ", ".join(shown) + (f", and {more} more (-v lists them)" if more else "")
            lines.append(
                f"rollout-tax: skipped {len(self.skipped)} file(s) in --rollout-replay folders "
                f"that are not trajectories: {names}"
            )
        lines.extend(f"rollout-tax: not replayed: {problem}" for problem in self.unreadable)
        lines.extend(f"rollout-tax: note: {line}" for line in self.files)
        if self.zero_action:
            lines.append(
                f"rollout-tax: note: {self.zero_action} trajectory(ies) recorded no action (the "
                "run ended before its first): not replayed, no cold start counted"
            )
        if self.think_unknown:
            lines.append(
                f"rollout-tax: note: {sum(self.think_unknown.values())} trajectory(ies) record "
                f"no think time ({_counts(self.think_unknown)}): unknown, not 0; the recorded "
                "think time comes from the others (or give --rollout-think-time)"
            )
        if self.size_unknown:
            lines.append(
                f"rollout-tax: note: {sum(self.size_unknown.values())} step(s) record no output "
                f"size ({_counts(self.size_unknown)}): unknown, replayed as 0 bytes in shape "
                "mode and never an output_size divergence"
            )
        if self.harness_tools and mode == "exact":
            bundles = sorted({f"tools/{TOOL_BUNDLES[tool]}" for tool in self.harness_tools})
            lines.append(
                f"rollout-tax: note: {sum(self.harness_tools.values())} step(s) call SWE-agent "
                f"tools ({_counts(self.harness_tools)}): they run only in an image with "
                f"SWE-agent's tool bundles {', '.join(bundles)}; elsewhere they fail (127: not "
                "found) and count as harness_tool divergences"
            )
        return lines


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counter.items()))


def _replayable(path: Path) -> bool:
    return path.name.endswith(REPLAY_SUFFIXES)


class ReplayFile(pytest.Module):
    """A trajectory file: its trajectories, each a test function named ``replay`` (or by its
    id when the file holds several, or rows of chat messages)."""

    def __init__(
        self, *, mode: Mode, trajectories: list[RecordedTrajectory], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.trajectories = trajectories
        self._module: types.ModuleType | None = None

    def _getobj(self) -> types.ModuleType:
        if self._module is None:
            module = types.ModuleType(MODULE)
            trajectories = self.trajectories
            named = len(trajectories) > 1 or any(
                trajectory.format in ROW_FORMATS for trajectory in trajectories
            )
            for trajectory in trajectories:
                name = _unique(module, _name(trajectory.trajectory_id) if named else "replay")
                setattr(module, name, replay_function(trajectory, self.mode, name))
            self._module = module
        return self._module


def replay_function(trajectory: RecordedTrajectory, mode: Mode, name: str) -> Callable[..., None]:
    """The test function that replays ``trajectory`` in the ``sandbox`` of each rollout."""

    def replays(sandbox: Sandbox) -> None:
        try:
            replay(sandbox, trajectory, mode)
        except ReplayFailure as exc:
            failure = exc
        else:
            return
        sandbox.rollout.fail(failure.reason)  # countable: the substrate's reason
        pytest.fail(str(failure), pytrace=False)  # outside the except: no chained traceback

    def nothing() -> None:
        """A trajectory without an action: skipped, without a sandbox."""

    # no sandbox for a trajectory without an action: no cold start counts for it
    function: Callable[..., None] = replays if trajectory.steps else nothing
    function.__name__ = function.__qualname__ = name
    function.__module__ = MODULE
    function.__doc__ = f"Replay {trajectory.trajectory_id} ({trajectory.format}, {mode})."
    function.__dict__.update(
        __test__=True,  # collected whatever python_functions says
        #: What the rollout's ``replay`` entry starts as, before its sandbox starts.
        rollout_replay=ReplayInfo.of(trajectory, mode),
    )
    marker = (
        pytest.mark.trajectory(
            steps=len(trajectory.steps), timeout=trajectory.timeout or DEFAULT_TIMEOUT_S
        )
        if trajectory.steps
        else pytest.mark.skip(reason=NOTHING_TO_REPLAY)
    )
    marked: Callable[..., None] = marker(function)
    return marked


def _name(trajectory_id: str) -> str:
    return _UNSAFE.sub("_", trajectory_id).strip("_") or "replay"


def _unique(module: types.ModuleType, name: str) -> str:
    candidate, number = name, 1
    while hasattr(module, candidate):
        number += 1
        candidate = f"{name}-{number}"
    return candidate
