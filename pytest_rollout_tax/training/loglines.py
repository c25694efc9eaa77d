"""Metrics printed in a trainer's log: slime's and Miles' ``perf {rollout_id}: {dict}`` and
verl's console logger's ``step:N - key:value - key:value``, anywhere in a line (after a
timestamp or a Ray actor's prefix)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .records import Row, row_of

#: slime: ``perf 3: {'perf/rollout_time': 98.6, ...}``, the dict as Python prints it.
SLIME = re.compile(r"\bperf (?P<step>\d+): (?P<dict>\{.*\})")
#: verl: ``step:3 - timing_s/gen:12.3 - ...``, numpy scalars as ``np.float64(12.3)``.
VERL = re.compile(r"\bstep:(?P<step>\d+) - (?P<rest>.*)")
VERL_PAIR = re.compile(
    r"(?P<key>[^\s:]+):(?:np\.\w+\()?(?P<value>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
)


def read(path: Path, text: str) -> list[Row]:
    """A row per metrics line; other lines are skipped (a log says much else)."""
    rows = []
    for line in text.splitlines():
        if found := SLIME.search(line):
            values = _literal(found["dict"])
            if values is not None:
                rows.append((int(found["step"]), row_of(values)[1]))
        elif found := VERL.search(line):
            pairs = {m["key"]: m["value"] for m in VERL_PAIR.finditer(found["rest"])}
            rows.append((int(found["step"]), row_of(pairs)[1]))
    return rows


def _literal(text: str) -> dict | None:
    """A printed dict's value (numpy scalars read as numbers), None if it is not one."""
    text = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", text)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
