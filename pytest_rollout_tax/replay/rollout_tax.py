"""This project's own trajectory format: JSONL, one step per line,
``{"cmd", "think_s", "recorded_s", "exit_code", "output_bytes"}`` (all but ``cmd`` optional)."""

from __future__ import annotations

import math
from typing import Any

from .model import RecordedStep, fail

FIELDS = ("cmd", "think_s", "recorded_s", "exit_code", "output_bytes")


def matches(row: Any) -> bool:
    """Whether ``row`` (a JSONL row) is one of our steps."""
    return isinstance(row, dict) and "cmd" in row


def step(row: Any, where: str) -> RecordedStep:
    """One line's step; ``where`` (``path:line``) names it in errors."""
    if not isinstance(row, dict) or not isinstance(row.get("cmd"), str):
        raise fail(where, 'expected {"cmd": "...", ...}, one step per line')
    unknown = sorted(set(row) - set(FIELDS))
    if unknown:
        raise fail(where, f"unknown field(s) {', '.join(unknown)}; fields: {', '.join(FIELDS)}")
    for name in ("think_s", "recorded_s"):
        value = row.get(name)
        if value is not None and not _seconds(value):
            raise fail(where, f"{name}={value!r}: expected seconds >= 0 or null")
    code, size = row.get("exit_code"), row.get("output_bytes")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        raise fail(where, f"exit_code={code!r}: expected an integer or null")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise fail(where, f"output_bytes={size!r}: expected an integer >= 0 or null")
    return RecordedStep(
        command=row["cmd"],
        think_s=row.get("think_s"),
        recorded_s=row.get("recorded_s"),
        exit_code=code,
        output_bytes=size,
    )


def _seconds(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value >= 0
    )
