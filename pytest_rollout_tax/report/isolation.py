"""The ``isolation`` part: what a sandbox runtime (gVisor's ``runsc``) adds to the agent's own
commands, against the kind's default runtime on the same tests; and prepared snapshots against
preparing every rollout. Formulas: docs/measurement.md#isolation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..core.record import workload_of
from .aggregate import Row
from .projection import step_overhead
from .units import seconds, signed_hours
from .validity import no_valid_result

#: The runtime every other runtime is measured against.
DEFAULT_RUNTIME = "runc"


def reference_of(name: str, substrates: dict[str, dict], *, snapshot: bool = False) -> str | None:
    """The substrate ``name`` is compared with: the same kind and transport, without a snapshot,
    on the default runtime (``snapshot``: on its own runtime); the kind's own name first."""
    entry = substrates[name]
    runtime = entry.get("runtime") if snapshot else DEFAULT_RUNTIME
    found = [
        other
        for other, candidate in substrates.items()
        if other != name
        and candidate.get("kind") == entry.get("kind")
        and candidate.get("transport") == entry.get("transport")
        and candidate.get("runtime") == runtime
        and not candidate.get("snapshot")
    ]
    return min(found, key=lambda other: (other != entry.get("kind"), other), default=None)


def command_means(rows: Iterable[Row]) -> dict[str, tuple[float, int]]:
    """Each test's mean step wall time in seconds and its number of steps."""
    totals: dict[str, list[float]] = {}
    for row in rows:
        fields = row.fields
        workload = workload_of(fields["test"], fields["substrate"], fields["round"])
        total = totals.setdefault(workload, [0.0, 0])
        total[0] += sum(row.walls_s)
        total[1] += len(row.wall_us)
    return {test: (wall / count, int(count)) for test, (wall, count) in totals.items() if count}


def excess_per_step(
    rows: list[Row], reference: list[Row], action_s: float, reference_action_s: float
) -> tuple[float, float | None, int]:
    """The mean excess command time per step over the reference's, pooled over the tests both
    ran (weighted by this substrate's steps); the command-time ratio; the tests compared.

    A step's command time is its wall time less the per-action overhead, as the decomposition
    splits it: ``step - min(action, step)``.
    """
    mine, theirs = command_means(rows), command_means(reference)
    excess = weight = mine_total = theirs_total = 0.0
    tests = 0
    for test, (step_s, steps) in mine.items():
        if test not in theirs:
            continue
        command = step_s - step_overhead(action_s, step_s)
        reference_step = theirs[test][0]
        reference_command = reference_step - step_overhead(reference_action_s, reference_step)
        excess += steps * (command - reference_command)
        mine_total += steps * command
        theirs_total += steps * reference_command
        weight += steps
        tests += 1
    if not weight:
        return 0.0, None, 0
    return excess / weight, (mine_total / theirs_total if theirs_total > 0 else None), tests


def measure(substrates: dict[str, dict], rows: dict[str, list[Row]]) -> None:
    """Give every substrate on another runtime than the default its ``isolation`` entry: its
    reference and, with one in the run, its excess command time per step, which the projection
    (``projection.tax_hours``, ``decompose``) counts in its tax-hours."""
    for name, entry in substrates.items():
        runtime = entry.get("runtime")
        if runtime is None or runtime == DEFAULT_RUNTIME:
            continue
        reference = reference_of(name, substrates)
        info = {"reference": reference, "per_step_s": None, "command_ratio": None, "tests": 0}
        entry["isolation"] = info
        base = substrates.get(reference) if reference else None
        if base is None or not entry.get("action") or not base.get("action"):
            continue
        per_step, command_ratio, tests = excess_per_step(
            rows[name], rows[reference], entry["action"]["mean"], base["action"]["mean"]
        )
        if tests:  # a runtime faster than runc costs no isolation
            info.update(per_step_s=max(per_step, 0.0), command_ratio=command_ratio, tests=tests)


def runtime_lines(
    substrates: dict[str, dict], judge: Callable[[str, str], str] = lambda name, base: ""
) -> list[str]:
    """``docker-gvisor vs docker: action p50 1.3x, command 2.9x, cold start 1.2x, +N
    tax-hours`` for each substrate on another runtime, or why its isolation is unknown."""
    lines = []
    for name, entry in substrates.items():
        info = entry.get("isolation")
        if info is None:
            continue
        reference = info["reference"]
        if (invalid := _invalid(name, reference, substrates)) is not None:
            lines.append(invalid)
            continue
        if reference is None or info["command_ratio"] is None:
            why = (
                f"no {DEFAULT_RUNTIME} {entry.get('kind')} variant on the same transport in the run"
                if reference is None
                else f"no test ran on both it and {reference}"
            )
            lines.append(f"{name}: isolation unknown ({why})")
            continue
        base = substrates[reference]
        parts = [
            f"action p50 {_ratio(entry['action'], base['action'], 'p50')}",
            f"command {info['command_ratio']:.2g}x",
            f"cold start {_ratio(entry['cold_start'], base['cold_start'], 'p50')}",
        ]
        if entry["tax_hours"] is not None and base["tax_hours"] is not None:
            parts.append(signed_hours(entry["tax_hours"] - base["tax_hours"], "tax-hours"))
        lines.append(f"{name} vs {reference}: {', '.join(parts)}{judge(name, reference)}")
    return lines


def snapshot_lines(
    substrates: dict[str, dict], judge: Callable[[str, str], str] = lambda name, base: ""
) -> list[str]:
    """For each snapshot variant: its cold start (a restore) against the plain variant's
    (a fresh start and the prepare), and the one-time cost of preparing and checkpointing."""
    lines = []
    for name, entry in substrates.items():
        if not entry.get("snapshot") or not (entry.get("cold_start") or entry.get("failures")):
            continue
        phases = entry.get("phases") or {}
        once = [
            f"{label} {seconds(phases[phase]['mean'])}"
            for phase, label in (("template", "prepare"), ("checkpoint", "checkpoint"))
            if phases.get(phase)
        ]
        cost = f"; once per test and worker: {' + '.join(once)}" if once else ""
        reference = reference_of(name, substrates, snapshot=True)
        if (invalid := _invalid(name, reference, substrates)) is not None:
            lines.append(invalid)
            continue
        plain = substrates[reference]["cold_start"] if reference else None
        restored = seconds(entry["cold_start"]["p50"])
        if plain:
            speed = entry["cold_start"]["p50"] / plain["p50"]
            lines.append(
                f"{name} vs {reference}: cold start {speed:.2g}x ({restored} restored vs "
                f"{seconds(plain['p50'])} prepared){cost}{judge(name, reference)}"
            )
        else:
            lines.append(f"{name}: cold start {restored} restored (no plain variant){cost}")
    return lines


def _invalid(name: str, reference: str | None, substrates: dict[str, dict]) -> str | None:
    """``NAME vs REFERENCE: NAME: no valid result (...)`` when either side's every rollout
    failed, so that no ratio stands for it; None when both have valid results."""
    sides = (name, reference) if reference else (name,)
    failed = [(n, why) for n in sides if (why := no_valid_result(substrates[n]))]
    if not failed:
        return None
    versus = f"{name} vs {reference}" if reference else name
    return f"{versus}: " + "; ".join(f"{n}: {why}" for n, why in failed)


def _ratio(mine: dict | None, theirs: dict | None, stat: str) -> str:
    if not mine or not theirs or not theirs[stat]:
        return "-"
    return f"{mine[stat] / theirs[stat]:.2g}x"
