"""The example suite and the README's workload, unchanged, on every substrate and transport.

docker runs on the real engine; k8s, e2b and ec2 run through their official SDKs against the
local stand-ins of tests/support (their timings are not those of the real services).
"""

import json
import math

import pytest
from support.ec2_moto import substrate_opt_args
from support.workloads import example_modules, readme_workload

SUBSTRATES = ["local", "docker", "k8s", "e2b", "ec2"]
SESSIONS = ["local", "docker", "k8s", "ec2"]  # e2b keeps its SDK's transport


@pytest.fixture(params=[*SUBSTRATES, *(f"{name}-session" for name in SESSIONS)])
def substrate_args(request) -> list[str]:
    """Command-line arguments that select one substrate and transport, set up for its stand-in."""
    name, _, transport = request.param.partition("-")
    args = [f"--substrate={name}"]
    if transport:
        args.append(f"--substrate-opt={name}.transport={transport}")
    if name == "docker":
        request.getfixturevalue("sandbox_image")
    elif name == "k8s":
        kubeconfig = request.getfixturevalue("k8s_kubeconfig")
        args.append(f"--substrate-opt=k8s.kubeconfig={kubeconfig}")
    elif name == "e2b":
        request.getfixturevalue("e2b_env")
    elif name == "ec2":
        args += substrate_opt_args(request.getfixturevalue("ec2_opts"))
    return args


def test_the_example_suite_and_the_readme_workload_pass(pytester, substrate_args):
    pytester.makepyfile(**example_modules(), test_readme=readme_workload())
    result = pytester.runpytest(*substrate_args, "--rollout-rounds=1", "--rollout-json=r.json")
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
