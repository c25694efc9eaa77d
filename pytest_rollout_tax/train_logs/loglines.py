"""Metrics printed in a trainer's log: slime's and Miles' ``perf {rollout_id}: {dict}`` and
verl's console logger's ``step:N - key:value - key:value``, anywhere in a line (after a
timestamp, a Ray actor's prefix or colour codes, before Ray's ``[repeated 7x across
cluster]``)."""

from __future__ import annotations

import re
from pathlib import Path

from .records import Row, row_of

#: Terminal colour codes, as Ray prefixes an actor's lines.
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"
#: slime: ``perf 3: {'perf/rollout_time': 98.6, ...}``, the dict as Python prints it.
SLIME = re.compile(r"(?<![\w/])perf (?P<step>\d+): (?P<dict>\{.*\})")
#: One ``'key': value`` of a printed dict; a number wrapped as ``np.float64(1.5)`` or
#: ``tensor(1.5)`` is the number.
SLIME_PAIR = re.compile(rf"(['\"])(?P<key>[^'\"]+)\1:\s*(?:[\w.]+\()?(?P<value>{NUMBER})\b")
#: verl: ``step:3 - timing_s/gen:12.3 - ...``.
VERL = re.compile(r"(?<![\w/])step:(?P<step>\d+) - (?P<rest>.*)")
VERL_PAIR = re.compile(rf"(?P<key>[^\s:]+):(?:np\.\w+\()?(?P<value>{NUMBER})")


def read(path: Path, text: str) -> list[Row]:
    """A row per metrics line; other lines are skipped (a log says much else)."""
    rows: list[Row] = []
    for line in text.splitlines():
        line = ANSI.sub("", line)
        if found := SLIME.search(line):
            pairs = {m["key"]: m["value"] for m in SLIME_PAIR.finditer(found["dict"])}
        elif found := VERL.search(line):
            pairs = {m["key"]: m["value"] for m in VERL_PAIR.finditer(found["rest"])}
        else:
            continue
        rows.append((int(found["step"]), row_of(pairs)[1]))
    return rows
