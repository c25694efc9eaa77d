"""The isolation lines of the summary: each runtime variant and each snapshot variant against
the variant that differs from it in that alone (``report/isolation.py`` measures them)."""

from __future__ import annotations

from collections.abc import Callable

from ..core.stats import Stats
from ..report.document import SubstrateEntry
from ..report.isolation import DEFAULT_RUNTIME, reference_of
from ..text.units import seconds, signed_hours


def runtime_lines(
    substrates: dict[str, SubstrateEntry], judge: Callable[[str, str], str] = lambda name, base: ""
) -> list[str]:
    """``docker-gvisor vs docker: action p50 1.3x, command 2.9x, cold start 1.2x, +N
    tax-hours`` for each substrate on another runtime, or why its isolation is unknown."""
    lines = []
    for name, entry in substrates.items():
        info = entry.isolation
        if info is None:
            continue
        reference = info.reference
        if (invalid := _invalid(name, reference, substrates)) is not None:
            lines.append(invalid)
            continue
        if reference is None or info.command_ratio is None:
            why = (
                f"no {DEFAULT_RUNTIME} {entry.kind} variant on the same transport in the run"
                if reference is None
                else f"no test ran on both it and {reference}"
            )
            lines.append(f"{name}: isolation unknown ({why})")
            continue
        base = substrates[reference]
        parts = [
            f"action p50 {_ratio(entry.action, base.action, 'p50')}",
            f"command {info.command_ratio:.2g}x",
            f"cold start {_ratio(entry.cold_start, base.cold_start, 'p50')}",
        ]
        if entry.tax_hours is not None and base.tax_hours is not None:
            parts.append(signed_hours(entry.tax_hours - base.tax_hours, "tax-hours"))
        lines.append(f"{name} vs {reference}: {', '.join(parts)}{judge(name, reference)}")
    return lines


def snapshot_lines(
    substrates: dict[str, SubstrateEntry], judge: Callable[[str, str], str] = lambda name, base: ""
) -> list[str]:
    """For each snapshot variant: its cold start (a restore) against the plain variant's
    (a fresh start and the prepare), and the one-time cost of preparing and checkpointing."""
    lines = []
    for name, entry in substrates.items():
        if not entry.snapshot or not (entry.cold_start or entry.failures):
            continue
        phases = entry.phases
        once = [
            f"{label} {seconds(stats.mean)}"
            for phase, label in (("template", "prepare"), ("checkpoint", "checkpoint"))
            if (stats := phases.get(phase))
        ]
        cost = f"; once per test and worker: {' + '.join(once)}" if once else ""
        reference = reference_of(name, substrates, snapshot=True)
        if (invalid := _invalid(name, reference, substrates)) is not None:
            lines.append(invalid)
            continue
        if (cold_start := entry.cold_start) is None:  # no rollout of it measured one
            continue
        plain = substrates[reference].cold_start if reference else None
        restored = seconds(cold_start.p50)
        if plain and reference:
            speed = cold_start.p50 / plain.p50
            lines.append(
                f"{name} vs {reference}: cold start {speed:.2g}x ({restored} restored vs "
                f"{seconds(plain.p50)} prepared){cost}{judge(name, reference)}"
            )
        else:
            lines.append(f"{name}: cold start {restored} restored (no plain variant){cost}")
    return lines


def _invalid(name: str, reference: str | None, substrates: dict[str, SubstrateEntry]) -> str | None:
    """``NAME vs REFERENCE: NAME: no valid result (...)`` when either side's every rollout
    failed, so that no ratio stands for it; None when both have valid results."""
    sides = (name, reference) if reference else (name,)
    failed = [(n, why) for n in sides if (why := substrates[n].no_valid_result)]
    if not failed:
        return None
    versus = f"{name} vs {reference}" if reference else name
    return f"{versus}: " + "; ".join(f"{n}: {why}" for n, why in failed)


def _ratio(mine: Stats | None, theirs: Stats | None, stat: str) -> str:
    if not mine or not theirs or not getattr(theirs, stat):
        return "-"
    return f"{getattr(mine, stat) / getattr(theirs, stat):.2g}x"
