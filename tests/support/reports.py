"""Reports for tests: small synthetic runs, and reports as older versions of the plugin wrote
them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from pytest_rollout_tax.core.record import Rollout, Step, steps_of
from pytest_rollout_tax.report.aggregate import Aggregate
from pytest_rollout_tax.report.build import Fleet, summarize
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Scale


def build_report(
    rollouts: Iterable[Rollout],
    scale: Scale,
    *,
    plugin_version: str,
    machine: dict,
    commit: dict | None,
    fleet: Fleet | None = None,
) -> Report:
    """The whole report of ``rollouts``, its ``rollouts[]`` a list."""
    report = summarize(
        Aggregate.of(rollouts),
        scale,
        plugin_version=plugin_version,
        machine=machine,
        commit=commit,
        fleet=fleet,
    )
    return dataclasses.replace(report, rollouts=list(report.rollouts))


#: Cold starts of a small run, in seconds.
COLD = [1.00, 1.21, 0.93, 1.08, 1.15, 0.97, 1.04, 1.12]


def rollouts(substrate: str, cold: list[float], factor: float = 1.0) -> list[Rollout]:
    """One rollout per cold start; its other phases are fixed fractions of it, times factor."""
    made = []
    for index, seconds in enumerate(cold, start=1):
        c = seconds * factor
        made.append(
            Rollout(
                test=f"t.py::test_x[{substrate}-{index}]",
                substrate=substrate,
                round=index,
                outcome="passed",
                cold_start_s=c,
                teardown_s=c / 2,
                trajectory_s=c * 2,
                steps=[Step("exec", c / 10, 0), Step("read_file", c / 20)],
                action_probes_s=[c / 100, c / 90],
            )
        )
    return made


def report(*groups: list[Rollout], scale: Scale | None = None) -> Report:
    """The report of these rollouts, on a fixed machine and with no commit."""
    return build_report(
        [r for group in groups for r in group],
        scale or Scale(),
        plugin_version="test",
        machine={"cpu_count": 2, "python": "3.11", "platform": "x", "hostname_sha256": "ab"},
        commit=None,
    )


def as_schema_1(report: Report, steps_as: str = "columns") -> dict:
    """``report`` as schema ``rollout-tax/1`` had it: steps as columns or as a list of objects.

    ``/1`` columns were ``{"kind": [names], "wall_s": [seconds], "exit_code": [...]}``; before
    them, steps were ``[{"kind", "wall_s", "exit_code"}, ...]``.
    """
    data = report.to_dict()
    rollouts = []
    for item in data["rollouts"]:
        steps = list(steps_of(item.get("steps")))
        if steps_as == "columns":
            stored = {
                "kind": [step.kind for step in steps],
                "wall_s": [step.wall_s for step in steps],
                "exit_code": [step.exit_code for step in steps],
            }
        else:
            stored = [dataclasses.asdict(step) for step in steps]
        rollouts.append({**item, "steps": stored})
    return {**data, "schema": "rollout-tax/1", "rollouts": rollouts}


def rollout(substrate, cold, step=0.01, outcome="passed", error=None, steps=2, planned=None):
    """One rollout of `steps` equal steps; its phases, teardown and probes follow from `cold`."""
    return Rollout(
        test=f"t.py::test[{substrate}-1]",
        substrate=substrate,
        outcome=outcome,
        cold_start_s=cold,
        phases={"create": cold / 2, "first_exec": cold / 2} if cold else {},
        teardown_s=0.5 if cold else None,
        trajectory_s=cold + 1 if cold else None,
        steps=[Step("exec", step, 0)] * steps,
        action_probes_s=[step / 2] * 3 if cold else [],
        error=error,
        planned_steps=planned,
    )
