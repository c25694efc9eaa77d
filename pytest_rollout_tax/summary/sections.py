"""The summary's sections: the decision first, then the ranked rows and the lines that qualify
them; made once, so the terminal and the HTML page say the same."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.stats import Stats
from ..fleet import burst
from ..report.document import Report, SubstrateEntry
from ..report.records import Burst, Pool, knee
from ..text.units import PART_LABELS, hours, seconds, share
from . import isolation, training
from .clients import client_lines
from .cost import cost_lines
from .lines import (
    decision_lines,
    divergence_lines,
    environment_lines,
    few_samples_lines,
    header_lines,
    not_run_lines,
    ranked_names,
    spread_line,
)
from .variants import comparison_lines
from .verdicts import judge_of


@dataclass(frozen=True)
class Summary:
    """A report's summary, made once (:func:`summarize`) and laid out by the terminal
    (``summary.terminal``) and the page alike: each section a list of plain lines, except
    ``rows``, the ranked (name, entry) pairs the table shows."""

    #: The cheapest substrate, by how much, beyond the noise or not; the whole ranking.
    decision: list[str]
    #: What the hours count: the scale, think time, command time.
    header: list[str]
    rows: list[tuple[str, SubstrateEntry]]
    #: Where each substrate's hours go, in shares.
    shares: list[str]
    #: What the projection costs in dollars where a substrate has a price, and where it goes.
    dollars: list[str]
    #: The environment the figures were measured in.
    notes: list[str]
    #: The spread, and variants against their plain substrate: transport, pool, runtime,
    #: snapshot.
    comparisons: list[str]
    #: Errors in the run itself (a sandbox shared by rollouts).
    warnings: list[str]
    #: Bursts, warm pools and the fleet.
    fleet: list[str]
    #: What qualifies the figures: cost, the tax cap, failures, divergence, substrates that ran
    #: nothing, sample sizes, control planes, clients.
    caveats: list[str]
    #: What the trainer waits for (``--rollout-train``): each substrate's step, its
    #: stragglers, the ranking by the step.
    training: list[str] = field(default_factory=list)
    #: Ranked by dollars (``--rollout-rank-by=cost``): the table has a dollars column.
    by_cost: bool = False

    def lines(self) -> list[str]:
        """Every line but the table's, in the order they print around it."""
        return [*self.decision, *self.header, *self.after_table()]

    def after_table(self) -> list[str]:
        sections = (
            self.shares, self.training, self.dollars, self.notes, self.comparisons,
            self.warnings, self.fleet,
        )  # fmt: skip
        return [line for section in (*sections, self.caveats) for line in section]


def summarize(report: Report) -> Summary:
    """The summary of ``report``: every section, once."""
    substrates = report.substrates
    judge = judge_of(report)
    spread = spread_line(report)
    caveats = [
        line
        for name, sub in substrates.items()
        for line in (tax_cap_note(name, sub), success_line(name, sub))
        if line is not None
    ]
    caveats += divergence_lines(substrates)
    caveats += not_run_lines(report.not_run)
    caveats += few_samples_lines(substrates)
    caveats += control_plane_lines(report)
    caveats += client_lines(report)
    lead = [line for line in (training.decision_line(report),) if line]
    differs = [line for line in (training.differs_line(report),) if line]
    ranked = [line for line in (training.ranking_line(report),) if line]
    return Summary(
        decision=[*lead, *decision_lines(report), *differs],
        header=[*header_lines(report), *training.header_lines(report)],
        rows=[(name, substrates[name]) for name in ranked_names(report)],
        shares=[line for name, sub in substrates.items() if (line := shares_line(name, sub))],
        dollars=cost_lines(report, ranked_names(report)),
        notes=environment_lines(report),
        comparisons=[
            *([spread] if spread else []),
            *comparison_lines(substrates, judge),
            *isolation.runtime_lines(substrates, judge),
            *isolation.snapshot_lines(substrates, judge),
        ],
        warnings=shared_sandbox_lines(report),
        fleet=[line for name, sub in substrates.items() for line in fleet_lines(name, sub)],
        caveats=caveats,
        training=[*training.substrate_lines(report), *ranked],
        by_cost=report.projection.rank_by == "cost",
    )


def shared_sandbox_lines(report: Report) -> list[str]:
    """An error line per sandbox that more than one rollout got."""
    return [
        f"rollout-tax: error: {shared['substrate']}: {len(shared['rollouts'])} rollouts got "
        f"the same sandbox {shared['sandbox_id']}: {', '.join(shared['rollouts'])}"
        for shared in report.shared_sandboxes
    ]


def success_line(name: str, entry: SubstrateEntry) -> str | None:
    """The share of rollouts that succeeded and why the others failed (None when none did),
    and beside it the share the infrastructure failed, by cause and reason. A reason the
    decision line gave (a substrate with no valid result) is not said again."""
    said = entry.top_reason if entry.no_valid_result else None
    parts = []
    if entry.failures:
        reasons = _reasons(entry.failure_reasons, said) or ": the reason above"
        success = entry.success_rate or 0.0
        unbound = f" ({entry.unbound} unbound)" if entry.unbound else ""
        parts.append(f"{success:.0%} of rollouts succeeded{unbound}; failures{reasons}")
    if infra := entry.infra_failed:
        causes = ", ".join(f"{n} {cause}" for cause, n in infra.causes.items())
        reasons = _reasons(infra.reasons, said)
        parts.append(
            f"{share(infra.rate)} infra_failed ({infra.rollouts} of {entry.rollouts}: {causes}; "
            f"not the workload's failures){reasons}"
        )
    return f"{name}: {'; '.join(parts)}" if parts else None


def _reasons(reasons: dict[str, int], said: str | None) -> str:
    """``: 2x REASON; 1x OTHER``, without the reason ``said`` already (nothing if none is left)."""
    left = "; ".join(f"{n}x {why}" for why, n in reasons.items() if why != said)
    return f": {left}" if left else ""


def fleet_lines(name: str, entry: SubstrateEntry) -> list[str]:
    """The burst, warm-pool and fleet lines of one substrate (none when not measured)."""
    lines = []
    if limited := entry.rate_limited:
        said = "; ".join(limited.messages)
        lines.append(
            f"{name}: {limited.rollouts} rollout(s) rate_limited: the provider's limiter "
            f"refused the create (not a sandbox failure): {said}"
        )
    if entry.burst:
        lines.append(burst_line(name, entry.burst))
    if launches := entry.launch_types:
        parts = [
            f"{kind} {t.rollouts} ({t.share:.0%}), p50 {_p50(t.cold_start)}"
            for kind, t in launches.items()
        ]
        lines.append(f"{name} cold start by launch type: {'; '.join(parts)}")
    pool = entry.pool
    if pool and not pool.made_by_tool:
        lines.append(users_pool_line(name, pool))
    elif pool:
        claims = pool.claims
        created = pool.creations
        line = (
            f"{name} warm pool of {pool.size}"
            + (f" x {pool.pools} processes" if pool.pools > 1 else "")
            + f": {pool.hits}/{claims} claims found a sandbox ready; claim p50 "
            f"{seconds(entry.cold_start.p50 if entry.cold_start else None)} vs pool creation "
            f"p50 {_p50(created)}; "
            f"idle {seconds(pool.idle_sandbox_s)} in all"
        )
        if claims and created and entry.cold_start:
            idle = pool.idle_sandbox_s / claims
            line += "; " + pool_saving(entry.cold_start.mean, created.mean, idle)
        if pool.creation_failures:
            reasons = "; ".join(f"{n}x {why}" for why, n in pool.failure_reasons.items())
            line += f"; {pool.creation_failures} pool creation(s) failed: {reasons}"
        lines.append(line)
    fleet = entry.projected.fleet
    if fleet:
        lines.append(
            f"{name} fleet of {fleet.workers:,} workers: {hours(fleet.wall_clock_hours)} "
            f"wall-clock hours, {hours(fleet.worker_hours)} worker-hours (cold start "
            f"{seconds(fleet.cold_start_s)} from {fleet.cold_start_from})"
        )
    return lines


def pool_saving(claim_s: float, create_s: float, idle_s: float) -> str:
    """What a warm pool does per rollout, from the means: the cold start a claim saves (or
    costs, when claiming is slower than creating) and the idle time it adds."""
    means = f"(means: claim {seconds(claim_s)}, creation {seconds(create_s)})"
    saved = create_s - claim_s
    if saved < 0:
        return (
            f"per rollout a claim costs {seconds(-saved)} more cold start than a creation "
            f"{means} and adds {seconds(idle_s)} idle: it only costs"
        )
    verdict = "pays for itself" if saved > idle_s else "costs more than it saves"
    return (
        f"per rollout a claim saves {seconds(saved)} of cold start {means} and adds "
        f"{seconds(idle_s)} idle: it {verdict}"
    )


def users_pool_line(name: str, pool: Pool) -> str:
    """A pool the tool did not make (the user's SandboxWarmPool): its idle time is not counted."""
    return (
        f"{name} warm pool of {pool.size} is the user's, not made by the tool: its idle time "
        f"is not counted, in the summary or the projection ({pool.hits}/"
        f"{pool.claims} claims found a sandbox ready)"
    )


def burst_line(name: str, levels: Sequence[Burst]) -> str:
    """One line of a substrate's burst levels, naming the knee."""
    parts = []
    for level in levels:
        part = f"{level.concurrency}: p50 {_p50(level.cold_start)}"
        if level.creates_per_s is not None:
            part += f", {level.creates_per_s:.3g} creates/s"
        if level.failures:
            reasons = "; ".join(f"{n}x {why}" for why, n in level.failure_reasons.items())
            part += f", {level.failures} failed ({reasons})"
        if level.rate_limited:
            part += (
                f"; {level.rate_limited} create(s) rate-limited: this level hit the "
                "provider's limiter, not the sandbox"
            )
        parts.append(part)
    line = f"{name} burst cold start at " + " | ".join(parts)
    if len(levels) > 1:
        found = knee(levels)
        line += (
            f"; knee at {found} (p50 > {burst.KNEE_FACTOR:g}x the lowest level's)"
            if found
            else f"; no knee (p50 within {burst.KNEE_FACTOR:g}x of the lowest level's)"
        )
    return line


def control_plane_lines(report: Report) -> list[str]:
    """Where the client ran, each control plane's round trip, and which are local stand-ins."""
    planes = {n: s.control_plane for n, s in report.substrates.items() if s.control_plane}
    if not planes:
        return []
    machine = report.machine
    where = ", ".join(
        str(part)
        for part in (
            machine.get("platform"),
            f"{machine['cpu_count']} CPUs" if machine.get("cpu_count") else None,
            machine.get("ci"),
        )
        if part
    )
    by_endpoint: dict[str, list[str]] = {}
    for name, plane in planes.items():
        rtt = seconds(plane.rtt_s) if plane.rtt_s is not None else "failed"
        by_endpoint.setdefault(plane.endpoint, []).append(f"{name} {rtt}")
    trips = "; ".join(f"{', '.join(named)} ({endpoint})" for endpoint, named in by_endpoint.items())
    lines = [f"control-plane round trip from this client ({where or 'unknown machine'}): {trips}"]
    for name, plane in planes.items():
        if plane.connection == "per-rollout":
            lines.append(
                f"{name}: each rollout opened its own connection: its cold start includes "
                "connection setup (reuse_connection=false)"
            )
        elif plane.connection == "reused":
            lines.append(
                f"{name}: rollouts reused one warm connection: no cold start after the first "
                "includes connection setup (reuse_connection=true)"
            )
        if plane.stand_in:
            kind = report.substrates[name].kind or name
            lines.append(
                f"warning: {name}'s figures come from a local stand-in at {plane.endpoint}, "
                f"not the real {kind} service"
            )
    return lines


def shares_line(name: str, entry: SubstrateEntry) -> str | None:
    """Where a substrate's worker-hours go, in shares, e.g. ``docker hours: cold start 10%,
    overhead 84%, command 3.6%, think 0%, teardown 2.7% (tax 97%)``."""
    parts, total = entry.projected.decomposition, entry.worker_hours
    if not parts or not total or entry.no_valid_result:
        return None
    terms = ", ".join(
        f"{PART_LABELS.get(part, part)} {share(value / total)}"
        for part, value in parts.to_dict().items()
        if part != "idle" or value  # a pool's idle time, where there is a pool
    )
    tax = entry.tax_hours
    return f"{name} hours: {terms}" + (f" (tax {share(tax / total)})" if tax else "")


def tax_cap_note(name: str, entry: SubstrateEntry) -> str | None:
    """The note for a substrate whose no-op probe is slower than its mean step, else None."""
    action, step = entry.action, entry.step
    if not action or not step or action.mean <= step.mean:
        return None
    return (
        f"note: {name}'s no-op probe ({seconds(action.mean)}) is slower than its mean step "
        f"({seconds(step.mean)}); its per-step tax is capped at the step"
    )


def _p50(stats: Stats | None) -> str:
    return seconds(stats.p50 if stats else None)
