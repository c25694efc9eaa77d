"""The ``isolation`` part: what a sandbox runtime (gVisor's ``runsc``) adds to the agent's own
commands, against the kind's default runtime on the same tests; and prepared snapshots against
preparing every rollout. Formulas: docs/measurement.md#isolation.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..core.record import workload_of
from .aggregate import Row
from .document import Isolation, SubstrateEntry
from .projection import step_overhead

#: The runtime every other runtime is measured against.
DEFAULT_RUNTIME = "runc"


def reference_of(
    name: str, substrates: dict[str, SubstrateEntry], *, snapshot: bool = False
) -> str | None:
    """The substrate ``name`` is compared with: the same kind and transport, without a snapshot,
    on the default runtime (``snapshot``: on its own runtime); the kind's own name first."""
    entry = substrates[name]
    runtime = entry.runtime if snapshot else DEFAULT_RUNTIME
    found = [
        other
        for other, candidate in substrates.items()
        if other != name
        and candidate.kind == entry.kind
        and candidate.transport == entry.transport
        and candidate.runtime == runtime
        and not candidate.snapshot
    ]
    return min(found, key=lambda other: (other != entry.kind, other), default=None)


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


def measure(substrates: dict[str, SubstrateEntry], rows: dict[str, list[Row]]) -> None:
    """Give every substrate on another runtime than the default its ``isolation`` entry: its
    reference and, with one in the run, its excess command time per step, which the projection
    (``projection.tax_hours``, ``decompose``) counts in its tax-hours."""
    for name, entry in substrates.items():
        if entry.runtime is None or entry.runtime == DEFAULT_RUNTIME:
            continue
        reference = reference_of(name, substrates)
        entry.isolation = Isolation(reference)
        base = substrates.get(reference) if reference else None
        if reference is None or base is None or not entry.action or not base.action:
            continue
        per_step, command_ratio, tests = excess_per_step(
            rows[name], rows[reference], entry.action.mean, base.action.mean
        )
        if tests:  # a runtime faster than runc costs no isolation
            entry.isolation = Isolation(reference, max(per_step, 0.0), command_ratio, tests)
