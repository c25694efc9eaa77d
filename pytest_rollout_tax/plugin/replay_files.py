"""Trajectory files as pytest collectors: one test function per recorded trajectory, which the
plugin parametrizes over substrates and rounds like any workload."""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from ..core.sandbox import Sandbox
from ..replay import (
    DEFAULT_TIMEOUT_S,
    Mode,
    RecordedTrajectory,
    ReplayInfo,
    TrajectoryError,
    load,
    replay,
)
from ..replay.load import is_trajectory_name

#: The module name replay functions carry (pytest collects only a module's own functions).
MODULE = "pytest_rollout_tax.replayed"
#: Suffixes of the files taken from a directory given to ``--rollout-replay``.
REPLAY_SUFFIXES = (".traj", ".json", ".jsonl")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


class Sources:
    """Which files are trajectories: ``*.traj`` and ``*.traj.json`` anywhere, and the files
    and directories the user names."""

    def __init__(self, paths: Iterable[Path]) -> None:
        resolved = [Path(path).resolve() for path in paths]
        self.files = {path for path in resolved if path.is_file()}
        self.directories = [path for path in resolved if path.is_dir()]

    def collects(self, path: Path) -> bool:
        if is_trajectory_name(path.name):
            return True
        if not (self.files or self.directories):
            return False
        resolved = path.resolve()
        if resolved in self.files:
            return True
        return path.name.endswith(REPLAY_SUFFIXES) and any(
            resolved.is_relative_to(directory) for directory in self.directories
        )


class ReplayFile(pytest.Module):
    """A trajectory file: its trajectories, each a test function named ``replay`` (or by its
    ``trajectory_id`` when the file holds rows). An unreadable file adds one line to
    ``errors``, which the plugin raises as a usage error once collection is done."""

    def __init__(self, *, mode: Mode, errors: list[str], output_cap: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.output_cap = output_cap
        self.errors = errors
        self._module: types.ModuleType | None = None

    def _getobj(self) -> types.ModuleType:
        if self._module is None:
            module = types.ModuleType(MODULE)
            try:
                trajectories = load(self.path, max_bytes=self.output_cap)
            except TrajectoryError as exc:
                self.errors.append(str(exc))
                trajectories = []
            named = len(trajectories) > 1 or any(
                trajectory.format == "openai-messages" for trajectory in trajectories
            )
            for trajectory in trajectories:
                name = _unique(module, _name(trajectory.trajectory_id) if named else "replay")
                setattr(module, name, replay_function(trajectory, self.mode, name))
            self._module = module
        return self._module


def replay_function(trajectory: RecordedTrajectory, mode: Mode, name: str) -> Callable:
    """The test function that replays ``trajectory`` in the ``sandbox`` of each rollout."""

    def function(sandbox: Sandbox) -> None:
        replay(sandbox, trajectory, mode)

    function.__name__ = function.__qualname__ = name
    function.__module__ = MODULE
    function.__doc__ = f"Replay {trajectory.trajectory_id} ({trajectory.format}, {mode})."
    function.__test__ = True  # collected whatever python_functions says
    #: What the rollout's ``replay`` entry starts as, before its sandbox starts.
    function.rollout_replay = ReplayInfo.of(trajectory, mode)
    marker = pytest.mark.trajectory(
        steps=len(trajectory.steps) or None,
        timeout=trajectory.timeout or DEFAULT_TIMEOUT_S,
    )
    return marker(function)


def _name(trajectory_id: str) -> str:
    return _UNSAFE.sub("_", trajectory_id).strip("_") or "replay"


def _unique(module: types.ModuleType, name: str) -> str:
    candidate, number = name, 1
    while hasattr(module, candidate):
        number += 1
        candidate = f"{name}-{number}"
    return candidate
