"""What a recorded trajectory is, whatever harness wrote it: its actions, in order."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

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
    "openhands-v1",
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
    "openhands-v1": ("timestamp", "timestamp"),
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
    #: The intervals (``think_s``, ``recorded_s``) left unknown because the recording's clock
    #: stepped back across them, and by how many seconds in all (see :class:`Clock`).
    clock_back: tuple[str, ...] = ()
    clock_back_s: float = 0.0


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
    #: The id the file gives several rows (attempts of one task), and this row's number among
    #: them, from 1 in file order; ``trajectory_id`` is then ``ID#N``. None: its id is its own.
    attempt_of: str | None = None
    attempt: int | None = None


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


@dataclass(frozen=True)
class Interval:
    """Seconds between two timestamps of a recording: ``seconds`` is None when either is
    unknown, or when the later one is stamped before the earlier (the host's wall clock was
    stepped back, as NTP does): no time is taken to have passed, and ``back_s`` says by how
    much the clock went back."""

    seconds: float | None = None
    back_s: float = 0.0


def interval(start: float | None, end: float | None) -> Interval:
    """The interval from ``start`` to ``end``."""
    if start is None or end is None:
        return Interval()
    if end < start:
        return Interval(None, start - end)
    return Interval(end - start)


def timed(think: Interval, command: Interval) -> dict[str, Any]:
    """A step's time fields: ``think_s``, ``recorded_s`` and which of them the clock stepping
    back left unknown."""
    back = tuple(name for name, span in (("think_s", think), ("recorded_s", command))
                 if span.back_s > 0)  # fmt: skip
    return {
        "think_s": think.seconds,
        "recorded_s": command.seconds,
        "clock_back": back,
        "clock_back_s": think.back_s + command.back_s,
    }


class Clock:
    """A recording's timestamps in order. One before the one before it (a wall clock stepped
    back) ends an unknown interval, and the clock reads on from it: its wall time counts the
    time that passed between the timestamps, a step back as none."""

    def __init__(self) -> None:
        self.last: float | None = None
        self.wall_s: float | None = None

    def advance(self, stamp: float | None) -> Interval:
        """Take ``stamp``; the interval since the timestamp before it."""
        if stamp is None:
            return Interval()
        since = interval(self.last, stamp)
        self.last = stamp
        self.wall_s = (self.wall_s or 0.0) + (since.seconds or 0.0)
        return since


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
