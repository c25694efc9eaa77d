"""Reports as older versions of the plugin wrote them."""

from __future__ import annotations

import dataclasses

from pytest_rollout_tax.record import steps_of


def as_schema_1(report: dict, steps_as: str = "columns") -> dict:
    """``report`` as schema ``rollout-tax/1`` had it: steps as columns or as a list of objects.

    ``/1`` columns were ``{"kind": [names], "wall_s": [seconds], "exit_code": [...]}``; before
    them, steps were ``[{"kind", "wall_s", "exit_code"}, ...]``.
    """
    rollouts = []
    for item in report["rollouts"]:
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
    return {**report, "schema": "rollout-tax/1", "rollouts": rollouts}
