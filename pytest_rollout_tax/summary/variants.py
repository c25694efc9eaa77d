"""Variants of one substrate kind compared like with like: each with the kind's plain variant,
on what differs between them (its transport, its warm pool, its reuse); a runtime or a snapshot is
compared by summary/isolation.py, with the variant that differs from it in that alone."""

from __future__ import annotations

from collections.abc import Callable

from ..core.stats import Stats
from ..core.substrate import RESET_PHASE
from ..report.document import SubstrateEntry
from ..report.isolation import DEFAULT_RUNTIME
from ..report.projection import step_overhead
from ..text.units import ratio, seconds, signed_hours

#: What a variant is made of, read from its report entry; the plain variant has each aspect's
#: default. A new aspect (e.g. a container runtime) is one getter here, one default and one
#: line maker in LINES.
ASPECTS: dict[str, Callable[[SubstrateEntry], object]] = {
    "transport": lambda entry: entry.transport or "exec",
    "pool": lambda entry: entry.pool.size if entry.pool else 0,
    "runtime": lambda entry: entry.runtime or DEFAULT_RUNTIME,
    "snapshot": lambda entry: bool(entry.snapshot),
    "reuse": lambda entry: "reset" if RESET_PHASE in entry.phases else "fresh",
}
PLAIN: dict[str, object] = {"transport": "exec", "pool": 0, "runtime": DEFAULT_RUNTIME,
                            "snapshot": False, "reuse": "fresh"}  # fmt: skip


def differences(base: SubstrateEntry, other: SubstrateEntry) -> tuple[str, ...]:
    """The aspects in which two variants' report entries differ, in ASPECTS order."""
    return tuple(aspect for aspect, get in ASPECTS.items() if get(base) != get(other))


def plain_variant(names: list[str], substrates: dict[str, SubstrateEntry]) -> str:
    """The kind's plain variant among ``names``: the one with the fewest aspects off their
    defaults (on a tie, the first name)."""

    def off_default(name: str) -> int:
        entry = substrates[name]
        return sum(get(entry) != PLAIN[aspect] for aspect, get in ASPECTS.items())

    return min(names, key=off_default)


def comparison_lines(
    substrates: dict[str, SubstrateEntry], judge: Callable[[str, str], str] = lambda name, base: ""
) -> list[str]:
    """For each kind run as several variants, each variant against the kind's plain one: one
    line per aspect that differs, saying when another aspect differs too (not like with like)."""
    by_kind: dict[str, list[str]] = {}
    for name, entry in substrates.items():
        if entry.kind:
            by_kind.setdefault(entry.kind, []).append(name)
    lines = []
    for names in by_kind.values():
        base_name = plain_variant(names, substrates)
        base = substrates[base_name]
        for name in names:
            if name == base_name:
                continue
            differ = differences(base, substrates[name])
            if differ and (invalid := invalid_line(name, substrates[name], base_name, base)):
                lines.append(invalid)
                continue
            for aspect in differ:
                line = LINES[aspect](name, substrates[name], base_name, base)
                if line is None:
                    continue
                line += judge(name, base_name)
                others = [a for a in differ if a != aspect]
                if others:
                    verb = "differs" if len(others) == 1 else "differ"
                    line += f" (its {' and '.join(others)} {verb} too)"
                lines.append(line)
    return lines


def invalid_line(
    name: str, entry: SubstrateEntry, base_name: str, base: SubstrateEntry
) -> str | None:
    """``docker-gvisor vs docker: docker-gvisor: no valid result (...)``, in place of any ratio,
    when either side's every rollout failed (None when both have valid results)."""
    failed = [(n, why) for n, e in ((name, entry), (base_name, base)) if (why := e.no_valid_result)]
    if not failed:
        return None
    return f"{name} vs {base_name}: " + "; ".join(f"{n}: {why}" for n, why in failed)


def transport_line(
    name: str, entry: SubstrateEntry, base_name: str, base: SubstrateEntry
) -> str | None:
    """``docker-session vs docker, transport session vs exec: step overhead 0.028x, -1,953
    tax-hours``: the ratio of the mean step overhead, the command's own time left out."""
    if not entry.action or not base.action:
        return None
    speed = _overhead(entry.action, entry.step) / _overhead(base.action, base.step)
    get = ASPECTS["transport"]
    line = (
        f"{name} vs {base_name}, transport {get(entry)} vs {get(base)}: "
        f"step overhead {ratio(speed)}"
    )
    if entry.tax_hours is not None and base.tax_hours is not None:
        line += f", {signed_hours(entry.tax_hours - base.tax_hours, 'tax-hours')}"
    return line


def _overhead(action: Stats, step: Stats | None) -> float:
    """A variant's mean step overhead: the probe's mean, never more than the mean step's."""
    return step_overhead(action.mean, step.mean if step else None)


def pool_line(name: str, entry: SubstrateEntry, base_name: str, base: SubstrateEntry) -> str | None:
    """``docker-pool vs docker, pool of 2 vs none: cold start p50 59.8ms (claim) vs 207ms
    (create) (147ms faster), idle 8.8s per rollout, +2,467 worker-hours``."""
    if not entry.cold_start or not base.cold_start:
        return None
    size, base_size = ASPECTS["pool"](entry), ASPECTS["pool"](base)
    line = (
        f"{name} vs {base_name}, pool of {size} vs {base_size or 'none'}: cold start p50 "
        f"{seconds(entry.cold_start.p50)} ({'claim' if size else 'create'}) vs "
        f"{seconds(base.cold_start.p50)} ({'claim' if base_size else 'create'}) "
        f"{_faster(entry.cold_start.p50, base.cold_start.p50)}, "
        + (
            f"idle {seconds(entry.idle_per_claim_s)} per rollout"
            if not entry.pool or entry.pool.made_by_tool
            else "idle not counted (the user's pool)"
        )
    )
    if entry.worker_hours is not None and base.worker_hours is not None:
        line += f", {signed_hours(entry.worker_hours - base.worker_hours, 'worker-hours')}"
    return line


def reuse_line(
    name: str, entry: SubstrateEntry, base_name: str, base: SubstrateEntry
) -> str | None:
    """``docker-reset vs docker, reset vs fresh: cold start p50 21ms (reset) vs 320ms (create)
    (299ms faster), -80 worker-hours``: a used sandbox reset against a new one."""
    reset = entry.phases.get(RESET_PHASE)
    if reset is None or not entry.cold_start or not base.cold_start:
        return None
    line = (
        f"{name} vs {base_name}, reset vs fresh: cold start p50 {seconds(entry.cold_start.p50)} "
        f"(reset {seconds(reset.p50)}) vs {seconds(base.cold_start.p50)} (create) "
        f"{_faster(entry.cold_start.p50, base.cold_start.p50)}"
    )
    if entry.worker_hours is not None and base.worker_hours is not None:
        line += f", {signed_hours(entry.worker_hours - base.worker_hours, 'worker-hours')}"
    return line


def _faster(now: float, base: float) -> str:
    """``(59.8ms faster)`` or ``(55ms slower)``: the first figure against the second."""
    if now == base:
        return "(the same)"
    return f"({seconds(abs(now - base))} {'faster' if now < base else 'slower'})"


def _by_isolation(name: str, entry: SubstrateEntry, base_name: str, base: SubstrateEntry) -> None:
    """None: summary.isolation.runtime_lines and snapshot_lines make these comparisons, each against
    the variant that differs in that aspect alone (the same transport)."""


#: Per aspect, the line comparing a variant that differs there with the plain one (or None).
LINES: dict[str, Callable[[str, SubstrateEntry, str, SubstrateEntry], str | None]] = {
    "transport": transport_line,
    "pool": pool_line,
    "runtime": _by_isolation,
    "snapshot": _by_isolation,
    "reuse": reuse_line,
}
