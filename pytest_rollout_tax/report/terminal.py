"""The terminal summary: one table row per substrate, then the lines that qualify it."""

from __future__ import annotations

import textwrap

from tabulate import tabulate

from ..core.stats import min_samples
from ..fleet import burst
from . import isolation
from .clients import client_lines
from .units import PART_LABELS, hours, ratio, seconds, share

#: The summary fits a terminal this wide.
WIDTH = 100

HEADERS = (
    "substrate",
    "rollouts",
    "failed",
    "cold start\np50/p95",
    "action\np50/p95",
    "step\np50",
    "teardown\np50",
    "worker\nhours",
    "tax\nhours",
)


def render_summary(report: dict) -> list[str]:
    """The lines of the end-of-session summary: one table row per substrate, then notes."""
    lines = textwrap.wrap(headline(report), width=WIDTH)
    notes = []
    rows = []
    for name, sub in report["substrates"].items():
        rows.append(
            [
                name,
                sub["rollouts"],
                sub["failures"],
                _pair(sub["cold_start"]),
                _pair(sub["action"]),
                _stat(sub["step"], "p50"),
                _stat(sub["teardown"], "p50"),
                hours(sub["worker_hours"]),
                hours(sub["tax_hours"]),
            ]
        )
    lines += tabulate(
        rows,
        headers=HEADERS,
        tablefmt="simple",
        colalign=("left",) + ("right",) * (len(HEADERS) - 1),
    ).splitlines()
    for name, sub in report["substrates"].items():
        if (shares := shares_line(name, sub)) is not None:
            notes.append(shares)
    if (spread := spread_line(report)) is not None:
        notes.append(spread)
    notes += variant_lines(report["substrates"])
    notes += isolation.runtime_lines(report["substrates"])
    notes += isolation.snapshot_lines(report["substrates"])
    notes += shared_sandbox_lines(report)
    for name, sub in report["substrates"].items():
        notes += fleet_lines(name, sub)
    for name, sub in report["substrates"].items():
        notes += [
            line
            for line in (cost_line(name, sub), tax_cap_note(name, sub), success_line(name, sub))
            if line is not None
        ]
        notes += few_samples_lines(name, sub)
    notes += control_plane_lines(report)
    notes += client_lines(report)
    for note in notes:
        lines += textwrap.wrap(note, width=WIDTH, subsequent_indent="    ")
    return lines


def headline(report: dict) -> str:
    """What the hours are projected for, and with which think time."""
    projection = report["projection"]
    think = projection["think_time_s"]
    source = projection.get("think_time_source", "option")
    return (
        f"hours projected for {projection['rollouts']:,} rollouts x {projection['steps']} steps"
        + (f" with {think_time(think, source)} per step" if think else "")
        + "; tax = substrate overhead only"
    )


def spread_line(report: dict) -> str | None:
    """The spread between substrates (None with fewer than two)."""
    spread = report["spread"]
    if not spread:
        return None
    projection = report["projection"]
    think = projection["think_time_s"]
    source = projection.get("think_time_source", "option")
    return (
        f"spread: cold start p50 {ratio(spread['cold_start_p50'])} "
        f"({spread['slowest']} vs {spread['fastest']}), "
        f"worker-hours {ratio(spread['worker_hours'])}"
        + (f" at {think_time(think, source)}/step" if think else "")
    )


def shared_sandbox_lines(report: dict) -> list[str]:
    """An error line per sandbox that more than one rollout got."""
    return [
        f"rollout-tax: error: {shared['substrate']}: {len(shared['rollouts'])} rollouts got "
        f"the same sandbox {shared['sandbox_id']}: {', '.join(shared['rollouts'])}"
        for shared in report.get("shared_sandboxes") or []
    ]


def cost_line(name: str, entry: dict) -> str | None:
    """The projected cost of a substrate that knows its price (``ec2.price_per_hour``)."""
    if entry.get("cost_usd") is None:
        return None
    return (
        f"{name}: the projected worker-hours cost ${entry['cost_usd']:,.0f} "
        f"at ${entry['price_per_hour']:g} per sandbox-hour"
    )


def success_line(name: str, entry: dict) -> str | None:
    """The share of rollouts that succeeded and why the others failed (None when none did)."""
    if not entry["failures"]:
        return None
    reasons = "; ".join(f"{n}x {why}" for why, n in entry["failure_reasons"].items())
    success = 1 - entry["failures"] / entry["rollouts"]
    return f"{name}: {success:.0%} of rollouts succeeded; failures: {reasons}"


def think_time(think: float, source: str) -> str:
    """``2s think time``, or ``2s recorded think time`` when the trajectories recorded it."""
    return f"{seconds(think)} {'recorded ' if source == 'recorded' else ''}think time"


def fleet_lines(name: str, entry: dict) -> list[str]:
    """The burst, warm-pool and fleet lines of one substrate (none when not measured)."""
    lines = []
    if entry.get("burst"):
        lines.append(burst_line(name, entry["burst"]))
    pool = entry.get("pool")
    if pool:
        claims = pool["hits"] + pool["misses"]
        created = pool["creations"]
        line = (
            f"{name} warm pool of {pool['size']}"
            + (f" x {pool['pools']} processes" if pool["pools"] > 1 else "")
            + f": {pool['hits']}/{claims} claims found a sandbox ready; claim p50 "
            f"{_stat(entry['cold_start'], 'p50')} vs pool creation p50 {_stat(created, 'p50')}; "
            f"idle {seconds(pool['idle_sandbox_s'])} in all"
        )
        if claims and created and entry["cold_start"]:
            saved = created["mean"] - entry["cold_start"]["mean"]
            idle = pool["idle_sandbox_s"] / claims
            verdict = "pays for itself" if saved > idle else "costs more than it saves"
            line += (
                f"; per rollout it saves {seconds(max(saved, 0.0))} of cold start and adds "
                f"{seconds(idle)} idle: it {verdict}"
            )
        if pool["creation_failures"]:
            reasons = "; ".join(f"{n}x {why}" for why, n in pool["failure_reasons"].items())
            line += f"; {pool['creation_failures']} pool creation(s) failed: {reasons}"
        lines.append(line)
    fleet = entry.get("fleet")
    if fleet:
        lines.append(
            f"{name} fleet of {fleet['workers']:,} workers: {hours(fleet['wall_clock_hours'])} "
            f"wall-clock hours, {hours(fleet['worker_hours'])} worker-hours (cold start "
            f"{seconds(fleet['cold_start_s'])} from {fleet['cold_start_from']})"
        )
    return lines


def burst_line(name: str, levels: list[dict]) -> str:
    """One line of a substrate's burst levels, naming the knee."""
    parts = []
    for level in levels:
        part = f"{level['concurrency']}: p50 {_stat(level['cold_start'], 'p50')}"
        if level["creates_per_s"] is not None:
            part += f", {level['creates_per_s']:.3g} creates/s"
        if level["failures"]:
            reasons = "; ".join(f"{n}x {why}" for why, n in level["failure_reasons"].items())
            part += f", {level['failures']} failed ({reasons})"
        parts.append(part)
    line = f"{name} burst cold start at " + " | ".join(parts)
    if len(levels) > 1:
        found = burst.knee(levels)
        line += (
            f"; knee at {found} (p50 > 2x the lowest level's)"
            if found
            else "; no knee (p50 within 2x of the lowest level's)"
        )
    return line


def control_plane_lines(report: dict) -> list[str]:
    """Where the client ran, each control plane's round trip, and which are local stand-ins."""
    planes = {
        n: s["control_plane"] for n, s in report["substrates"].items() if s.get("control_plane")
    }
    if not planes:
        return []
    machine = report.get("machine") or {}
    where = ", ".join(
        str(part)
        for part in (
            machine.get("platform"),
            f"{machine['cpu_count']} CPUs" if machine.get("cpu_count") else None,
            machine.get("ci"),
        )
        if part
    )
    trips = "; ".join(
        f"{name} {seconds(plane['rtt_s']) if plane['rtt_s'] is not None else 'failed'} "
        f"({plane['endpoint']})"
        for name, plane in planes.items()
    )
    lines = [f"control-plane round trip from this client ({where or 'unknown machine'}): {trips}"]
    for name, plane in planes.items():
        if plane["stand_in"]:
            kind = report["substrates"][name].get("kind") or name
            lines.append(
                f"warning: {name}'s figures come from a local stand-in at {plane['endpoint']}, "
                f"not the real {kind} service"
            )
    return lines


#: The percentiles the summary table shows, per metric (the highest first).
SHOWN_PERCENTILES = {
    "cold_start": ("p95", "p50"),
    "action": ("p95", "p50"),
    "step": ("p50",),
    "teardown": ("p50",),
}


def few_samples_lines(name: str, entry: dict) -> list[str]:
    """A warning per metric whose shown percentile comes from too few samples."""
    lines = []
    for metric, shown in SHOWN_PERCENTILES.items():
        samples = entry[metric]["n"] if entry.get(metric) else 0
        if metric != "cold_start" and not samples:
            continue  # not measured (no probes): shown as "-"
        short = next((q for q in shown if samples < min_samples(q)), None)
        if short is not None:
            label = "cold-start" if metric == "cold_start" else metric
            lines.append(
                f"warning: {name} has {samples} {label} sample(s); a {short} needs "
                f"{min_samples(short)} or more (run more rounds)"
            )
    return lines


def shares_line(name: str, entry: dict) -> str | None:
    """Where a substrate's worker-hours go, in shares, e.g. ``docker hours: cold start 10%,
    overhead 84%, command 3.6%, think 0%, teardown 2.7% (tax 97%)``."""
    parts, total = entry.get("decomposition"), entry.get("worker_hours")
    if not parts or not total:
        return None
    terms = ", ".join(
        f"{PART_LABELS.get(part, part)} {share(value / total)}"
        for part, value in parts.items()
        if part != "idle" or value  # a pool's idle time, where there is a pool
    )
    tax = entry.get("tax_hours")
    return f"{name} hours: {terms}" + (f" (tax {share(tax / total)})" if tax else "")


def variant_lines(substrates: dict[str, dict]) -> list[str]:
    """For each kind run as several variants (e.g. ``docker`` and ``docker-session``), each
    variant against the kind's baseline: its ``exec`` transport, else the first name."""
    by_kind: dict[str, list[str]] = {}
    for name, entry in substrates.items():
        if entry.get("kind"):
            by_kind.setdefault(entry["kind"], []).append(name)
    lines = []
    for names in by_kind.values():
        exec_names = [n for n in names if substrates[n].get("transport") == "exec"] or names
        base = substrates[baseline := exec_names[0]]
        for name in names:
            entry = substrates[name]
            if name == baseline or not entry["action"] or not base["action"]:
                continue
            if "isolation" in entry:  # another runtime: isolation.runtime_lines compares it
                continue
            speed = entry["action"]["p50"] / base["action"]["p50"]
            line = f"{name} vs {baseline}: action p50 {ratio(speed)}"
            if entry["tax_hours"] is not None and base["tax_hours"] is not None:
                line += f", tax-hours {entry['tax_hours'] - base['tax_hours']:+,.0f}"
            lines.append(line)
    return lines


def tax_cap_note(name: str, entry: dict) -> str | None:
    """The note for a substrate whose no-op probe is slower than its mean step, else None."""
    action, step = entry.get("action"), entry.get("step")
    if not action or not step or action["mean"] <= step["mean"]:
        return None
    return (
        f"note: {name}'s no-op probe ({seconds(action['mean'])}) is slower than its mean step "
        f"({seconds(step['mean'])}); its per-step tax is capped at the step"
    )


def _pair(stats: dict | None) -> str:
    return f"{seconds(stats['p50'])}/{seconds(stats['p95'])}" if stats else "-"


def _stat(stats: dict | None, name: str) -> str:
    return seconds(stats[name]) if stats else "-"
