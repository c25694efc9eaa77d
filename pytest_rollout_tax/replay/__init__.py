"""Recorded agent trajectories (mini-swe-agent, SWE-agent, chat messages, SWE-smith rows, our
JSONL) read into one shape, and replayed in a sandbox as workloads."""

from ..errors import NotATrajectory, ReplayFailure, TrajectoryError
from .load import load
from .model import FileEdit, RecordedStep, RecordedTrajectory
from .run import DEFAULT_TIMEOUT_S, MODES, Mode, ReplayInfo, harness_command, replay, shape_command

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MODES",
    "FileEdit",
    "Mode",
    "NotATrajectory",
    "RecordedStep",
    "RecordedTrajectory",
    "ReplayFailure",
    "ReplayInfo",
    "TrajectoryError",
    "harness_command",
    "load",
    "replay",
    "shape_command",
]
