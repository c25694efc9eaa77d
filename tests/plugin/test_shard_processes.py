"""Shards run as separate processes (as every real shard is) hold one workload fingerprint and
merge: a prepared workload's ``prepare=`` is named, not printed with its memory address."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pytest_rollout_tax.cli import main
from pytest_rollout_tax.plugin.shard import stable_name

EXAMPLE_SUITE = Path(__file__).parents[2] / "example_suite"

PREPARED = """
import pytest


def setup(sandbox):
    sandbox.write_file("ready", "yes")


@pytest.mark.trajectory(steps=3, rounds=2, prepare=setup)
def test_prepared(sandbox):
    assert sandbox.read_file("ready") == "yes"
"""


def _merge_shards(pytester, *args: str) -> dict:
    paths = []
    for index in range(2):
        path = pytester.path / f"shard{index}.json"
        result = pytester.runpytest_subprocess(
            *args, "--rollout-probes=0", f"--rollout-shard={index}/2", f"--rollout-json={path}"
        )
        assert result.ret == 0, result.stdout.str()
        paths.append(str(path))
    fingerprints = {
        json.loads(Path(p).read_text())["client"]["workload"]["fingerprint"] for p in paths
    }
    assert len(fingerprints) == 1
    out = pytester.path / "merged.json"
    assert main(["merge", *paths, "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_shards_of_a_prepared_workload_merge(pytester):
    pytester.makepyfile(test_prepared=PREPARED)
    merged = _merge_shards(pytester)
    assert len(merged["rollouts"]) == 2


def test_shards_of_the_example_suite_merge(pytester):
    for module in EXAMPLE_SUITE.glob("*.py"):
        shutil.copy(module, pytester.path / module.name)
    merged = _merge_shards(pytester, "--rollout-rounds=1")
    assert {r["shard"] for r in merged["rollouts"]} == {0, 1}


def test_a_callable_is_named_by_module_and_qualified_name():
    def prepare(sandbox):
        pass

    assert stable_name(prepare) == f"{__name__}.{prepare.__qualname__}"
    assert "0x" not in stable_name(object())
