"""A rollout record's time line: its phases, steps and teardown as spans in epoch nanoseconds.

Plain data for the exporters (``otel``, ``prometheus``): no OpenTelemetry import here. The
record is a report's ``rollouts[]`` item with every step column (``at_us`` places each step).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core.record import STEP_COLUMNS, steps_of
from ..core.substrate import CLAIM_PHASE
from ..report.document import Report

NANOSECONDS = 1_000_000_000
#: How a sandbox came to be: a fresh cold start, a warm pool's claim, a snapshot's restore.
LAUNCH_TYPES = ("cold", "warm", "restore")
#: The tool names of steps that recorded none (the sandbox's own methods).
STEP_TOOLS = {"exec": "exec", "write_file": "write_file", "read_file": "read_file"}


@dataclass(frozen=True)
class TimedSpan:
    """One span of a rollout's time line."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    #: The class of error it ended with (OpenTelemetry's ``error.type``), if any.
    error: str | None = None

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / NANOSECONDS


@dataclass(frozen=True)
class RolloutSpans:
    """A rollout's root span and its children, in time order."""

    root: TimedSpan
    children: list[TimedSpan]
    launch_type: str
    #: The no-op probes' durations (``action``), in seconds: not on the time line.
    probes_s: tuple[float, ...] = ()


def records_of(report: Report) -> Iterable[dict[str, Any]]:
    """A report's ``rollouts[]`` with every step column, whatever ``--rollout-json-steps`` kept
    for the file (a live run's rows keep them all)."""
    rows = report.rollouts
    return rows.keeping(STEP_COLUMNS) if hasattr(rows, "keeping") else rows


def launch_type(record: dict[str, Any]) -> str:
    """``warm`` for a pool's (or a controller's) warm claim, ``restore`` for a snapshot's,
    else ``cold``."""
    recorded = record.get("launch_type")
    if isinstance(recorded, str) and recorded in LAUNCH_TYPES:
        return recorded
    if CLAIM_PHASE in (record.get("phases") or {}):
        return "warm"
    return "restore" if record.get("snapshot") else "cold"


def rollout_attributes(record: dict[str, Any]) -> dict[str, Any]:
    """The ``rollout_tax.*`` attributes of a rollout (the absent ones left out)."""
    values = {
        "substrate": record.get("substrate"),
        "kind": record.get("kind"),
        "transport": record.get("transport"),
        "runtime": record.get("runtime"),
        "sandbox_id": record.get("sandbox_id"),
        "test": record.get("test"),
        "round": record.get("round"),
        "outcome": record.get("outcome"),
        "shard": record.get("shard"),
        "client": record.get("client"),
        "launch_type": launch_type(record),
    }
    return {f"rollout_tax.{key}": value for key, value in values.items() if value is not None}


def spans_of(record: dict[str, Any]) -> RolloutSpans | None:
    """The time line of one rollout, or None where it has no create stamp to anchor it."""
    epoch = record.get("epoch") or {}
    if "create" not in epoch:
        return None
    created = _ns(epoch["create"])
    children = list(_phases(record, created))
    children += list(_steps(record, created))
    if "teardown" in epoch and "gone" in epoch:
        children.append(TimedSpan("teardown", _ns(epoch["teardown"]), _ns(epoch["gone"])))
    end = max([_ns(epoch.get("gone", epoch["create"]))] + [span.end_ns for span in children])
    failed = record.get("outcome") not in (None, "passed", "pending")
    root = TimedSpan(
        f"rollout {record.get('substrate', '')}".strip(),
        created,
        end,
        rollout_attributes(record),
        error=record.get("outcome") if failed else None,
    )
    return RolloutSpans(
        root,
        sorted(children, key=lambda span: span.start_ns),
        launch_type(record),
        tuple(record.get("action_probes_s") or ()),
    )


def _phases(record: dict[str, Any], created: int) -> Iterator[TimedSpan]:
    """The cold start's phases, one after another from the create request."""
    start = created
    for phase, seconds in (record.get("phases") or {}).items():
        end = start + _ns(seconds)
        yield TimedSpan(f"cold_start {phase}", start, end, {"rollout_tax.phase": phase})
        start = end


def _steps(record: dict[str, Any], created: int) -> Iterator[TimedSpan]:
    """One ``execute_tool`` span per step that recorded when it began."""
    for index, step in enumerate(steps_of(record.get("steps"))):
        if step.at_s is None:
            continue
        tool = step.tool or STEP_TOOLS.get(step.kind, step.kind)
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.type": "function",
            "rollout_tax.step.index": index,
            "rollout_tax.step.kind": step.kind,
        }
        if step.call_id is not None:
            attributes["gen_ai.tool.call.id"] = step.call_id
        if step.exit_code is not None:
            attributes["rollout_tax.step.exit_code"] = step.exit_code
        if step.output_bytes is not None:
            attributes["rollout_tax.step.output_bytes"] = step.output_bytes
        start = created + _ns(step.at_s)
        # an exec that returned no exit code raised (a timeout, a lost sandbox)
        error = "_OTHER" if step.kind == "exec" and step.exit_code is None else None
        yield TimedSpan(
            f"execute_tool {tool}", start, start + _ns(step.wall_s), attributes, error=error
        )


def _ns(seconds: float) -> int:
    return round(seconds * NANOSECONDS)
