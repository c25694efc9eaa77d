"""Rollout records gathered as they arrive: samples per substrate in compact arrays."""

from __future__ import annotations

import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.record import (
    FAILED_OUTCOMES,
    MICROSECONDS,
    OPTIONAL_STEP_COLUMNS,
    STEP_COLUMNS,
    TEXT_STEP_COLUMNS,
    Rollout,
    step_column,
)

#: Step columns a saved run keeps whatever the report keeps: the gate's noise test reads them.
GATE_COLUMNS = ("wall_us",)
#: ``--rollout-json-steps``: the step columns each choice keeps.
STEP_CHOICES = {"all": STEP_COLUMNS, "none": ()}


def _samples() -> array[float]:
    return array("d")


@dataclass
class Samples:
    """One substrate's samples of every metric, appended as its rollouts arrive."""

    rollouts: int = 0
    failures: int = 0
    cold_start: array[float] = field(default_factory=_samples)
    action: array[float] = field(default_factory=_samples)
    step: array[float] = field(default_factory=_samples)
    teardown: array[float] = field(default_factory=_samples)
    trajectory: array[float] = field(default_factory=_samples)
    #: The recorded think time of every replayed step that has one.
    think: array[float] = field(default_factory=_samples)
    #: Shape-replayed steps with a recorded command time: that time, and the measured step's.
    recorded: array[float] = field(default_factory=_samples)
    recorded_walls: array[float] = field(default_factory=_samples)
    phases: dict[str, array[float]] = field(default_factory=dict)
    #: Exact replays: steps replayed and how many diverged, in all and by kind.
    replayed_steps: int = 0
    divergent_steps: int = 0
    divergence: Counter[str] = field(default_factory=Counter)

    def add(
        self,
        record: dict[str, Any],
        walls: array[float],
        think: Iterable[float] = (),
        recorded: Iterable[tuple[float, float]] = (),
    ) -> None:
        """Count ``record`` (a ``Rollout.to_dict()``) and append its samples; ``recorded``:
        (recorded command time, measured step time) of its shape-replayed steps."""
        self.rollouts += 1
        self.failures += record["outcome"] in FAILED_OUTCOMES
        for metric in ("cold_start", "teardown", "trajectory"):
            if (value := record[f"{metric}_s"]) is not None:
                getattr(self, metric).append(value)
        self.action.extend(record["action_probes_s"])
        self.step.extend(walls)
        self.think.extend(think)
        for command, wall in recorded:
            self.recorded.append(command)
            self.recorded_walls.append(wall)
        replay = record.get("replay") or {}
        if replay.get("mode") == "exact":
            self.replayed_steps += len(walls)
            self.divergent_steps += replay.get("divergent_steps") or 0
            self.divergence.update(replay.get("divergence") or {})
        for name, value in record["phases"].items():
            self.phases.setdefault(name, _samples()).append(value)


@dataclass
class Row:
    """One rollout as the controller keeps it: its fields, and its steps as compact columns."""

    fields: dict[str, Any]
    wall_us: array[int]
    kinds: list[str] = field(default_factory=list)
    kind: array[int] | None = None
    exit_code: list[int | None] | None = None
    #: The optional columns (``record.OPTIONAL_STEP_COLUMNS``) this rollout's steps have,
    #: numbers packed (:func:`pack`), text interned.
    optional: dict[str, array[int] | list[str | None]] = field(default_factory=dict)

    @property
    def walls_s(self) -> list[float]:
        """The steps' wall times in seconds (the one conversion from the stored µs)."""
        return [wall / MICROSECONDS for wall in self.wall_us]

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.fields["substrate"], self.fields["test"], self.fields["round"])

    def to_dict(self, columns: Sequence[str]) -> dict[str, Any]:
        """The report's ``rollouts[]`` item with the step columns ``columns`` (none: no steps)."""
        data = dict(self.fields)
        kept = {name: self._column(name) for name in columns}
        kept = {name: values for name, values in kept.items() if values is not None}
        if kept:
            steps = {"kinds": self.kinds} if "kind" in kept else {}
            data["steps"] = steps | kept
        return data

    def _column(self, name: str) -> list[Any] | None:
        if name in OPTIONAL_STEP_COLUMNS:
            packed = self.optional.get(name)
            if packed is None or isinstance(packed, list):
                return None if packed is None else list(packed)
            return unpack(packed)
        values = getattr(self, name)
        return list(values) if values is not None else None


def pack(values: Sequence[int | None]) -> array[int]:
    """An optional column (whole numbers >= 0, or null) as a compact array, -1 for null."""
    return array("q", (-1 if value is None else value for value in values))


def _intern(values: Sequence[str | None]) -> list[str | None]:
    """A text column with each distinct value stored once."""
    return [None if value is None else sys.intern(value) for value in values]


def unpack(packed: array[int]) -> list[int | None]:
    """The column :func:`pack` packed, its nulls back."""
    return [None if value < 0 else value for value in packed]


class Aggregate:
    """Every rollout of a session: per-substrate samples and the rows of ``rollouts[]``."""

    def __init__(self, columns: Sequence[str] = STEP_COLUMNS) -> None:
        self.columns = tuple(columns)
        self.samples: dict[str, Samples] = {}
        self.rows: list[Row] = []

    @classmethod
    def of(cls, rollouts: Iterable[Rollout], columns: Sequence[str] = STEP_COLUMNS) -> Aggregate:
        aggregate = cls(columns)
        for rollout in rollouts:
            aggregate.add(rollout.to_dict())
        return aggregate

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, record: dict[str, Any]) -> None:
        """Take one ``Rollout.to_dict()`` record (from this process or an xdist worker)."""
        fields = dict(record)
        steps = fields.pop("steps", None) or {}
        row = Row(fields, array("q", steps.get("wall_us", ())))
        if "kind" in self.columns:
            row.kinds = [sys.intern(kind) for kind in steps.get("kinds", ())]
            row.kind = array("B", steps.get("kind", ()))
            row.exit_code = list(steps.get("exit_code", ()))
            row.optional = {
                name: _intern(steps[name]) if name in TEXT_STEP_COLUMNS else pack(steps[name])
                for name in OPTIONAL_STEP_COLUMNS
                if name in steps
            }
        self.rows.append(row)
        walls = array("d", row.walls_s)
        think = (us / MICROSECONDS for us in step_column(steps, "think_us") if us is not None)
        recorded: list[tuple[float, float]] = []
        if (fields.get("replay") or {}).get("mode") == "shape":
            recorded = [
                (us / MICROSECONDS, wall)
                for us, wall in zip(step_column(steps, "recorded_us"), walls, strict=True)
                if us is not None
            ]
        self.samples.setdefault(fields["substrate"], Samples()).add(fields, walls, think, recorded)

    def sorted_rows(self) -> list[Row]:
        """The rows in report order: by substrate, test and round."""
        return sorted(self.rows, key=lambda row: row.key)


class RolloutRows(Sequence[dict[str, Any]]):
    """The report's ``rollouts[]``: items made on demand, so no copy of every step is kept."""

    def __init__(self, rows: list[Row], columns: Sequence[str]) -> None:
        self.rows = rows
        self.columns = tuple(columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:  # type: ignore[override]
        return self.rows[index].to_dict(self.columns)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (row.to_dict(self.columns) for row in self.rows)

    def keeping(self, columns: Sequence[str]) -> RolloutRows:
        """The same rows with other step columns."""
        return RolloutRows(self.rows, columns)
