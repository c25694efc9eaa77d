"""Saved runs: ``--rollout-save``/``--rollout-autosave`` files, finding them, loading them.

A saved run is a whole ``rollout-tax/2`` report, with its raw ``rollouts[]`` samples, in
``STORAGE/NAME.json`` (``rollout-tax/1`` runs are read too). Autosaves are
``STORAGE/NNNN_<label>.json``, numbered from 0001, where the label is the commit
(``<sha12>``, ``<sha12>-dirty``) or, outside git, a UTC timestamp.
"Newest" means the most recently written file (modification time, then name).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import limits
from ..core.files import write_json
from ..core.paths import regular_file
from ..core.writable import check_writable_directory
from ..errors import NoSavedRun, NotRegularFileError, SavedRunError
from ..report.document import Report

DEFAULT_STORAGE = ".rollout-tax"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
AUTOSAVE_PATTERN = re.compile(r"(\d{4,})_.+")


@dataclass(frozen=True)
class SavedRun:
    """A report loaded from ``path`` and checked against the schema."""

    path: Path
    report: Report

    @property
    def label(self) -> str:
        """How to name this run to a user: its file name and, when known, its commit."""
        commit = self.report.commit or {}
        sha = commit.get("sha") if isinstance(commit, dict) else None
        extra = [self.report.created or "?"]
        if isinstance(sha, str) and sha:
            extra.append(sha[:12] + ("-dirty" if commit.get("dirty") else ""))
        return f"{self.path.name} ({', '.join(extra)})"


@dataclass(frozen=True)
class Storage:
    """The directory of saved runs (``--rollout-storage``, default ``.rollout-tax/``)."""

    root: Path

    @classmethod
    def at(cls, directory: str | os.PathLike[str] | None) -> Storage:
        return cls(Path(directory or DEFAULT_STORAGE))

    def __str__(self) -> str:
        return f"{self.root}{os.sep}"

    # -- writing ---------------------------------------------------------------------------

    def check_writable(self, name: str | None = None) -> None:
        """Fail fast (before any rollout runs) when runs cannot be saved here (as ``name``)."""
        if self.root.exists() and not self.root.is_dir():
            raise SavedRunError(f"storage directory {self}: not a directory")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SavedRunError(
                f"storage directory {self}: cannot create: {_reason(exc)}"
            ) from None
        why = check_writable_directory(self.root)
        if why is not None:
            raise SavedRunError(f"storage directory {self}: not writable: {why}")
        if name is not None:
            path = self.root / f"{check_name(name)}.json"
            try:
                regular_file(path)
            except NotRegularFileError as exc:
                raise SavedRunError(f"cannot save {name!r} as {path}: {exc.strerror}") from None

    def save(self, name: str, report: Report) -> Path:
        """Write ``report`` to ``STORAGE/NAME.json`` atomically (replacing an older one).

        A symbolic link there is followed: its target is replaced, the link stays.
        """
        return write_json(self.root / f"{check_name(name)}.json", report.to_dict())

    def autosave(self, report: Report) -> Path:
        """Write ``report`` to the next free ``STORAGE/NNNN_<label>.json``; never overwrites.

        The file is written under a hidden temporary name and then hard-linked to its final
        name, so two sessions saving at once cannot take the same number.
        """
        label = autosave_label(report.commit)
        temporary = write_json(self.root / f".autosave-{uuid.uuid4().hex}.json", report.to_dict())
        try:
            for _ in range(1000):
                target = self.root / f"{self.next_number():04d}_{label}.json"
                try:
                    os.link(temporary, target)
                except FileExistsError:
                    continue
                except OSError:  # no hard links on this file system: plain atomic rename
                    os.replace(temporary, target)
                return target
            raise SavedRunError(f"{self}: could not find a free autosave number")
        finally:
            temporary.unlink(missing_ok=True)

    def next_number(self) -> int:
        numbers = [
            int(m.group(1)) for p in self.paths() if (m := AUTOSAVE_PATTERN.fullmatch(p.stem))
        ]
        return max(numbers, default=0) + 1

    # -- finding ---------------------------------------------------------------------------

    def paths(self) -> list[Path]:
        """Every saved run's file, oldest first (by modification time, then name); none if the
        directory does not exist yet, SavedRunError if something else is there."""
        if not self.root.is_dir():
            if self.root.exists():
                raise SavedRunError(f"storage directory {self}: not a directory")
            return []
        found = [p for p in self.root.glob("*.json") if not p.name.startswith(".") and p.is_file()]
        return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name))

    def resolve(self, ref: str | None) -> Path:
        """The file ``ref`` names; raises NoSavedRun when there is none (yet).

        ``None`` or ``""``: the newest saved run. A value with a path separator, or an existing
        file ending in ``.json``: that file. Otherwise a name in the storage (``main`` ->
        ``main.json``), an autosave number (``0003`` -> ``0003_*.json``), or else a file of
        that name in the current directory.
        """
        if not ref:
            paths = self.paths()
            if not paths:
                raise NoSavedRun(f"no saved run in {self}")
            return paths[-1]
        if "/" in ref or os.sep in ref or (os.altsep and os.altsep in ref):
            path = Path(ref)
            if not path.exists():
                raise NoSavedRun(f"no baseline file {ref}")
            return path
        if ref.endswith(".json") and Path(ref).exists():  # loading says if it is not a file
            return Path(ref)
        stem = ref.removesuffix(".json")
        candidate = self.root / f"{stem}.json"
        if candidate.exists():
            return candidate
        numbered = [p for p in self.paths() if p.stem.startswith(f"{stem}_") and stem.isdigit()]
        if len(numbered) > 1:
            names = ", ".join(p.name for p in numbered)
            raise SavedRunError(f"{ref!r} is ambiguous in {self}: {names}")
        if numbered:
            return numbered[0]
        if Path(ref).exists():  # loading says if it is not a file
            return Path(ref)
        raise NoSavedRun(f"no baseline {ref!r} in {self}")

    def load(self, ref: str | None) -> SavedRun:
        """Resolve ``ref`` and load it; NoSavedRun if missing, SavedRunError if unusable."""
        return load(self.resolve(ref))


def check_name(name: str, option: str = "name") -> str:
    """A saved run's name without ``.json``: a file name, never a path. An error names
    ``option`` (where the name came from)."""
    stem = name.strip().removesuffix(".json")
    if not NAME_PATTERN.fullmatch(stem):
        raise SavedRunError(
            f"{option}={name!r}: expected a plain name of letters, digits, '.', '_', '+' "
            "or '-' (not a path: runs are saved in the storage directory)"
        )
    return stem


def autosave_label(commit: Any) -> str:
    """``<sha12>`` or ``<sha12>-dirty`` in a git checkout, else a UTC timestamp."""
    if isinstance(commit, dict) and isinstance(commit.get("sha"), str) and commit["sha"]:
        sha = re.sub(r"[^0-9A-Za-z]", "", commit["sha"])[:12]
        if sha:
            return sha + ("-dirty" if commit.get("dirty") else "")
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


# -- loading ----------------------------------------------------------------


def load(path: str | os.PathLike[str]) -> SavedRun:
    """Read and validate a saved run; every problem is one SavedRunError naming the file.
    A directory, a FIFO or a device is refused before anything reads it."""
    path = Path(path)
    try:
        regular_file(path)
    except NotRegularFileError as exc:
        raise SavedRunError(f"{path}: {exc.strerror}; expected a saved run's .json file") from None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SavedRunError(f"{path}: not a JSON file (not UTF-8 text)") from None
    except OSError as exc:
        raise SavedRunError(f"{path}: cannot read: {_reason(exc)}") from None
    try:
        data = limits.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise SavedRunError(f"{path}: not valid JSON: {exc}") from None
    except RecursionError:
        raise SavedRunError(f"{path}: not valid JSON: nested too deeply") from None
    try:
        report = Report.from_dict(data)
    except ValueError as exc:
        raise SavedRunError(f"{path}: {exc}") from None
    return SavedRun(path, report)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
