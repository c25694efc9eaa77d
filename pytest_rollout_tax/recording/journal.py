"""The files record mode writes: one append-only JSON-lines journal per process.

A journal's first line says who wrote it (``open``: schema, session, process, machine,
commit); then each rollout adds a ``begin`` line once its sandbox is up (its record so far)
and an ``end`` line when it is over (its whole record, a ``Rollout.to_dict()``). Every line is
written whole with one ``write`` on a file opened for appending, so a process killed at any
moment leaves every earlier line readable: at worst its last line is cut short, which
:func:`read` tolerates and counts. A ``begin`` with no ``end`` is a rollout the process never
finished: it is read as ``interrupted``.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.record import Rollout, steps_of
from ..errors import UsageError

SCHEMA = "rollout-tax-record/1"
SUFFIX = ".jsonl"
OPEN, BEGIN, END = "open", "begin", "end"
#: A rollout's times, each seconds or null.
TIMES = ("cold_start_s", "teardown_s", "trajectory_s")


class Journal:
    """One process's journal under ``directory``, opened on first write (so a recorder that
    records nothing leaves no file); safe to write from several threads."""

    def __init__(self, directory: Path, session: str, header: dict[str, Any]) -> None:
        self.path = directory / f"{session}-{os.getpid()}{SUFFIX}"
        self._header = {"event": OPEN, "schema": SCHEMA, "session": session, "pid": os.getpid()}
        self._header |= header
        self._lock = threading.Lock()
        self._fd: int | None = None

    def write(self, event: str, record: dict[str, Any]) -> None:
        """Append one ``event`` line holding ``record`` (a rollout's ``to_dict()``)."""
        line = json.dumps({"event": event, "rollout": record}, separators=(",", ":")) + "\n"
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                self._append(json.dumps(self._header, separators=(",", ":")) + "\n")
            self._append(line)

    def _append(self, line: str) -> None:
        assert self._fd is not None
        data = line.encode("utf-8")
        while data:  # one write for a line of any usual size; the loop only for a short write
            data = data[os.write(self._fd, data) :]

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


@dataclass
class Recorded:
    """What a directory of journals holds: every rollout once, and what was odd about it."""

    #: Each rollout's record (``Rollout.to_dict()``), ended or interrupted, in file order.
    rollouts: list[dict[str, Any]] = field(default_factory=list)
    #: The ``open`` line of each journal, by file name.
    headers: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Rollouts begun and never ended (their process was killed or lost).
    unfinished: int = 0
    #: Journals whose last line was cut short (their process died while writing it).
    cut_short: list[str] = field(default_factory=list)

    @property
    def interrupted(self) -> int:
        """Rollouts that ended before their agent did: still open when their recorder
        closed, or never ended (:attr:`unfinished`)."""
        return sum(rollout["outcome"] == "interrupted" for rollout in self.rollouts)

    @property
    def header(self) -> dict[str, Any]:
        """The first journal's ``open`` line (machine, commit and version of the run)."""
        return next(iter(self.headers.values()), {})


def read(directory: str | os.PathLike[str]) -> Recorded:
    """Every journal in ``directory``, in name order; a UsageError names a bad file."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"{directory}: not a directory of record-mode journals")
    paths = sorted(root.glob(f"*{SUFFIX}"))
    if not paths:
        raise UsageError(f"{directory}: no record-mode journal (*{SUFFIX}) in it")
    recorded = Recorded()
    for path in paths:
        _read_one(path, recorded)
    return recorded


def _read_one(path: Path, recorded: Recorded) -> None:
    try:
        lines = path.read_text("utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: unreadable: {getattr(exc, 'strerror', None) or exc}") from None
    begun: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if number == 1:
                entry = None  # refused below as no journal at all
            elif number == len(lines) and not line.endswith("\n"):
                recorded.cut_short.append(path.name)  # the writer died mid-line
                break
            else:
                raise UsageError(f"{path}:{number}: not a JSON line") from None
        if number == 1:
            _check_header(path, entry)
            recorded.headers[path.name] = entry
            continue
        event, record = _event(path, number, entry)
        if event == BEGIN:  # written once the sandbox is up, so it has an id
            begun[record["sandbox_id"]] = record
        else:
            begun.pop(record["sandbox_id"], None)
            recorded.rollouts.append(record)
    for record in begun.values():
        recorded.rollouts.append(record | {"outcome": "interrupted"})
        recorded.unfinished += 1


def _check_header(path: Path, entry: Any) -> None:
    if not isinstance(entry, dict) or entry.get("event") != OPEN:
        raise UsageError(f"{path}: not a record-mode journal (its first line is no 'open')")
    if entry.get("schema") != SCHEMA:
        raise UsageError(f"{path}: schema {entry.get('schema')!r}; this version reads {SCHEMA}")


def _event(path: Path, number: int, entry: Any) -> tuple[str, dict[str, Any]]:
    """A begin or end line's event and its rollout, checked as the report reads it."""
    where = f"{path}:{number}"
    if not isinstance(entry, dict) or entry.get("event") not in (BEGIN, END):
        raise UsageError(f"{where}: expected a begin or end line")
    try:
        rollout = Rollout.from_dict(entry["rollout"])
        list(steps_of(entry["rollout"].get("steps")))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise UsageError(f"{where}: not a rollout record ({type(exc).__name__}: {exc})") from None
    for name in TIMES:
        value = getattr(rollout, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UsageError(f"{where}: {name}={value!r}: expected seconds or null")
    return entry["event"], rollout.to_dict()
