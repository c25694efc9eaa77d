"""Read a trajectory file, whatever its format: detected from its content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..report.terminal import NotRegularFileError, report_target
from . import mini_swe_agent, openai_messages, rollout_tax, swe_agent
from .model import RecordedTrajectory, TrajectoryError, fail

#: The largest recorded time (seconds) and output size (bytes) a step may have: beyond them a
#: recording is corrupt, not long.
MAX_SECONDS = 1e9
MAX_BYTES = 2**40
#: File names collected as trajectories wherever pytest looks.
SUFFIXES = (".traj", ".traj.json")


def is_trajectory_name(name: str) -> bool:
    """Whether a file called ``name`` is collected as a trajectory wherever it lies."""
    return name.endswith(SUFFIXES)


def stem(path: Path) -> str:
    """The name of ``path`` without its trajectory suffix: ``fix.traj.json`` -> ``fix``."""
    for suffix in (*SUFFIXES, ".jsonl", ".json"):
        if path.name.endswith(suffix) and path.name != suffix:
            return path.name[: -len(suffix)]
    return path.name


def load(path: str | Path, *, max_bytes: int = MAX_BYTES) -> list[RecordedTrajectory]:
    """Every trajectory in ``path``: one for a JSON document, one per row for chat-message
    JSONL, one for a JSONL of our steps. A TrajectoryError names the file and the line; so
    does a step whose recorded output is over ``max_bytes`` (the output cap of a step)."""
    try:
        trajectories = _load(Path(path))
    except RecursionError:  # a reader walking what the JSON parser accepted
        raise fail(f"{path}:1", "nested too deeply") from None
    for trajectory in trajectories:
        _check_bounds(trajectory, min(max_bytes, MAX_BYTES))
    return trajectories


def _check_bounds(trajectory: RecordedTrajectory, max_bytes: int) -> None:
    """Reject recorded figures no real run has (a corrupt timestamp, a wrong size), and
    output sizes a step would cut."""
    for index, step in enumerate(trajectory.steps):
        where = f"{trajectory.source}: {trajectory.trajectory_id}: step {index + 1}"
        for name in ("think_s", "recorded_s"):
            value = getattr(step, name)
            if value is not None and value > MAX_SECONDS:
                raise fail(where, f"{name}={value!r}: more than {MAX_SECONDS:.0e} seconds")
        if step.command is not None and "\0" in step.command:
            raise fail(where, "the command contains a NUL byte")
        if step.output_bytes is not None and step.output_bytes > max_bytes:
            cap = "more than" if max_bytes == MAX_BYTES else "over the output cap of"
            raise fail(where, f"output_bytes={step.output_bytes}: {cap} {max_bytes} bytes")


def _load(path: Path) -> list[RecordedTrajectory]:
    try:
        report_target(path)
    except NotRegularFileError as exc:  # a FIFO or a device: refused before it is read
        raise TrajectoryError(f"{path}: {exc.strerror}; expected a trajectory file") from None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TrajectoryError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise fail(f"{path}:{line}", "not UTF-8 text") from None
    lines = text.splitlines()
    first = next((n for n, line in enumerate(lines, 1) if line.strip()), None)
    if first is None:
        raise fail(f"{path}:1", "empty file; expected a trajectory")
    if not _is_json_line(lines[first - 1]):
        return [_document(path, text)]
    rows = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            rows.append((number, _json(line, path, number)))
    if rollout_tax.matches(rows[0][1]):
        steps = [rollout_tax.step(row, f"{path}:{number}") for number, row in rows]
        return [RecordedTrajectory(str(path), "rollout-tax", stem(path), tuple(steps))]
    if len(rows) == 1 and not openai_messages.matches(rows[0][1]):
        return [_document(path, text)]
    return _rows(path, rows)


def _document(path: Path, text: str) -> RecordedTrajectory:
    """A trajectory that is one JSON document."""
    data = _json(text, path)
    for module in (mini_swe_agent, swe_agent):
        if module.matches(data):
            return module.parse(data, str(path), stem(path))
    if openai_messages.matches(data):
        trajectory_id = _trajectory_id(data, stem(path))
        return openai_messages.parse(data, f"{path}:1", trajectory_id, str(path))
    raise fail(
        f"{path}:1",
        "not a trajectory this tool reads (mini-swe-agent, SWE-agent .traj, chat messages "
        "with tool_calls, or JSONL steps with cmd)",
    )


def _rows(path: Path, rows: list[tuple[int, Any]]) -> list[RecordedTrajectory]:
    """Chat-message rows, one trajectory each, named by their ``trajectory_id``."""
    trajectories, seen = [], {}
    for number, row in rows:
        where = f"{path}:{number}"
        if not openai_messages.matches(row):
            raise fail(where, "expected a row with 'trajectory_id' and 'trajectory' or 'messages'")
        trajectory_id = _trajectory_id(row, f"{stem(path)}-{number}")
        if trajectory_id in seen:
            raise fail(where, f"trajectory_id {trajectory_id!r} repeats line {seen[trajectory_id]}")
        seen[trajectory_id] = number
        trajectories.append(openai_messages.parse(row, where, trajectory_id, str(path)))
    return trajectories


def _trajectory_id(row: dict, default: str) -> str:
    value = row.get("trajectory_id", row.get("instance_id"))
    return str(value) if isinstance(value, str | int) and str(value) else default


def _is_json_line(line: str) -> bool:
    """Whether ``line`` alone is a JSON object (the file is JSONL, not one indented document)."""
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False
    except RecursionError:  # JSON, nested too deeply: parsed as a line, it is reported so
        return True


def _json(text: str, path: Path, line: int | None = None) -> Any:
    """``text`` parsed: the whole file (``line`` None) or its line ``line``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"{path}:{exc.lineno if line is None else line}"
        raise fail(where, f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise fail(f"{path}:{line or 1}", "not valid JSON: nested too deeply") from None
