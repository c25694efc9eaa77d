"""A test's identity survives an option value that moves pytest's rootdir (issue 47, finding
1): ``--rollout-storage DIR`` in the space form, where DIR exists only on the later run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rollout_tax.cli import main

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=3, rounds=2)
def test_p(sandbox):
    assert sandbox.exec("true").exit_code == 0

@pytest.mark.trajectory(steps=3, rounds=1)
def test_q(sandbox):
    assert sandbox.exec("true").exit_code == 0
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``m/test_p.py`` run from ``m``, its storage a sibling folder ``../store``."""
    folder = pytester.mkdir("m")
    (folder / "test_p.py").write_text(WORKLOAD)
    monkeypatch.chdir(folder)
    return folder


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("test_p.py", "--rollout-probes=0", *args)


@pytest.mark.parametrize("form", ["space", "equals"])
def test_shards_merge_whether_or_not_the_storage_existed(
    pytester: pytest.Pytester, project: Path, form: str
) -> None:
    paths = []
    for index in range(2):
        storage = (
            ["--rollout-storage", "../store"] if form == "space" else ["--rollout-storage=../store"]
        )
        path = project / f"s{index}.json"
        result = _run(
            pytester, f"--rollout-shard={index}/2", f"--rollout-save=s{index}",
            *storage, f"--rollout-json={path}",
        )  # fmt: skip
        assert result.ret == 0, result.stdout.str()
        paths.append(str(path))
    reports = [json.loads(Path(p).read_text()) for p in paths]
    assert {r["client"]["workload"]["fingerprint"] for r in reports} == {
        reports[0]["client"]["workload"]["fingerprint"]
    }
    tests = {rollout["test"].split("[")[0] for r in reports for rollout in r["rollouts"]}
    assert tests == {"test_p.py::test_p", "test_p.py::test_q"}
    out = project / "merged.json"
    assert main(["merge", *paths, "-o", str(out)]) == 0
    assert len(json.loads(out.read_text())["rollouts"]) == 3


def test_a_baseline_compares_per_test_after_the_storage_came_to_exist(
    pytester: pytest.Pytester, project: Path
) -> None:
    assert _run(pytester, "--rollout-save=main", "--rollout-storage", "../store").ret == 0
    result = _run(pytester, "--rollout-compare=main", "--rollout-storage", "../store")
    assert result.ret == 0, result.stdout.str()
    by_test = [line for line in result.outlines if line.startswith("local test_p.py::")]
    assert [line.split(":")[2] for line in by_test] == ["test_p", "test_q"], result.outlines
