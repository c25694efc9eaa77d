"""Bursts: N sandboxes started at once on docker and against the k8s and E2B stand-ins, whose
control planes answer a burst as the real ones do (a rate limit's 429, pods left Pending)."""

from __future__ import annotations

import json
import re

import pytest
from support.e2b_server import StandInE2B

from pytest_rollout_tax.core.substrate import SESSION_LABEL
from pytest_rollout_tax.errors import ConfigError
from pytest_rollout_tax.fleet import burst
from pytest_rollout_tax.substrates.docker import DockerSubstrate
from pytest_rollout_tax.substrates.e2b import E2BSubstrate
from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate


@pytest.mark.parametrize("text, levels", [("1,4,16", [1, 4, 16]), (" 4 , 1,4", [4, 1]), ("2", [2])])
def test_levels_parse(text, levels):
    assert burst.parse_levels(text) == levels


@pytest.mark.parametrize("text", ["0", "1,x", "", "1,,2", "-4", "5000"])
def test_bad_levels_are_config_errors(text):
    with pytest.raises(ConfigError, match="expected concurrencies from 1 to 4096"):
        burst.parse_levels(text)


def level(concurrency: int, p50: float | None) -> dict:
    return {"concurrency": concurrency, "cold_start": {"p50": p50, "mean": p50} if p50 else None}


def test_the_knee_is_the_first_level_past_twice_the_lowest():
    assert burst.knee([level(1, 1.0), level(4, 1.9), level(16, 2.5), level(64, 9.0)]) == 16
    assert burst.knee([level(1, 1.0), level(4, 2.0)]) is None
    assert burst.knee([level(4, 1.0)]) is None
    assert burst.knee([level(1, None), level(4, 1.0), level(16, 3.0)]) == 16


def test_the_nearest_level_to_a_fleet():
    levels = [level(1, 1.0), level(4, 2.0), level(16, 3.0)]
    assert burst.nearest(levels, 3)["concurrency"] == 4
    assert burst.nearest(levels, 1000)["concurrency"] == 16
    assert burst.nearest(levels, 10)["concurrency"] == 16  # a tie: the larger, the safer
    assert burst.nearest([level(4, None)], 4) is None


def test_a_docker_burst_starts_all_at_once_and_leaves_nothing(sandbox_image, docker_client):
    substrate = DockerSubstrate()
    try:
        one, four = burst.run(substrate, [1, 4])
    finally:
        substrate.close()
    assert (one.concurrency, len(one.cold_start_s), one.failures) == (1, 1, 0)
    assert (four.concurrency, len(four.cold_start_s), four.failures) == (4, 4, 0)
    assert four.ready_all_s >= max(four.cold_start_s)
    assert four.creates_per_s == pytest.approx(4 / four.ready_all_s)
    entry = four.to_dict()
    assert set(entry) == {
        "concurrency", "cold_start", "ready_all_s", "creates_per_s", "failures", "failure_reasons",
        "rate_limited", "released_at", "cold_start_s",
    }  # fmt: skip
    assert entry["rate_limited"] == 0
    assert entry["cold_start_s"] == four.cold_start_s and entry["released_at"] > 1.7e9  # epoch
    label = f"{SESSION_LABEL}={substrate.session_id}"
    assert docker_client.containers.list(all=True, sparse=True, filters={"label": label}) == []


def test_an_e2b_rate_limit_is_counted_as_the_limiter_not_a_crash(e2b_env: StandInE2B):
    """One create a second: the SDK waits out each 429 (``Retry-After: 1``) up to its 3
    retries, so a burst of 6 is slowed down and the last ones are refused: rate-limited,
    with the 429's reason, and the level says it hit the limiter."""
    e2b_env.creates_per_second = 1
    try:
        result = burst.run_level(E2BSubstrate(), 6)
    finally:
        e2b_env.creates_per_second = None
    assert len(result.cold_start_s) >= 2 and result.failures >= 1
    assert len(result.cold_start_s) + result.failures == 6
    assert e2b_env.rate_limited > result.failures
    [reason] = result.failure_reasons
    assert reason.startswith("RateLimited: e2b: rate limit or quota exceeded (HTTP 429)")
    assert result.rate_limited == result.failures
    assert e2b_env.sandboxes() == []


def test_a_full_k8s_node_leaves_the_burst_pending(k8s_api, k8s_kubeconfig):
    """One pod slot on the node: the second pod of a burst of 2 stays Pending until the
    substrate's ready_timeout, and says so."""
    k8s_api.max_pods = 1
    substrate = KubernetesSubstrate(kubeconfig=str(k8s_kubeconfig), ready_timeout=3)
    try:
        result = burst.run_level(substrate, 2)
        remaining = substrate.reap(substrate.session_id)
    finally:
        k8s_api.max_pods = None
        substrate.close()
    assert (len(result.cold_start_s), result.failures) == (1, 1)
    [reason] = result.failure_reasons
    assert "still Pending, not scheduled: Unschedulable" in reason and "Too many pods" in reason
    assert remaining == 0


def test_bursts_through_the_plugin(pytester):
    pytester.makepyfile("def test_one(sandbox):\n    assert sandbox.exec('true').ok\n")
    result = pytester.runpytest(
        "--rollout-burst=1,2", "--rollout-fleet=2", "--rollout-json=report.json"
    )
    result.assert_outcomes(passed=1)
    local = json.loads((pytester.path / "report.json").read_text())["substrates"]["local"]
    assert [lv["concurrency"] for lv in local["burst"]] == [1, 2]
    assert [lv["cold_start"]["n"] for lv in local["burst"]] == [1, 2]
    assert local["fleet"]["burst_level"] == 2
    assert local["fleet"]["cold_start_from"] == "burst level 2"
    assert local["fleet"]["cold_start_s"] == local["burst"][1]["cold_start"]["mean"]
    text = " ".join(line.strip() for line in result.outlines)
    assert re.search(r"local burst cold start at 1: p50 \S+, \S+ creates/s \| 2: p50 .*knee", text)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--rollout-burst=1,0"], "ERROR: --rollout-burst='1,0': expected concurrencies from 1"),
        (["--rollout-fleet=0"], "ERROR: --rollout-fleet='0': expected a positive integer*"),
        (["--rollout-fleet=x"], "ERROR: --rollout-fleet='x': expected a positive integer*"),
    ],
)
def test_bad_burst_and_fleet_options_are_usage_errors(pytester, args, message):
    pytester.makepyfile("def test_one(sandbox):\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"{message}*"])


def test_a_substrate_without_credentials_has_no_burst(pytester, monkeypatch):
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    pytester.makepyfile("def test_one(sandbox):\n    assert sandbox.exec('true').ok\n")
    result = pytester.runpytest("--substrate=e2b,local", "--rollout-burst=1", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["local burst cold start at 1: p50 *"])
    result.stdout.no_fnmatch_line("e2b burst*")
