"""Read a trajectory file, whatever its format and layout: both detected from its content.

A file is one JSON value (indented or on one line) or JSONL (one value per line). Either way
it is a list of rows: a document is one row, a JSON array one row per element, JSONL one per
line. The rows are our steps (one trajectory) or trajectories, each in any format."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ..core import limits
from ..core.paths import regular_file
from ..errors import NotRegularFileError, TrajectoryError
from . import (
    mini_swe_agent,
    openai_messages,
    openhands,
    openhands_v1,
    rollout_tax,
    swe_agent,
    swe_agent_rows,
)
from .model import RecordedTrajectory, fail, not_a_trajectory

#: Suffixes of the files taken from a directory given to ``--rollout-replay``.
REPLAY_SUFFIXES = (".traj", ".json", ".jsonl")
#: The largest recorded time (seconds) and output size (bytes) a step may have: beyond them a
#: recording is corrupt, not long.
MAX_SECONDS = 1e9
MAX_BYTES = 2**40
#: Step times may pass the wall time by this much (timestamps of whole seconds round).
WALL_SLACK_S = 1.0
#: The suffixes of a trajectory file's name, taken off for its id.
SUFFIXES = (".traj", ".traj.json")


#: The formats a row may be in, in the order they are tried (SWE-agent 0.x rows before chat
#: rows: both have role-tagged turns).
class DocumentFormat(Protocol):
    """A format module whose rows (or documents) each hold one trajectory."""

    def matches(self, row: Any, /) -> bool: ...
    def parse(
        self, row: dict[str, Any], where: str, trajectory_id: str, source: str, /
    ) -> RecordedTrajectory: ...


class EventFormat(Protocol):
    """A format module whose rows may be the events of one conversation (OpenHands)."""

    def is_event(self, value: Any, /) -> bool: ...
    def parse_events(
        self, events: list[dict[str, Any]], where: str, trajectory_id: str, source: str, /
    ) -> RecordedTrajectory: ...


DOCUMENTS: tuple[DocumentFormat, ...] = (
    mini_swe_agent,
    swe_agent,
    swe_agent_rows,
    openhands,
    openhands_v1,
    openai_messages,
)
#: The fields that name a trajectory, in the order they are tried (``run_id`` goes with
#: ``instance_id``: several runs of one instance are distinct trajectories).
IDENTITY = ("trajectory_id", "traj_id", "run_id+instance_id", "instance_id")
#: The field that names a task, not a run: rows that repeat it are attempts of the task.
TASK = "instance_id"
EXPECTED = (
    "expected a mini-swe-agent trajectory, a SWE-agent .traj or rows, chat rows with "
    "'messages' or 'trajectory', OpenHands output (rows with a 'history' of events with "
    "'action'/'observation', or of OpenHands V1 events with 'kind'; or an event list), or "
    "JSONL steps with 'cmd'"
)


#: Why a file of one OpenHands V1 event is no trajectory.
ONE_EVENT = (
    "one OpenHands V1 event, not a trajectory: a conversation's events/ folder saves one event "
    "per file; join them in order into one JSONL file (one event per line) to replay it"
)


def stem(path: Path) -> str:
    """The name of ``path`` without its trajectory suffix: ``fix.traj.json`` -> ``fix``."""
    for suffix in (*SUFFIXES, ".jsonl", ".json"):
        if path.name.endswith(suffix) and path.name != suffix:
            return path.name[: -len(suffix)]
    return path.name


@dataclass(frozen=True)
class Row:
    """One JSON value of a file, and where it is: ``path:line`` (JSONL) or ``path: [i]``."""

    where: str
    value: Any
    #: Its position among the file's rows, from 1, whatever the layout.
    ordinal: int
    #: Its place in the file: ``line N`` or ``[i]``.
    place: str


def load(path: str | Path, *, max_bytes: int = MAX_BYTES) -> list[RecordedTrajectory]:
    """Every trajectory in ``path``. A TrajectoryError names the file and the line (or the
    row and field), as it does for a step whose recorded output is over ``max_bytes`` (the
    output cap of a step); a NotATrajectory says the file holds no trajectory at all."""
    path = Path(path)
    try:
        trajectories = _trajectories(path, rows(path))
    except RecursionError:  # a reader walking what the JSON parser accepted
        raise fail(f"{path}:1", "nested too deeply") from None
    for trajectory in trajectories:
        check(trajectory, min(max_bytes, MAX_BYTES))
    return trajectories


def check(trajectory: RecordedTrajectory, max_bytes: int = MAX_BYTES) -> None:
    """Reject recorded figures no real run has: a corrupt time or size, step times that add
    up to more than the trajectory's wall time, a NUL in a command; and output sizes a step
    would cut. (A negative interval is no such figure: the readers leave it unknown.)"""
    total = 0.0
    for index, step in enumerate(trajectory.steps):
        where = f"{trajectory.source}: {trajectory.trajectory_id}: step {index + 1}"
        for name in ("think_s", "recorded_s"):
            value = getattr(step, name)
            if value is None:
                continue
            if value > MAX_SECONDS:
                raise fail(where, f"{name}={value!r}: more than {MAX_SECONDS:.0e} seconds")
            total += value
        if trajectory.wall_s is not None and total > trajectory.wall_s + WALL_SLACK_S:
            raise fail(
                where,
                f"its steps' times add up to {total:g} s, more than the trajectory's "
                f"{trajectory.wall_s:g} s from first to last timestamp",
            )
        if step.command is not None and "\0" in step.command:
            raise fail(where, "the command contains a NUL byte")
        if step.output_bytes is not None and step.output_bytes > max_bytes:
            cap = "more than" if max_bytes == MAX_BYTES else "over the output cap of"
            raise fail(where, f"output_bytes={step.output_bytes}: {cap} {max_bytes} bytes")


def rows(path: Path) -> list[Row]:
    """The JSON values of ``path``: one document (a JSON array: its elements), or JSONL."""
    try:
        regular_file(path)
    except NotRegularFileError as exc:  # a FIFO or a device: refused before it is read
        raise TrajectoryError(f"{path}: {exc.strerror}; expected a trajectory file") from None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TrajectoryError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise not_a_trajectory(f"{path}:{line}", "not UTF-8 text") from None
    if not text.strip():
        raise not_a_trajectory(f"{path}:1", "empty file; expected a trajectory")
    try:
        document = limits.loads(text)
    except json.JSONDecodeError as exc:
        return _jsonl(path, text, exc)
    except RecursionError:
        raise not_a_trajectory(f"{path}:1", "not valid JSON: nested too deeply") from None
    if isinstance(document, list):
        return [Row(f"{path}: [{i}]", value, i + 1, f"[{i}]") for i, value in enumerate(document)]
    return [Row(f"{path}:1", document, 1, "line 1")]


def _jsonl(path: Path, text: str, error: json.JSONDecodeError) -> list[Row]:
    """``text`` as JSONL; if its first line is not JSON either, it is a document with
    ``error``."""
    found: list[Row] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = limits.loads(line)
            found.append(Row(f"{path}:{number}", value, len(found) + 1, f"line {number}"))
        except (json.JSONDecodeError, RecursionError) as exc:
            if not found:  # not JSONL: one document, broken where the parser says
                where = f"{path}:{error.lineno}"
                raise not_a_trajectory(
                    where, f"not valid JSON: {error.msg} (column {error.colno})"
                ) from None
            problem = getattr(exc, "msg", "nested too deeply")
            raise fail(f"{path}:{number}", f"not valid JSON: {problem}") from None
    return found


def _trajectories(path: Path, found: list[Row]) -> list[RecordedTrajectory]:
    if not found:
        raise not_a_trajectory(f"{path}:1", f"an empty JSON array; {EXPECTED}")
    if rollout_tax.matches(found[0].value):
        steps = [rollout_tax.step(row.value, row.where) for row in found]
        return [RecordedTrajectory(str(path), "rollout-tax", stem(path), tuple(steps))]
    if len(found) == 1 and openhands_v1.is_event(found[0].value):
        raise not_a_trajectory(found[0].where, ONE_EVENT)
    events: tuple[EventFormat, ...] = (openhands, openhands_v1)
    for form in events:
        if form.is_event(found[0].value):  # an event list: one trajectory
            return [_event_list(form, path, found)]
    named: list[tuple[Row, DocumentFormat, str, str]] = []
    for row in found:
        module = next((m for m in DOCUMENTS if m.matches(row.value)), None)
        if module is None:
            if row is found[0]:
                raise not_a_trajectory(row.where, _what(row.value))
            raise fail(row.where, f"expected a row like the first one; {EXPECTED}")
        field, trajectory_id = identity(row.value)
        if trajectory_id is None:
            field = "position"
            trajectory_id = stem(path) if len(found) == 1 else f"{stem(path)}-{row.ordinal}"
        named.append((row, module, field, trajectory_id))
    tasks = Counter(name for _, _, field, name in named if field == TASK)
    attempts: Counter[str] = Counter()
    trajectories: list[RecordedTrajectory] = []
    seen: dict[str, str] = {}
    for row, module, field, trajectory_id in named:
        attempt_of = trajectory_id if tasks[trajectory_id] > 1 and field == TASK else None
        if attempt_of is not None:  # attempts of one task: a GRPO group, numbered in order
            attempts[attempt_of] += 1
            trajectory_id = f"{attempt_of}#{attempts[attempt_of]}"
        if trajectory_id in seen:
            raise fail(row.where, f"{field} {trajectory_id!r} repeats {seen[trajectory_id]}")
        seen[trajectory_id] = row.place
        trajectory = module.parse(row.value, row.where, trajectory_id, str(path))
        if attempt_of is not None:
            trajectory = replace(trajectory, attempt_of=attempt_of, attempt=attempts[attempt_of])
        trajectories.append(trajectory)
    return trajectories


def _event_list(module: EventFormat, path: Path, found: list[Row]) -> RecordedTrajectory:
    """A file whose rows are the events of one conversation (OpenHands, V0 or V1)."""
    name = "an OpenHands V1 event" if module is openhands_v1 else "an OpenHands event"
    for row in found:
        if not module.is_event(row.value):
            raise fail(row.where, f"expected {name} like the first row")
    return module.parse_events([row.value for row in found], str(path), stem(path), str(path))


def identity(row: Any) -> tuple[str, str | None]:
    """The field that names a row's trajectory (the first of IDENTITY it has) and the name."""
    for field in IDENTITY:
        keys = field.split("+")
        values = [value for key in keys if (value := _name(row.get(key)))]
        if len(values) == len(keys):
            return field, "/".join(values)
    return "", None


def _name(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None


def _what(value: Any) -> str:
    """What a value that is not a trajectory is, for the message."""
    if isinstance(value, dict) and "role" in value:
        return f"a chat message, not a trajectory: {EXPECTED} (a bare list of messages has none)"
    if isinstance(value, dict):
        keys = ", ".join(repr(key) for key in list(value)[:4])
        return f"not a trajectory this tool reads (an object with {keys or 'no keys'}); {EXPECTED}"
    return f"not a trajectory this tool reads (a JSON {type(value).__name__}); {EXPECTED}"
