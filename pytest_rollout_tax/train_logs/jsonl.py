"""JSONL metric logs: one JSON object per line, as a W&B run's ``wandb-history.jsonl``, verl's
file logger (``{"step": N, "data": {...}}``) or a trainer's own metrics file write them."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import TrainLogError
from .records import Row, row_of


def read(path: Path, text: str) -> list[Row]:
    """A row per line (blank lines skipped); a line that is not a JSON object is an error
    naming the file and the line."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrainLogError(f"{path}:{number}: not a JSON line ({exc.msg})") from None
        if not isinstance(value, dict):
            raise TrainLogError(f"{path}:{number}: expected a JSON object, got {line[:40]!r}")
        data = value.get("data")
        rows.append(row_of({**value, **data} if isinstance(data, dict) else value))
    return rows
