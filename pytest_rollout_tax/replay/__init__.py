"""Recorded agent trajectories (mini-swe-agent, SWE-agent, chat messages, our JSONL) read into
one shape, and replayed in a sandbox as workloads."""

from .load import is_trajectory_name, load
from .model import FileEdit, RecordedStep, RecordedTrajectory, TrajectoryError
from .run import DEFAULT_TIMEOUT_S, MODES, Mode, ReplayInfo, harness_command, replay, shape_command

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MODES",
    "FileEdit",
    "Mode",
    "RecordedStep",
    "RecordedTrajectory",
    "ReplayInfo",
    "TrajectoryError",
    "harness_command",
    "is_trajectory_name",
    "load",
    "replay",
    "shape_command",
]
