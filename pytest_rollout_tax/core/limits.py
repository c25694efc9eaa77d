"""One table of bounds: every number a user hands the plugin (options, ini keys, marker
arguments, substrate options, numbers read from files) is finite and within a documented range
(docs/limits.md, kept in step by tests/core/test_limits.py). A value out of range is one
ValueError naming the value and the range."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bound:
    """A closed range ``low``..``high`` of one number, with its unit for the message."""

    low: float
    high: float
    unit: str = ""

    def text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.low:,g} to {self.high:,g}{unit}"

    def check(self, value: float, where: str) -> float:
        """``value`` if finite and in range; else a ValueError naming ``where`` and the range."""
        finite = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
        if not finite or isinstance(value, bool):
            raise ValueError(f"{where}: expected a finite number from {self.text()}")
        if not self.low <= value <= self.high:
            raise ValueError(f"{where}: expected {self.text()}")
        return value


DAY_S = 86_400.0

#: Every bound, by the name docs/limits.md gives it.
LIMITS: dict[str, Bound] = {
    "--rollout-rounds": Bound(1, 10_000),
    "--rollout-probes": Bound(0, 10_000),
    "--rollout-project rollouts": Bound(1, 1e15),
    "--rollout-project steps": Bound(1, 1_000_000),
    "--rollout-think-time": Bound(0, DAY_S, "seconds"),
    "--rollout-start-at": Bound(-DAY_S, DAY_S, "seconds from now"),
    "--rollout-burst": Bound(1, 4096, "sandboxes"),
    "--rollout-fleet": Bound(1, 10_000_000, "workers"),
    "--rollout-output-cap": Bound(1, 16 << 30, "bytes"),
    "marker steps": Bound(1, 1_000_000),
    "marker rounds": Bound(1, 10_000),
    "SUBSTRATE.pool": Bound(0, 4096, "sandboxes"),
    "docker.cpus": Bound(0.01, 1024, "CPUs"),
    "docker.pids_limit": Bound(-1, 4_194_304, "processes"),
    "recorded seconds": Bound(0, 1e9, "seconds"),
    "number in a file": Bound(-1e18, 1e18),
}


def file_number(text: str) -> int | float:
    """A number of a JSON file (``parse_int``/``parse_float``): finite and within the bound
    ``number in a file``, else a JSONDecodeError the file's reader reports as corrupt."""
    value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
    infinite = isinstance(value, float) and not math.isfinite(value)
    if infinite or abs(value) > LIMITS["number in a file"].high:
        shown = text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"
        bound = LIMITS["number in a file"].text()
        raise json.JSONDecodeError(
            f"number {shown}: expected a finite number from {bound}", text, 0
        )
    return value


class _Beyond(str):
    """A file's number past its bound, kept as its text until :func:`loads` names its field."""


def _number(text: str) -> Any:
    try:
        return file_number(text)
    except json.JSONDecodeError:
        return _Beyond(text)


def loads(text: str, **kwargs: Any) -> Any:
    """``json.loads`` of a file whose numbers are checked by :func:`file_number`; one past its
    bound is a JSONDecodeError naming its field (``steps[3].think_s``,
    ``projection.rollouts``)."""
    data = json.loads(text, parse_int=_number, parse_float=_number, **kwargs)
    found = _beyond(data, "")
    if found is not None:
        where, value = found
        try:
            file_number(value)
        except json.JSONDecodeError as exc:
            raise json.JSONDecodeError(f"{where or 'the document'}: {exc.msg}", text, 0) from None
    return data


def _beyond(value: Any, path: str) -> tuple[str, str] | None:
    """The first number past its bound in ``value``: its path and its text."""
    if isinstance(value, _Beyond):
        return path, str(value)
    if isinstance(value, dict):
        items = ((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for where, item in items:
        if (found := _beyond(item, where)) is not None:
            return found
    return None


def check(name: str, value: float, where: str) -> float:
    """``value`` checked against the bound ``name`` of :data:`LIMITS`."""
    return LIMITS[name].check(value, where)
