"""Rollout records with a time line (epoch stamps, steps that know when they began), for the
telemetry tests."""

from __future__ import annotations

from pytest_rollout_tax.core.record import Rollout, Step

T0 = 1_800_000_000.0


def record(**fields) -> dict:
    base = dict(
        test="test_x[docker-1]",
        substrate="docker",
        kind="docker",
        transport="exec",
        outcome="passed",
        sandbox_id="c0ffee",
        phases={"create": 0.1, "start": 0.2, "first_exec": 0.05},
        steps=[Step("exec", 0.010, 0, 3, at_s=0.40), Step("write_file", 0.020, at_s=0.45)],
        epoch={"create": T0, "ready": T0 + 0.35, "teardown": T0 + 0.6, "gone": T0 + 0.7},
    )
    return Rollout(**(base | fields)).to_dict()
