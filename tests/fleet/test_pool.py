"""Warm pools: real sandboxes started in the background, claimed once, destroyed after.

The pool is generic, so its own behaviour is tested on docker (real containers, real threads);
through the plugin it runs on ``local`` (cheap) and the README workload on a pooled docker
variant. Leaks at session end, reaping and xdist are in test_docker_leaks.py.
"""

from __future__ import annotations

import json

import pytest
from support.pytest_process import wait_for
from support.workloads import readme_workload

from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.substrate import CLAIM_PHASE, SESSION_LABEL
from pytest_rollout_tax.errors import ConfigError, SandboxStartError
from pytest_rollout_tax.fleet.pool import PoolStats, WarmPool
from pytest_rollout_tax.substrates.docker import DockerSubstrate
from pytest_rollout_tax.substrates.local import LocalSubstrate


def session_containers(docker_client, substrate) -> list:
    label = f"{SESSION_LABEL}={substrate.session_id}"
    return docker_client.containers.list(all=True, sparse=True, filters={"label": label})


@pytest.fixture
def docker_substrate(sandbox_image, docker_client):
    substrate = DockerSubstrate()
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


def test_claims_are_fresh_empty_sandboxes_and_close_destroys_the_rest(
    docker_substrate, docker_client
):
    pool = WarmPool(docker_substrate, 2)
    pool.fill()
    wait_for(lambda: len(pool.stats.creation_s) == 2, "the pool to fill")
    ids = []
    try:
        for _ in range(3):
            rollout = Rollout(substrate="docker")
            with pool.claim(rollout) as sandbox:
                assert sandbox.exec("ls -A").stdout == ""  # never reused: an empty workdir
                sandbox.write_file("mark", "used")
                ids.append(sandbox.id)
                assert rollout.sandbox_id == sandbox.id
                assert rollout.phases == {CLAIM_PHASE: rollout.cold_start_s}
                assert rollout.kind == "docker" and [s.kind for s in rollout.steps] == [
                    "exec",
                    "write_file",
                ]
    finally:
        pool.close()
    assert len(set(ids)) == 3
    assert pool.stats.hits >= 2 and pool.stats.claims == 3
    assert len(pool.stats.creation_s) == 5  # 2 to fill, 1 refill per claim
    assert pool.stats.idle_sandbox_s > 0
    assert session_containers(docker_client, docker_substrate) == []


def test_a_failing_refill_fails_the_claim_that_gets_it_with_its_reason(
    sandbox_image, docker_client
):
    """The image disappears after the pool filled: the refill fails, the next claim says why,
    and nothing is left behind."""
    tag = "rollout-tax/pool-refill-test:gone"
    docker_client.images.get(sandbox_image).tag(tag)
    substrate = DockerSubstrate(image=tag)
    pool = WarmPool(substrate, 1)
    try:
        pool.fill()
        wait_for(lambda: len(pool.stats.creation_s) == 1, "the pool to fill")
        docker_client.images.remove(tag)  # untags only: the sandbox image stays
        with pool.claim(Rollout(substrate="docker")) as sandbox:
            assert sandbox.exec("true").ok
        with pytest.raises(SandboxStartError, match=r"^pooled sandbox failed to start: "):
            pool.claim(Rollout(substrate="docker"))
        assert sum(pool.stats.failure_reasons.values()) == 1
        [reason] = pool.stats.failure_reasons
        assert reason.startswith("SandboxStartError: ") and tag in reason
    finally:
        pool.close()
        substrate.reap(substrate.session_id)
        substrate.close()
        if docker_client.images.list(name=tag):
            docker_client.images.remove(tag)
    assert session_containers(docker_client, substrate) == []


def test_pool_is_an_option_of_every_substrate():
    assert LocalSubstrate(pool=3).options.pool == 3
    assert LocalSubstrate(pool="2").options.pool == 2
    with pytest.raises(ConfigError, match=r"^local.pool=-1: expected 0 to 4,096 sandboxes"):
        LocalSubstrate(pool=-1)


def test_stats_of_several_pools_merge():
    one = PoolStats(size=2, hits=3, misses=1, idle_sandbox_s=2.0, creation_s=[0.5, 0.7])
    two = PoolStats(size=2, hits=1, misses=1, idle_sandbox_s=1.0, creation_s=[0.6])
    two.failure_reasons["SandboxStartError: x"] += 1
    merged = PoolStats.merge([one.to_record(), two.to_record()])
    assert (merged.pools, merged.hits, merged.misses) == (2, 4, 2)
    assert merged.idle_per_claim_s == pytest.approx(0.5)
    entry = merged.to_dict()
    assert entry["creations"]["n"] == 3 and entry["creation_failures"] == 1
    assert set(entry) >= {"size", "hits", "misses", "idle_sandbox_s"}


def test_a_pool_the_tool_did_not_make_stays_so_when_merged_and_old_records_are_the_tools():
    tools = PoolStats(size=2, hits=1).to_record()
    old = {k: v for k, v in tools.items() if k != "made_by_tool"}  # written before the field
    assert PoolStats.merge([tools, old]).to_dict()["made_by_tool"] is True
    users = PoolStats(size=2, hits=1, made_by_tool=False).to_record()
    assert PoolStats.merge([users, users]).made_by_tool is False


POOLED = """
import pytest

@pytest.mark.trajectory(rounds=3)
def test_claimed(sandbox, rollout):
    assert sandbox.exec("ls -A").stdout == ""
    sandbox.write_file("x", "1")
    assert "claim" in rollout.phases
"""


def test_a_pooled_substrate_through_the_plugin(pytester):
    pytester.makepyfile(test_pooled=POOLED)
    result = pytester.runpytest(
        "--substrate-opt=local.pool=2", "--rollout-json=report.json", "--rollout-fleet=8"
    )
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "report.json").read_text())
    local = report["substrates"]["local"]
    pool = local["pool"]
    assert pool["size"] == 2 and pool["hits"] + pool["misses"] == 3
    assert pool["creations"]["n"] == 5 and pool["idle_sandbox_s"] > 0
    rollouts = report["rollouts"]
    assert len({r["sandbox_id"] for r in rollouts}) == 3
    assert all(set(r["phases"]) == {"claim"} for r in rollouts)
    assert report["shared_sandboxes"] == []
    fleet = local["fleet"]
    assert fleet["workers"] == 8 and fleet["cold_start_from"].startswith("warm pool claims")
    assert fleet["idle_s"] == pytest.approx(pool["idle_sandbox_s"] / 3)
    result.stdout.fnmatch_lines(
        ["local warm pool of 2: */3 claims found a sandbox ready; claim p50 *", "local fleet of 8*"]
    )


def test_the_readme_workload_passes_on_a_pooled_docker_variant(pytester, sandbox_image):
    """Every rollout's workdir is empty at start (the workload asserts it) on a pooled sandbox."""
    pytester.makepyprojecttoml(
        """
        [tool.rollout-tax.substrates.docker-pooled]
        kind = "docker"
        pool = 2
        """
    )
    pytester.makepyfile(test_readme=readme_workload())
    result = pytester.runpytest("--substrate=docker-pooled", "--rollout-json=report.json")
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["substrates"]["docker-pooled"]["pool"]["hits"] >= 1
    assert all("claim" in r["phases"] for r in report["rollouts"])
    assert len({r["sandbox_id"] for r in report["rollouts"]}) == 3


def test_a_negative_pool_is_a_usage_error_before_any_rollout(pytester):
    pytester.makepyfile("def test_one(sandbox):\n    pass\n")
    result = pytester.runpytest("--substrate-opt=local.pool=-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: local.pool=-1: expected 0 to 4,096 sandboxes (0: no pool)"]
    )
