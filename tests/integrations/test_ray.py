"""The Ray driver on a real local Ray cluster (ray.init here): N shards as Ray tasks, merged;
a shard that dies is named and the others' merge is still written, marked incomplete."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.workloads import example_modules

from pytest_rollout_tax.cli import main
from pytest_rollout_tax.integrations.ray import EXCLUDES

ray = pytest.importorskip("ray")

#: A conftest that ends the shard named by --crash-shard before it reports (a failed shard),
#: or kills the Ray worker running the shard named by --lose-shard (a lost shard).
CRASHING_CONFTEST = """\
import os
import signal


def pytest_addoption(parser):
    parser.addoption("--crash-shard")
    parser.addoption("--lose-shard")


def pytest_configure(config):
    shard = config.getoption("rollout_shard")
    if shard is not None and shard == config.getoption("--crash-shard"):
        print("shard crashed on purpose", flush=True)
        os._exit(3)
    if shard is not None and shard == config.getoption("--lose-shard"):
        os.kill(os.getppid(), signal.SIGKILL)  # the Ray worker whose task runs this pytest
        os._exit(3)
"""


@pytest.fixture
def workload(tmp_path_factory) -> Path:
    """The example suite in a directory, with a conftest that can fail or lose a shard."""
    root = tmp_path_factory.mktemp("ray-workload")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "conftest.py").write_text(CRASHING_CONFTEST)
    (root / "example_suite").mkdir()
    for name, text in example_modules().items():
        (root / "example_suite" / f"{name}.py").write_text(text)
    return root


@pytest.fixture
def ray_cluster(workload):
    """A local two-CPU Ray cluster, started here, with the workload as its job's working_dir."""
    ray.init(
        num_cpus=2,
        runtime_env={"working_dir": str(workload), "excludes": EXCLUDES},
        include_dashboard=False,
        log_to_driver=False,
    )
    yield
    ray.shutdown()


def ids(report: dict) -> list[str]:
    return sorted(f"{r['substrate']}:{r['test']}" for r in report["rollouts"])


def test_the_ray_command_holds_exactly_the_rollouts_of_a_plain_run(workload, tmp_path):
    """The command as documented, in its own process: it starts a local cluster and ships the
    current directory as the job's working_dir."""
    out, plain = tmp_path / "merged.json", tmp_path / "plain.json"
    args = ["-p", "no:cacheprovider", "example_suite", "--rollout-rounds", "2"]
    subprocess.run(
        [sys.executable, "-m", "pytest", *args, f"--rollout-json={plain}"], cwd=workload, check=True
    )
    command = [sys.executable, "-m", "pytest_rollout_tax", "ray", "--shards", "2", "-o", str(out)]
    done = subprocess.run(
        [*command, "--", *args], cwd=workload, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    merged = json.loads(out.read_text())
    assert ids(merged) == ids(json.loads(plain.read_text()))
    assert sorted({r["shard"] for r in merged["rollouts"]}) == [0, 1]
    assert merged["merge"] == {
        "parts": 2, "shards": 2, "missing": [], "failed": {}, "incomplete": False,
        "forced": False, "alignment": None,
    }  # fmt: skip
    assert "merged 2 report(s) of 2" in done.stdout


def test_a_failed_and_a_lost_shard_are_named_and_the_other_merged(workload, ray_cluster, tmp_path):
    """On a cluster this process started (ray.init): a shard whose pytest dies, then one whose
    Ray worker is killed; each is named and the other shard's merge is written, incomplete."""
    out = tmp_path / "merged.json"
    args = ["-p", "no:cacheprovider", "example_suite", "--rollout-rounds=1", "--crash-shard=1/2"]
    printed = io.StringIO()
    assert main(["ray", "--shards", "2", "-o", str(out), "--", *args], out=printed) == 1
    text = printed.getvalue()
    assert "rollout-tax: shard 1/2 failed: pytest exited 3: shard crashed on purpose" in text
    assert "warning: incomplete: shard 1 of 2 failed" in text
    merged = json.loads(out.read_text())
    assert merged["merge"]["incomplete"] and list(merged["merge"]["failed"]) == ["1"]
    assert {r["shard"] for r in merged["rollouts"]} == {0} and len(merged["rollouts"]) == 1

    args[-1] = "--lose-shard=0/2"
    printed = io.StringIO()
    assert main(["ray", "--shards", "2", "-o", str(out), "--", *args], out=printed) == 1
    assert "rollout-tax: shard 0/2 failed: WorkerCrashedError: " in printed.getvalue()
    assert list(json.loads(out.read_text())["merge"]["failed"]) == ["0"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shards", "2", "--", "x", "--rollout-shard=0/2"], "PYTEST_ARGS: --rollout-shard=0/2: "),
        (["--shards", "0", "--", "x"], "argument --shards: expected a positive integer, got '0'"),
    ],
)
def test_bad_ray_arguments_are_usage_errors_before_any_cluster(argv, message):
    err = io.StringIO()
    assert main(["ray", *argv], err=err) == 4
    assert message in err.getvalue() and len(err.getvalue().splitlines()) == 1


def test_rollouts_recorded_in_ray_tasks_land_in_one_report_each_once(ray_cluster, tmp_path):
    """Record mode in Ray tasks: each task's process writes its own journal in one directory,
    and the report of the directory has every rollout once."""
    runs = tmp_path / "runs"

    @ray.remote
    def agent(task: str) -> list[str]:
        from pytest_rollout_tax import record

        with record("local", out=runs, probes=1) as recorder:
            ids = []
            for _ in range(2):
                with recorder.rollout(task) as sandbox:
                    sandbox.exec(["true"])
                    ids.append(sandbox.id)
        return ids

    sandboxes = [i for ids in ray.get([agent.remote(f"task-{n}") for n in range(3)]) for i in ids]
    status, out = main_output(["summarize", str(runs), "--json", str(tmp_path / "r.json")])
    assert status == 0, out
    report = json.loads((tmp_path / "r.json").read_text())
    assert sorted(r["sandbox_id"] for r in report["rollouts"]) == sorted(sandboxes)
    assert len(set(sandboxes)) == 6 and report["substrates"]["local"]["rollouts"] == 6


def main_output(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return main(argv, out, out), out.getvalue()
