"""What a recorded trajectory is, whatever harness wrote it: its actions, in order."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..errors import TrajectoryError

#: The harness formats a trajectory file may be in.
Format = Literal["mini-swe-agent", "swe-agent", "openai-messages", "rollout-tax"]
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


@dataclass(frozen=True)
class RecordedTrajectory:
    """One trajectory: one replay item per substrate and round."""

    source: str
    format: Format
    trajectory_id: str
    steps: tuple[RecordedStep, ...]
    #: The recording's own step timeout, in seconds (None: it had none that we know).
    timeout: float | None = None


def fail(where: str, problem: str) -> TrajectoryError:
    """The one-line error for ``where`` (``path:line`` or ``path: field``)."""
    return TrajectoryError(f"{where}: {problem}")


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
