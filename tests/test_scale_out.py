"""docs/scale-out.md's recipes as written: the Kubernetes Indexed Job's pod command, run once
per completion index (on a quick workload in example_suite/), merges into exactly the rollouts
of one run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml
from support.workloads import ROOT

from pytest_rollout_tax.cli import main

PAGE = ROOT / "docs" / "scale-out.md"
#: Six rollouts and a plain test, quick to run.
QUICK = """\
import pytest


@pytest.mark.trajectory(steps=2, rounds=3)
def test_a(sandbox):
    sandbox.exec("true")


@pytest.mark.trajectory(rounds=3)
def test_b(sandbox):
    sandbox.write_file("x", "y")


def test_plain():
    pass
"""


def indexed_job() -> dict:
    """The Job manifest the page documents."""
    block = PAGE.read_text().split("<!-- indexed-job -->", 1)[1]
    return yaml.safe_load(block.split("```yaml\n", 1)[1].split("```", 1)[0])


def ids(report: dict) -> list[str]:
    return sorted(f"{r['substrate']}:{r['test']}" for r in report["rollouts"])


def test_the_indexed_job_pod_command_runs_each_shard_once(tmp_path):
    job = indexed_job()
    assert job["spec"]["completionMode"] == "Indexed"
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item["value"] for item in container["env"]}
    completions = job["spec"]["completions"]
    assert env["SHARDS"] == str(completions)
    workload, results = tmp_path / "workload", tmp_path / "results"
    (workload / "example_suite").mkdir(parents=True)  # a quick stand-in for the example suite
    (workload / "example_suite" / "test_quick.py").write_text(QUICK)
    (workload / "pytest.ini").write_text(
        "[pytest]\nrollout_probes = 1\naddopts = -p no:cacheprovider\n"
    )
    results.mkdir()
    path = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), os.environ.get("PATH")]))
    for index in range(completions):
        pod = (
            os.environ
            | env
            | {
                "JOB_COMPLETION_INDEX": str(index),
                "START_AT": f"{time.time():.3f}",  # the manifest's time is an example
                "RESULTS": str(results),
                "PATH": path,
            }
        )
        subprocess.run(
            container["command"] + container["args"], cwd=workload, env=pod, check=True,
            capture_output=True,
        )  # fmt: skip
    reports = sorted(results.glob("shard-*.json"))
    assert [p.name for p in reports] == [f"shard-{k}.json" for k in range(completions)]
    merged = tmp_path / "merged.json"
    assert main(["merge", *map(str, reports), "-o", str(merged)]) == 0
    assert ids(json.loads(merged.read_text())) == [  # one run's rollouts, each once
        f"local:example_suite/test_quick.py::{test}[local-{r}]"
        for test in ("test_a", "test_b")
        for r in (1, 2, 3)
    ]
    shards = [json.loads(p.read_text())["client"] for p in reports]
    assert [c["shard"]["index"] for c in shards] == list(range(completions))
    assert all(c["start_at"] is not None for c in shards)
