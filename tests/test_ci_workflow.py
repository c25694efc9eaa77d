"""The GitHub Actions workflow of docs/gating.md, run as a runner runs it: its shell steps, in
a fresh checkout of a repository that holds only the documented workload, first as a push to
main (the baseline saved, then cached), then as a pull request (restored, then gated).

The ``pip install`` step is the one not run: it would test a release, not this checkout (which
is on PYTHONPATH); the extras it names must exist. ``ensure-docker`` installs nothing where an
engine already answers, which is the case here (a test that cannot reach one skips)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "gating.md"
#: The one expression the workflow's shell steps use, and what it gives on each event.
SAVE_ON_MAIN = re.compile(r"\$\{\{ github\.ref == 'refs/heads/main' && '([^']*)' \|\| '' \}\}")


def documented() -> tuple[dict, str, str]:
    """The workflow, and the workload's path and code, as docs/gating.md shows them."""
    text = DOC.read_text().split("## In GitHub Actions", 1)[1]
    found = re.search(r"<!-- ci-workload: (\S+) -->\n```python\n(.*?)```", text, re.S)
    assert found, "docs/gating.md shows no <!-- ci-workload: PATH --> block"
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    return yaml.safe_load(block), found.group(1), found.group(2)


def engine_answers() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    probe = [docker, "version", "--format", "{{.Server.Version}}"]
    return subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0


def expand(script: str, ref: str) -> str:
    script = SAVE_ON_MAIN.sub(lambda m: m.group(1) if ref == "refs/heads/main" else "", script)
    assert "${{" not in script, f"an expression this test does not know: {script}"
    return script


def condition(step: dict, ref: str) -> bool:
    test = step.get("if")
    if test in (None, "always()"):
        return True
    assert test == "github.ref == 'refs/heads/main'", f"a condition this test does not know: {test}"
    return ref == "refs/heads/main"


def run_job(job: dict, origin: Path, workspace: Path, cache: Path, ref: str, env: dict) -> str:
    """Every step of ``job`` on ``ref``; the output of its shell steps."""
    env = dict(env)
    github_env = workspace.parent / f"{workspace.name}.env"
    github_env.write_text("")
    env["GITHUB_ENV"] = str(github_env)
    output = []
    for step in job["steps"]:
        if not condition(step, ref):
            continue
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout@"):
            subprocess.run(["git", "clone", "-q", str(origin), str(workspace)], check=True)
        elif uses.startswith("actions/setup-python@"):
            pass  # this interpreter
        elif uses.startswith("actions/cache/restore@"):
            if cache.exists():
                shutil.copytree(cache, workspace / step["with"]["path"])
        elif uses.startswith("actions/cache/save@"):
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(workspace / step["with"]["path"], cache)
        elif uses.startswith("actions/upload-artifact@"):
            assert (workspace / step["with"]["path"]).is_file(), step
        elif uses:
            pytest.fail(f"a step this test does not know: {uses}")
        elif step["run"].startswith("pip install "):
            extras = re.fullmatch(r"pip install 'pytest-rollout-tax\[([a-z,]+)\]'", step["run"])
            assert extras, step["run"]
            known = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
            assert set(extras.group(1).split(",")) <= set(known["optional-dependencies"])
        else:
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-e", "-c", expand(step["run"], ref)],
                cwd=workspace, env=env, capture_output=True, text=True, timeout=900, check=False,
            )  # fmt: skip
            output.append(done.stdout + done.stderr)
            gated = done.returncode == 1 and "rollout tax regression" in done.stdout
            assert done.returncode == 0 or gated, (step, done.stdout[-3000:], done.stderr[-3000:])
            for line in github_env.read_text().splitlines():
                key, _, value = line.partition("=")
                env[key] = value
    return "\n".join(output)


def sudo_on_path(tmp_path: Path) -> str:
    """A PATH with ``sudo``: the real one, or, when the test already runs as root, one that
    runs the command as it is."""
    path = os.environ["PATH"]
    if shutil.which("sudo"):
        return path
    if os.geteuid() != 0:
        pytest.skip("no sudo and not root: the workflow's image step cannot run here")
    shim = tmp_path / "bin" / "sudo"
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\nexec "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return f"{shim.parent}{os.pathsep}{path}"


def test_the_documented_workflow_runs_on_a_fresh_checkout(tmp_path: Path) -> None:
    if not engine_answers():
        pytest.skip("no Docker engine answers: the workflow's measuring step needs one")
    workflow, workload_path, workload = documented()
    assert set(workflow[True]) == {"push", "pull_request"}  # YAML reads the key `on` as True
    origin = tmp_path / "origin"
    (origin / workload_path).parent.mkdir(parents=True)
    (origin / workload_path).write_text(workload)
    git = ["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the workload"], check=True)
    env = {**os.environ, "PATH": sudo_on_path(tmp_path)}
    env.pop("DOCKER_HOST", None)  # the workflow's own step finds the engine and exports it
    [job] = workflow["jobs"].values()
    cache = tmp_path / "cache"

    pushed = run_job(job, origin, tmp_path / "main", cache, "refs/heads/main", env)
    assert "no baseline 'main'" in pushed and "run saved to .rollout-tax/main.json" in pushed
    assert (cache / "main.json").is_file()  # the baseline, cached

    pulled = run_job(job, origin, tmp_path / "pr", cache, "refs/pull/1/merge", env)
    assert "baseline: main.json" in pulled and "run saved to" not in pulled
    page = (tmp_path / "pr" / "rollout-tax.html").read_text()
    assert 'id="verdict">Gate ' in page and '<section id="leaderboard">' in page
