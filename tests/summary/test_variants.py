"""A reset variant against its fresh one, from a real run on bwrap: compared as a pool is (its
own line, cold start and worker-hours, the noise verdict), never as a transport."""

from __future__ import annotations

import json

from support.summary_runs import joined, run_pytest

from pytest_rollout_tax.text.units import seconds

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=3, rounds=6)
def test_steps(sandbox):
    for _ in range(3):
        assert sandbox.exec("echo hi > f && cat f").ok
"""


def test_a_reset_variant_is_compared_with_its_fresh_one_with_the_noise_verdict(
    bwrap_ready, tmp_path
):
    (tmp_path / "test_work.py").write_text(WORKLOAD)
    code, lines = run_pytest(tmp_path, "--substrate=bwrap,bwrap-reset", "--rollout-json=r.json")
    assert code == 0, "\n".join(lines)
    text = joined(lines)
    report = json.loads((tmp_path / "r.json").read_text())
    reset, fresh = report["substrates"]["bwrap-reset"], report["substrates"]["bwrap"]
    assert reset["phases"]["reset"]["n"] == 5  # every rollout but the first reused a sandbox
    assert "reset" not in fresh["phases"]
    p50 = seconds(reset["cold_start"]["p50"])
    assert (
        f"bwrap-reset vs bwrap, reset vs fresh: cold start p50 {p50}"
        f" (reset {seconds(reset['phases']['reset']['p50'])}) vs "
        f"{seconds(fresh['cold_start']['p50'])} (create)" in text
    )
    line = text[text.index("bwrap-reset vs bwrap, reset vs fresh") :]
    assert "worker-hours; " in line and "the noise" in line.split("worker-hours; ", 1)[1]
    assert "bwrap-reset vs bwrap, transport" not in text
