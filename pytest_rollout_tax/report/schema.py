"""The report's schema: its names, the metrics whose raw samples every report keeps, and the
check of a report file's parts (``document.Report.from_dict`` calls it)."""

from __future__ import annotations

import json
import math
from typing import Any

from ..core.stats import STAT_NAMES

SCHEMA = "rollout-tax/2"


#: Older schemas this version still reads (saved runs, baselines).
READABLE_SCHEMAS = ("rollout-tax/1", SCHEMA)


#: The STATS entries of a ``substrates[NAME]`` report entry, each backed by raw samples.
SAMPLE_METRICS = ("cold_start", "action", "step", "teardown", "trajectory")


#: The objects in a ``substrates[NAME]`` entry that become a dataclass, with each field's
#: kind: ``number`` (at least 0), ``real`` (any sign), ``int``, ``str``, ``bool``, ``numbers``
#: (an object of reals); ``?``: the field may be missing or null.
NESTED: dict[str, dict[str, str]] = {
    "cost": {
        "dollars": "number", "environment_dollars": "number", "parts": "numbers?",
        "fee_counted": "bool?",
    },
    "decomposition": {
        "cold_start": "real", "overhead": "real", "command": "real", "think": "real",
        "teardown": "real", "idle": "real?", "isolation": "real?",
    },
    "fleet": {
        "workers": "int", "cold_start_from": "str", "burst_level": "int?", "cold_start_s": "real",
        "idle_s": "real", "wall_clock_hours": "real", "worker_hours": "real",
    },
    "isolation": {
        "reference": "str?", "per_step_s": "real?", "command_ratio": "real?", "tests": "int?",
    },
}  # fmt: skip
_EXPECTED = {
    "number": "a number", "real": "a number", "int": "an integer", "str": "a string",
    "bool": "true or false", "numbers": "an object of numbers",
}  # fmt: skip


def check(report: Any) -> None:
    """Check the parts of a report file (schema ``/2`` or ``/1``) that reading it takes; a
    ValueError names the first that is wrong."""
    if not isinstance(report, dict):
        raise ValueError(f"not a rollout-tax report (a JSON {type(report).__name__})")
    if "schema" not in report:
        raise ValueError(f"not a rollout-tax report (no 'schema' field; expected {SCHEMA!r})")
    if report["schema"] not in READABLE_SCHEMAS:
        readable = " or ".join(READABLE_SCHEMAS)
        raise ValueError(f"unsupported schema {report['schema']!r} (expected {readable})")
    projection = _field(report, "projection", dict, "")
    for key, kind in (("rollouts", int), ("steps", int), ("think_time_s", (int, float))):
        _number(_field(projection, key, kind, "projection."), f"projection.{key}")
    substrates = _field(report, "substrates", dict, "")
    for name, entry in substrates.items():
        where = f"substrates.{name}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object")
        for metric in SAMPLE_METRICS:
            stats = entry.get(metric)
            if stats is None:
                continue
            if not isinstance(stats, dict):
                raise ValueError(f"{where}.{metric}: expected a STATS object or null")
            for stat in ("n", *STAT_NAMES):
                value = _field(stats, stat, (int, float), f"{where}.{metric}.")
                _number(value, f"{where}.{metric}.{stat}")
        for key in ("worker_hours", "tax_hours", "price_per_hour", "cost_usd"):
            if entry.get(key) is not None:
                _number(entry[key], f"{where}.{key}")
        for key, fields in NESTED.items():
            if entry.get(key) is not None:
                _nested(entry[key], fields, f"{where}.{key}")
    if report.get("training") is not None:
        _check_training(report["training"])
    rollouts = report.get("rollouts", [])
    if not isinstance(rollouts, list):
        raise ValueError("rollouts: expected a list")
    for index, rollout in enumerate(rollouts):
        _validate_rollout(rollout, f"rollouts[{index}]")


#: The figures of a ``training.substrates[NAME]`` entry (docs/json.md#training).
TRAINING_FIGURES = (
    "phase_s", "phase_low_s", "phase_high_s", "step_s", "wait_share", "idle_gpu_hours",
    "makespan_p50_s",
)  # fmt: skip


def _check_training(training: Any) -> None:
    """The ``training`` section: its model, and each substrate's figures."""
    if not isinstance(training, dict):
        raise ValueError(f"training: expected an object, got {_short(training)}")
    _field(training, "model", dict, "training.")
    for key in ("rollouts", "steps"):
        _number(_field(training, key, int, "training."), f"training.{key}")
    for name, entry in _field(training, "substrates", dict, "training.").items():
        where = f"training.substrates.{name}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object")
        for key in TRAINING_FIGURES:
            _number(_field(entry, key, (int, float), f"{where}."), f"{where}.{key}")


def _validate_rollout(rollout: Any, where: str) -> None:
    if not isinstance(rollout, dict):
        raise ValueError(f"{where}: expected an object")
    if not isinstance(rollout.get("substrate"), str):
        raise ValueError(f"{where}.substrate: expected a name")
    for key in ("cold_start_s", "teardown_s", "trajectory_s"):
        if rollout.get(key) is not None:
            _number(rollout[key], f"{where}.{key}")
    probes = rollout.get("action_probes_s", [])
    if not isinstance(probes, list):
        raise ValueError(f"{where}.action_probes_s: expected a list")
    for value in probes:
        _number(value, f"{where}.action_probes_s")
    steps = rollout.get("steps") or []
    if isinstance(steps, dict):  # columns: wall_us (rollout-tax/2) or wall_s (/1)
        column = "wall_us" if "wall_us" in steps else "wall_s"
        walls = steps.get(column, [])
        if not isinstance(walls, list):
            raise ValueError(f"{where}.steps.{column}: expected a list")
        for value in walls:
            _number(value, f"{where}.steps.{column}")
        return
    if not isinstance(steps, list):
        raise ValueError(f"{where}.steps: expected columns or a list")
    for index, step in enumerate(steps):  # a list of objects (before columns)
        if not isinstance(step, dict):
            raise ValueError(f"{where}.steps[{index}]: expected an object")
        _number(step.get("wall_s"), f"{where}.steps[{index}].wall_s")


def _nested(data: Any, fields: dict[str, str], where: str) -> None:
    """An object of ``fields`` (:data:`NESTED`): each present one of its kind, the required
    ones present; keys it does not know (a newer writer's) are left alone."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {_short(data)}")
    for key, kind in fields.items():
        value, path = data.get(key), f"{where}.{key}"
        if value is None:
            if not kind.endswith("?"):
                raise ValueError(f"not a rollout-tax report (no '{path}')")
            continue
        kind = kind.rstrip("?")
        if kind == "numbers" and isinstance(value, dict):
            for part, number in value.items():
                _real(number, f"{path}.{part}")
        elif kind in ("number", "real"):
            (_number if kind == "number" else _real)(value, path)
        elif not _is(value, kind):
            raise ValueError(f"{path}: expected {_EXPECTED[kind]}, got {_short(value)}")


def _is(value: Any, kind: str) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    wanted = {"int": int, "str": str}.get(kind, dict)
    return isinstance(value, wanted) and not isinstance(value, bool)


def _real(value: Any, where: str) -> float:
    """A finite number of either sign (a part that a faster runtime makes negative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where}: expected a number, got {_short(value)}")
    return value


def _field(data: dict[str, Any], key: str, kind: type | tuple[type, ...], prefix: str) -> Any:
    if key not in data:
        raise ValueError(f"not a rollout-tax report (no '{prefix}{key}')")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        expected = "an object" if kind is dict else "an integer" if kind is int else "a number"
        raise ValueError(f"{prefix}{key}: expected {expected}, got {_short(value)}")
    return value


def _number(value: Any, where: str) -> float:
    number = _real(value, where)
    if number < 0:
        raise ValueError(f"{where}: negative value {value!r}")
    return number


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
