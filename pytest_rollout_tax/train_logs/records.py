"""One record per training step, from the rows a file's reader found (``(step, {key: value})``)
and the keys of its stack."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .stacks import Stack

#: A reader's row: the step it belongs to (None: not said, the row's order then) and its
#: numeric metrics by key.
Row = tuple[int | None, dict[str, float]]


@dataclass(frozen=True)
class StepRecord:
    """A training step's times in seconds, None where its stack does not log them."""

    step: int
    #: The step's wall clock.
    wall_s: float | None
    #: Generation or rollout time (the whole batch's).
    generation_s: float | None
    #: Trainer compute (the policy update).
    compute_s: float | None
    #: Time the trainer waited for rollouts.
    wait_s: float | None
    #: Per trajectory, the step's mean time in tools and generating; the slowest trajectory's.
    tool_s: float | None = None
    trajectory_generation_s: float | None = None
    slowest_tool_s: float | None = None
    slowest_generation_s: float | None = None

    @property
    def straggler(self) -> bool:
        """The slowest trajectory spent longer in tools than in generation."""
        tool, gen = self.slowest_tool_s, self.slowest_generation_s
        return tool is not None and gen is not None and tool > gen

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def merged(rows: Iterable[Row]) -> dict[int, dict[str, float]]:
    """Rows merged by step, in the order steps first appear; a row with no step is the next
    one after the last seen (its file's order). A key logged twice for a step keeps the last."""
    steps: dict[int, dict[str, float]] = {}
    last = -1
    for step, values in rows:
        step = last + 1 if step is None else step
        steps.setdefault(step, {}).update(values)
        last = step
    return steps


def first(values: Mapping[str, float], keys: tuple[str, ...]) -> float | None:
    """The value of the first of ``keys`` present and finite."""
    for key in keys:
        value = values.get(key)
        if value is not None and math.isfinite(value):
            return value
    return None


def records(steps: Mapping[int, Mapping[str, float]], stack: Stack) -> list[StepRecord]:
    """A record for each step that logged its wall clock, generation or wait, in step order."""
    found = []
    for step in sorted(steps):
        values = steps[step]
        wall = first(values, stack.step)
        if wall is None and stack.step_parts:
            parts = [values[key] for key in stack.step_parts if key in values]
            wall = math.fsum(parts) if parts else None
        record = StepRecord(
            step=step,
            wall_s=wall,
            generation_s=first(values, stack.generation),
            compute_s=first(values, stack.compute),
            wait_s=first(values, stack.wait),
            tool_s=first(values, stack.tool),
            trajectory_generation_s=first(values, stack.trajectory_generation),
            slowest_tool_s=first(values, stack.slowest_tool),
            slowest_generation_s=first(values, stack.slowest_generation),
        )
        if (record.wall_s, record.generation_s, record.wait_s) != (None, None, None):
            found.append(record)
    return found


#: Where a row says its step, the trainer's own counter first, W&B's last.
STEP_KEYS = ("step", "training/global_step", "global_step", "rollout/step", "_step", "Step")


def number(value: object) -> float | None:
    """``value`` as a float when it is a number (or a number's text), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def row_of(values: Mapping[str, object]) -> Row:
    """A row from one logged mapping: its numeric values, its step from :data:`STEP_KEYS`."""
    numbers = {key: n for key, value in values.items() if (n := number(value)) is not None}
    step = next((numbers[key] for key in STEP_KEYS if key in numbers), None)
    return (None if step is None or not math.isfinite(step) else int(step)), numbers
