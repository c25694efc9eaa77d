"""The example suite and the README's workload, unchanged, on every substrate and transport.

docker runs on the real engine; k8s, e2b and ec2 run through their official SDKs against the
local stand-ins of tests/support (their timings are not those of the real services).
"""

import json
import math

import pytest
from support.workloads import example_modules, readme_workload


def test_the_example_suite_and_the_readme_workload_pass(pytester, selected_substrate):
    pytester.makepyfile(**example_modules(), test_readme=readme_workload())
    result = pytester.runpytest(
        *selected_substrate.args, "--rollout-rounds=1", "--rollout-json=r.json"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*= rollout tax =*"])
    report = json.loads((pytester.path / "r.json").read_text())
    (summary,) = report["substrates"].values()
    assert (summary["rollouts"], summary["failures"]) == (4, 0)
    steps = {r["test"].split("::")[-1]: len(r["steps"]["wall_us"]) for r in report["rollouts"]}
    assert steps["test_agent_loop[" + report["rollouts"][0]["substrate"] + "-1]"] == 150
    assert all(r["cold_start_s"] and r["teardown_s"] for r in report["rollouts"])
    parts = summary["decomposition"]  # worker-hours, broken down, add up; tax is part of them
    assert math.fsum(parts.values()) == pytest.approx(summary["worker_hours"], rel=1e-3)
    assert summary["tax_hours"] == pytest.approx(
        parts["cold_start"] + parts["overhead"] + parts["teardown"] + parts["idle"], rel=1e-3
    )
    assert 0 < summary["tax_hours"] <= summary["worker_hours"]
    assert min(parts.values()) >= 0
