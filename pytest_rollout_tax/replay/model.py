"""What a recorded trajectory is, whatever harness wrote it: its actions, in order."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..errors import NotATrajectory, TrajectoryError

#: The harness formats a trajectory file may be in.
Format = Literal[
    "mini-swe-agent",
    "mini-swe-agent-text-rows",
    "swe-agent",
    "swe-agent-rows",
    "openai-messages",
    "swe-smith",
    "openhands",
    "openhands-text-rows",
    "rollout-tax",
]
#: Where each format's times come from: (think time, command time), the field a reader takes
#: them from or ``unknown``. docs/replay.md's format table states the same (a test checks).
TIMES: dict[str, tuple[str, str]] = {
    "mini-swe-agent": ("extra.timestamp", "extra.timestamp"),
    "mini-swe-agent-text-rows": ("unknown", "unknown"),
    "swe-agent": ("unknown", "execution_time"),
    "swe-agent-rows": ("unknown", "unknown"),
    "openai-messages": ("unknown", "unknown"),
    "swe-smith": ("unknown", "unknown"),
    "openhands": ("timestamp", "timestamp"),
    "openhands-text-rows": ("unknown", "unknown"),
    "rollout-tax": ("think_s", "recorded_s"),
}
#: The editor commands emulated with the sandbox's file API.
EDIT_COMMANDS = ("create", "view", "str_replace", "insert")


@dataclass(frozen=True)
class FileEdit:
    """A ``str_replace_editor`` action: what it does to which file."""

    command: str
    path: str
    file_text: str | None = None
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = None


@dataclass(frozen=True)
class RecordedStep:
    """One recorded action: a shell command or a file edit, and what the recording saw."""

    command: str | None = None
    edit: FileEdit | None = None
    #: Model time before this action (the first of a message carries it, later ones 0).
    think_s: float | None = None
    #: How long the recorded command ran.
    recorded_s: float | None = None
    exit_code: int | None = None
    #: Bytes of output the recorded action returned.
    output_bytes: int | None = None
    #: The harness tool the command calls (SWE-agent's ``find_file``, ``open``, ``edit``...),
    #: which a plain image does not have; None for a plain shell command.
    tool: str | None = None
    #: The tool call's id in the recording, where it has one.
    call_id: str | None = None


@dataclass(frozen=True)
class RecordedTrajectory:
    """One trajectory: one replay item per substrate and round."""

    source: str
    format: Format
    trajectory_id: str
    steps: tuple[RecordedStep, ...]
    #: The recording's own step timeout, in seconds (None: it had none that we know), and the
    #: field it came from (``info.config.environment.timeout``).
    timeout: float | None = None
    timeout_field: str | None = None
    #: Seconds from the recording's first timestamp to its last (None: it has no timestamps).
    wall_s: float | None = None


def fail(where: str, problem: str) -> TrajectoryError:
    """The one-line error for ``where`` (``path:line`` or ``path: field``)."""
    return TrajectoryError(f"{where}: {problem}")


def not_a_trajectory(where: str, problem: str) -> NotATrajectory:
    """The one-line error for a file that holds no trajectory."""
    return NotATrajectory(f"{where}: {problem}")


def think_known(trajectory: RecordedTrajectory) -> str:
    """``recorded`` (every step has a think time), ``partial`` or ``unknown`` (none has)."""
    known = [step.think_s is not None for step in trajectory.steps]
    if known and all(known):
        return "recorded"
    return "partial" if any(known) else "unknown"


#: How far a timestamp may fall behind the one before it: a wall clock stepped back (NTP) by
#: less is taken as no time passing; by more, the recording is corrupt.
CLOCK_SLACK_S = 1.0


class Clock:
    """A recording's timestamps in order: each must be at or after the one before (a run's
    clock does not go backwards, but for CLOCK_SLACK_S), else the step is refused in one
    line."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.first: float | None = None
        self.last: float | None = None

    def advance(self, stamp: float | None, step: int, field: str) -> float | None:
        """Take ``stamp`` (``field`` of the message before step ``step``); the seconds since the
        previous timestamp, or None when either is unknown."""
        if stamp is None:
            return None
        since = None if self.last is None else stamp - self.last
        if since is not None and since < -CLOCK_SLACK_S:
            raise fail(
                f"{self.where}: step {step}",
                f"{field}={stamp!r} is {-since:g} s before the timestamp before it "
                f"({self.last!r}): timestamps go backwards",
            )
        if self.first is None:
            self.first = stamp
        if since is not None and since < 0:  # the wall clock was stepped back a little
            return 0.0
        self.last = stamp
        return since

    @property
    def wall_s(self) -> float | None:
        return None if self.first is None else self.last - self.first


def byte_length(text: object) -> int:
    """Bytes of a recorded output (text as UTF-8)."""
    if text is None:
        return 0
    if isinstance(text, str):
        return len(text.encode("utf-8", "surrogatepass"))
    if isinstance(text, list):  # content parts: [{"type": "text", "text": ...}]
        parts = (part.get("text") if isinstance(part, dict) else part for part in text)
        return sum(byte_length(part) for part in parts)
    return len(str(text).encode())


def number(value: object) -> float | None:
    """A recorded number, or None when absent, not a number or not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def exit_code(value: object) -> int | None:
    """A recorded exit code, or None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value
