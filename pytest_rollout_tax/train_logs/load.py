"""A training run's log files read into one run: each file's kind told by its name and
content, the stack by its keys, one record per step (the files of one run merge by step, as
prime-rl's trainer and orchestrator logs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import TrainLogError
from . import csv_file, jsonl, loglines, tensorboard
from .records import STEP_KEYS, Row, StepRecord, merged, records
from .stacks import STACKS, Stack, detect

#: How many of a foreign file's keys its error names.
SHOWN_KEYS = 8


@dataclass(frozen=True)
class TrainLog:
    """A run's records and where they came from."""

    paths: tuple[str, ...]
    #: Each file's kind, in the order of ``paths``.
    kinds: tuple[str, ...]
    stack: Stack
    records: list[StepRecord]


def kind_of(path: Path, text: str | None) -> str:
    """``tensorboard``, ``jsonl``, ``csv`` or ``log``: from the name, the first line, and
    whether a metrics line of a log is anywhere in it."""
    if text is None:
        return "tensorboard"
    head = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if head.startswith("{"):
        return "jsonl"
    if path.suffix.lower() == ".csv":
        return "csv"
    if loglines.SLIME.search(text) or loglines.VERL.search(text):
        return "log"
    return "csv" if "," in head else "log"


def read_rows(path: Path) -> tuple[str, list[Row]]:
    """The kind of ``path`` and its rows; an unreadable, empty or binary file is an error."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TrainLogError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise TrainLogError(f"{path}: empty file, no training log in it")
    if tensorboard.MARK in path.name:
        return "tensorboard", tensorboard.read(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TrainLogError(
            f"{path}: a binary file, not a training log (JSONL, CSV, log lines, or a "
            f"TensorBoard file named *{tensorboard.MARK}*)"
        ) from None
    kind = kind_of(path, text)
    reader = {"jsonl": jsonl.read, "csv": csv_file.read, "log": loglines.read}[kind]
    return kind, reader(path, text)


def load(paths: Sequence[str | Path]) -> TrainLog:
    """The run the files hold; a file with no key of a known stack is an error naming the keys
    it has and the stacks known."""
    kinds, rows = [], []
    for path in map(Path, paths):
        kind, found = read_rows(path)
        kinds.append(kind)
        rows += found
        keys = {key for _, values in found for key in values} - set(STEP_KEYS)
        if detect(keys) is None:
            raise TrainLogError(foreign(path, kind, keys))
    every = {key for _, values in rows for key in values}
    stack = detect(every)
    assert stack is not None  # each file had a marker
    steps = records(merged(rows), stack)
    if not steps:
        raise TrainLogError(
            f"{', '.join(map(str, paths))}: {stack.name} keys but no step with its wall clock, "
            f"generation or wait ({', '.join(sorted(stack.step + stack.wait))})"
        )
    return TrainLog(tuple(map(str, paths)), tuple(kinds), stack, steps)


def foreign(path: Path, kind: str, keys: set[str]) -> str:
    """The line for a file with no known key: what it has, and what the reader knows."""
    shown = sorted(keys)[:SHOWN_KEYS]
    has = (
        f"its keys: {', '.join(shown)}{', ...' if len(keys) > len(shown) else ''} "
        f"({len(keys)} in all)"
        if keys
        else "no metric in it"
    )
    known = "; ".join(f"{stack.name} ({', '.join(stack.markers)})" for stack in STACKS)
    return f"{path}: no key of a known stack in this {kind} file, {has}; known: {known}"
