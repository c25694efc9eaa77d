"""``k8s.api = "claim"`` (the built-in variant ``k8s-claim``) against the agent-sandbox stand-in
(tests/support/agent_sandbox_api.py): phases, launch types, the tool's template and pool, pacing,
unbound claims, the missing CRDs, the summary's split and leaks. Its timings are docker's."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support.agent_sandbox_api import LAUNCH_TYPE, AgentSandboxStandIn, on_loop
from support.pytest_process import interrupt, wait_for
from support.reports import report

from pytest_rollout_tax.core.substrate import SESSION_LABEL, new_id
from pytest_rollout_tax.errors import ConfigError, SandboxStartError, SubstrateUnavailable
from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate
from pytest_rollout_tax.substrates.kubernetes.claims import ClaimUnbound
from pytest_rollout_tax.substrates.kubernetes.pool_idle import PoolIdle
from pytest_rollout_tax.summary.terminal import render_summary

MADE = ("sandboxclaims", "sandboxes", "sandboxtemplates", "sandboxwarmpools", "pods")


def objects(server: AgentSandboxStandIn) -> dict[str, list[str]]:
    """Every agent-sandbox object and pod the stand-in holds, by plural."""
    return {p: on_loop(server, lambda p=p: server.names(p)) for p in MADE}  # type: ignore[misc]


def containers(docker_client, server: AgentSandboxStandIn) -> list[str]:
    label = f"rollout-tax.test/k8s-api={server.id}"  # sparse: no inspect of a removed one
    listed = docker_client.containers.list(all=True, sparse=True, filters={"label": label})
    return [c.attrs["Names"][0].lstrip("/") for c in listed]


@pytest.fixture
def claims(claims_api, claims_kubeconfig):
    """A factory of claim-mode substrates on the stand-in, each closed and reaped after."""
    made = []

    def make(**options) -> KubernetesSubstrate:
        options = {"kubeconfig": str(claims_kubeconfig), "api": "claim"} | options
        substrate = KubernetesSubstrate("k8s-claim", session_id=f"t{new_id()}", **options)
        made.append(substrate)
        return substrate

    yield make
    for substrate in made:
        substrate.reap(substrate.session_id)
        substrate.close()


def test_a_claim_is_claimed_bound_ready_then_first_exec_and_says_how_it_launched(
    claims, claims_api
):
    substrate = claims(warm_pool=1)
    with substrate.start() as warm:
        assert list(warm.rollout.phases) == ["claimed", "bound", "ready", "first_exec"]
        assert warm.exec("echo hi").stdout == "hi\n"
        pod = warm.id
    assert warm.rollout.launch_type == "warm"
    assert warm.rollout.to_dict()["launch_type"] == "warm"
    with substrate.start() as next_one:  # the pool's refill is not ready yet, or it is
        assert next_one.rollout.launch_type in ("warm", "cold")
    left = objects(claims_api)
    assert pod not in left["pods"] and pod not in left["sandboxes"]  # released, not returned
    assert not [c for c in left["sandboxclaims"] if c.startswith("rollout-tax-")]


def test_the_tool_applies_its_template_and_pool_first_and_removes_them_at_close(
    claims_api, claims_kubeconfig
):
    substrate = KubernetesSubstrate(
        "k8s-claim", kubeconfig=str(claims_kubeconfig), api="claim", warm_pool=2
    )
    try:
        with substrate.start() as box:
            assert box.exec("true").ok
        pool = substrate.claims.pool
        assert pool in objects(claims_api)["sandboxwarmpools"]
        assert pool in objects(claims_api)["sandboxtemplates"]
    finally:
        substrate.close()
    left = objects(claims_api)
    assert pool not in left["sandboxwarmpools"] and pool not in left["sandboxtemplates"]
    assert not [s for s in left["sandboxes"] if s.startswith(pool)]


def test_a_users_template_is_used_through_its_pool_and_never_touched(claims, claims_api):
    maker = claims(warm_pool=1)
    maker._ensure_prepared()  # a template and a pool, standing for the user's
    template = maker.claims.pool
    substrate = claims(template=template)
    with substrate.start() as box:
        assert box.rollout.launch_type in ("warm", "cold")
    substrate.close()
    assert template in objects(claims_api)["sandboxtemplates"]
    with pytest.raises(SandboxStartError, match="SandboxTemplate 'nope' not found"):
        claims(template="nope").start()


def test_a_warm_pool_of_2_and_a_burst_of_4_records_both_launch_types_with_p50s(claims):
    substrate = claims(warm_pool=2)
    substrate._ensure_prepared()
    boxes, release = [], threading.Barrier(4)

    def start() -> None:
        release.wait()
        boxes.append(substrate.start())

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for box in boxes:
        box.close()
    launched = [box.rollout.launch_type for box in boxes]
    assert len(launched) == 4 and set(launched) <= {"warm", "cold"}
    assert launched.count("warm") >= 2, launched  # 2, or more if the pool refilled in time
    records = [box.rollout for box in boxes]
    for record in records:
        record.outcome, record.teardown_s = "passed", 0.0
    entry = report(records).substrates["k8s-claim"]
    assert entry.launch_types["warm"].rollouts == launched.count("warm")
    line = next(x for x in render_summary(report(records), 200) if "by launch type" in x)
    assert "warm" in line and "p50" in line
    if "cold" in launched:
        assert entry.launch_types["cold"].share == launched.count("cold") / 4
        assert "cold" in line.split("warm", 1)[1]


def test_pacing_spaces_the_claims_creates(claims):
    """Three claims at once at 5 claims/s: the k-th create request (the rollout's create stamp
    plus its ``paced`` wait) goes 0.2 s x k after the first create began, at least. (Each waits
    for its own slot, 0.2 s after the one before; a thread that wakes late only sends later, so
    the spacing of two requests is not itself bounded.)"""
    substrate = claims(max_claims_per_s=5)
    substrate._ensure_prepared()
    boxes, release = [], threading.Barrier(3)

    def start() -> None:
        release.wait()
        boxes.append(substrate.start())

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for box in boxes:
        box.close()
    sent = sorted(b.rollout.epoch["create"] + b.rollout.phases.get("paced", 0.0) for b in boxes)
    assert sum("paced" in b.rollout.phases for b in boxes) >= 2
    first = min(b.rollout.epoch["create"] for b in boxes)
    assert all(at - first >= 0.2 * k - 0.01 for k, at in enumerate(sent)), sent


def test_a_claim_left_unbound_is_its_own_outcome_with_the_controllers_conditions(
    claims, claims_api
):
    substrate = claims(ready_timeout=1.5)
    substrate._ensure_prepared()
    claims_api.hold_claims = True
    try:
        with pytest.raises(ClaimUnbound) as caught:
            substrate.start()
    finally:
        claims_api.hold_claims = False
    message = str(caught.value)
    assert "unbound after 1.5 s (k8s.ready_timeout)" in message
    assert "Ready=False (SandboxNotReady: Sandbox is not ready)" in message
    assert "the claim was deleted" in message


def test_an_unbound_claim_is_the_rollouts_outcome_unbound_in_the_json_and_the_summary(
    tmp_path, claims_api, claims_kubeconfig
):
    env = _suite(tmp_path, "def test_one(sandbox):\n    assert sandbox.exec('true').ok\n")
    args = [
        *_run_args(claims_kubeconfig),
        "--substrate-opt=k8s-claim.ready_timeout=1",
        "--rollout-json=out.json",
    ]
    claims_api.hold_claims = True
    try:
        done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    finally:
        claims_api.hold_claims = False
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads((tmp_path / "out.json").read_text())
    [rollout] = result["rollouts"]
    assert rollout["outcome"] == "unbound"
    assert "SandboxNotReady: Sandbox is not ready" in rollout["error"]
    entry = result["substrates"]["k8s-claim"]
    assert (entry["failures"], entry["unbound"]) == (1, 1)
    summary = " ".join(done.stdout.split())  # the summary wraps long lines
    assert "k8s-claim: no valid result (1 of 1 failed: ClaimUnbound: k8s: SandboxClaim" in summary
    assert "k8s-claim: 0% of rollouts succeeded (1 unbound); failures: the reason above" in summary


def test_the_tools_pool_counts_idle_from_ready_to_claimed_or_to_its_deletion():
    """The tally on a clock of our own: a pool sandbox idles from its Ready until a claim owns
    it or the pool is deleted; its creation runs from its appearing to its Ready."""
    now = [0.0]
    idle = PoolIdle("pool", 2, made_by_tool=True, clock=lambda: now[0])

    def event(kind: str, name: str, owner: str, ready: bool, at: float) -> None:
        now[0] = at
        ref = {"kind": owner, "name": "pool" if owner == "SandboxWarmPool" else name,
               "controller": True}  # fmt: skip
        status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        idle.see(kind, {"metadata": {"name": name, "ownerReferences": [ref]}, "status": status})

    event("ADDED", "a", "SandboxWarmPool", False, 1.0)
    event("ADDED", "b", "SandboxWarmPool", False, 1.5)
    event("MODIFIED", "a", "SandboxWarmPool", True, 2.0)
    event("MODIFIED", "b", "SandboxWarmPool", True, 3.0)
    event("MODIFIED", "a", "SandboxClaim", True, 5.0)  # claimed after 3 s idle
    idle.claimed("warm")
    event("ADDED", "c", "SandboxWarmPool", False, 5.0)  # the refill, never Ready
    event("ADDED", "x", "SandboxClaim", False, 6.0)  # a cold launch: not the pool's
    idle.claimed("cold")
    event("MODIFIED", "x", "SandboxClaim", True, 7.0)
    now[0] = 10.0
    stats = idle.close()  # b idles until the pool's deletion: 7 s
    assert stats.idle_sandbox_s == pytest.approx(3.0 + 7.0)
    assert stats.creation_s == [1.0, 1.5]
    assert (stats.hits, stats.misses, stats.size, stats.made_by_tool) == (1, 1, 2, True)
    assert stats.idle_per_claim_s == pytest.approx(5.0)
    event("MODIFIED", "c", "SandboxWarmPool", True, 11.0)  # after close: not counted
    assert idle.close().idle_sandbox_s == pytest.approx(10.0)


def test_a_substrates_own_pool_reports_its_claims_idle_time_and_creations(claims, claims_api):
    substrate = claims(warm_pool=2)
    began = time.perf_counter()
    with substrate.start() as box:
        assert box.rollout.launch_type == "warm"
    pool = substrate.claims.pool
    stats = substrate.close_own_pool()
    elapsed = time.perf_counter() - began
    assert stats is not None and stats.made_by_tool and stats.size == 2
    assert (stats.hits, stats.misses) == (1, 0)
    assert len(stats.creation_s) >= 2 and all(0 < c < elapsed for c in stats.creation_s)
    assert 0 < stats.idle_sandbox_s <= 3 * elapsed  # 2 sandboxes and 1 refill at most
    assert pool not in objects(claims_api)["sandboxwarmpools"]  # deleted: the idle time ends
    assert substrate.close_own_pool() is None


TWO = """
def test_one(sandbox):
    assert sandbox.exec("true").ok

def test_two(sandbox):
    assert sandbox.exec("true").ok
"""


def _run_pool_suite(tmp_path: Path, kubeconfig: Path, *options: str) -> tuple[dict, str]:
    """Run TWO on k8s-claim with ``options``: the JSON report and the summary, unwrapped."""
    env = _suite(tmp_path, TWO)
    args = [*_run_args(kubeconfig)[:-1], *options, "--rollout-json=out.json"]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / "out.json").read_text()), " ".join(done.stdout.split())


def test_the_tools_pool_idle_is_reported_as_a_warm_pools_with_the_does_it_pay_line(
    tmp_path, claims_kubeconfig
):
    result, summary = _run_pool_suite(
        tmp_path, claims_kubeconfig, "--substrate-opt=k8s-claim.warm_pool=2"
    )
    entry = result["substrates"]["k8s-claim"]
    pool = entry["pool"]
    assert pool["made_by_tool"] and pool["size"] == 2 and pool["hits"] + pool["misses"] == 2
    assert pool["idle_sandbox_s"] > 0 and len(pool["creation_s"]) >= 2
    assert entry["decomposition"]["idle"] > 0  # the projection's idle term
    assert "k8s-claim warm pool of 2: " in summary
    verdicts = "pays for itself|costs more than it saves|only costs"
    assert re.search(rf"adds \S+ idle: it ({verdicts})", summary)


def test_a_users_pool_is_not_counted_and_the_summary_says_so_in_one_line(
    tmp_path, claims, claims_api, claims_kubeconfig
):
    maker = claims(warm_pool=1)
    maker._ensure_prepared()  # a template and a pool of 1, standing for the user's
    template = maker.claims.pool
    result, summary = _run_pool_suite(
        tmp_path, claims_kubeconfig, f"--substrate-opt=k8s-claim.template={template}"
    )
    entry = result["substrates"]["k8s-claim"]
    pool = entry["pool"]
    assert not pool["made_by_tool"] and pool["idle_sandbox_s"] == 0
    assert pool["hits"] + pool["misses"] == 2 and pool["size"] == 1
    assert entry["decomposition"]["idle"] == 0
    assert (
        "k8s-claim warm pool of 1 is the user's, not made by the tool: its idle time is not "
        "counted" in summary
    )
    assert "pays for itself" not in summary and "costs more than it saves" not in summary
    assert template in objects(claims_api)["sandboxwarmpools"]  # never touched


def test_without_the_crds_claims_are_one_line_with_the_docs_link(k8s_kubeconfig):
    with pytest.raises(SubstrateUnavailable) as caught:
        KubernetesSubstrate("k8s-claim", kubeconfig=str(k8s_kubeconfig), api="claim")
    message = str(caught.value)
    assert "\n" not in message
    assert "agent-sandbox resources are not installed" in message
    assert "https://github.com/kubernetes-sigs/agent-sandbox" in message


@pytest.mark.parametrize(
    "options, error",
    [
        ({"warm_pool": 2}, "need api='claim'"),
        ({"api": "claim", "template": "t", "template_from": "pod"}, "not both"),
        ({"api": "claim", "warm_pool": -1}, "warm_pool=-1"),
        ({"api": "claims"}, "api"),
    ],
)
def test_bad_claim_options_are_one_line(options, error, claims_kubeconfig):
    with pytest.raises(ConfigError, match=error):
        KubernetesSubstrate("k8s-claim", kubeconfig=str(claims_kubeconfig), **options)


# -- leaks -------------------------------------------------------------------------------------

SUITE = """
import os, time

def test_first(sandbox, substrate):
    with open(os.environ["LEAK_LOG"], "a") as log:
        log.write(substrate.session_id + "\\n")
    assert sandbox.exec("true").ok

def test_waits(sandbox):
    open("ready", "w").close()
    sandbox.exec("sleep 120")
"""


def _run_args(kubeconfig: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--substrate=k8s-claim",
        f"--substrate-opt=k8s-claim.kubeconfig={kubeconfig}",
        "--substrate-opt=k8s-claim.warm_pool=1",
    ]


def _suite(tmp_path: Path, source: str) -> dict[str, str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_work.py").write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return env | {"LEAK_LOG": str(tmp_path / "leak.log"), "PYTHONUNBUFFERED": "1"}


def _assert_nothing_left(tmp_path, claims_api, docker_client) -> None:
    [session] = set((tmp_path / "leak.log").read_text().split())
    left = {kind: [n for n in names if session in n] for kind, names in objects(claims_api).items()}
    labelled = on_loop(
        claims_api,
        lambda: [
            o["metadata"]["name"]
            for p in MADE
            for o in claims_api.store.list(p, None, lambda o: True)
            if (o["metadata"].get("labels") or {}).get(SESSION_LABEL) == session
        ],
    )
    assert labelled == [] and not any(left.values()), (labelled, left)

    def orphans() -> list[str]:
        pods = set(objects(claims_api)["pods"])
        return [c for c in containers(docker_client, claims_api) if c.split("_")[2] not in pods]

    wait_for(lambda: not orphans(), "the containers of deleted pods to be removed")


def test_a_clean_run_leaves_nothing(tmp_path, claims_api, claims_kubeconfig, docker_client):
    env = _suite(tmp_path, SUITE.replace('sandbox.exec("sleep 120")', "pass"))
    done = subprocess.run(
        _run_args(claims_kubeconfig), cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "k8s-claim cold start by launch type: warm" in done.stdout
    _assert_nothing_left(tmp_path, claims_api, docker_client)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "kill-9"])
def test_an_interrupted_or_killed_run_leaves_nothing(
    tmp_path, claims_api, claims_kubeconfig, docker_client, signum
):
    env = _suite(tmp_path, SUITE)
    code, output = interrupt(
        [*_run_args(claims_kubeconfig), "-v"],
        cwd=tmp_path,
        env=env,
        ready=lambda: (tmp_path / "ready").exists(),
        signum=signum,
    )
    if signum == signal.SIGKILL:
        [session] = set((tmp_path / "leak.log").read_text().split())
        assert any(session in n for n in objects(claims_api)["sandboxwarmpools"])  # it leaked
        reap = subprocess.run(
            [*_run_args(claims_kubeconfig), "--rollout-reap"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert reap.returncode == 0, reap.stdout + reap.stderr
        wait_for(lambda: not containers_of_session(claims_api, session), "the reaped pods")
    else:
        assert code == 2, output
    _assert_nothing_left(tmp_path, claims_api, docker_client)


def containers_of_session(server: AgentSandboxStandIn, session: str) -> list[str]:
    return [n for n in objects(server)["pods"] if session in n]


def test_the_launch_type_label_is_the_controllers(claims, claims_api):
    substrate = claims(warm_pool=1)
    with substrate.start() as box:
        labels = on_loop(
            claims_api,
            lambda: claims_api.store.get("sandboxes", "default", box.id)["metadata"]["labels"],
        )
        assert labels[LAUNCH_TYPE] == box.rollout.launch_type == "warm"
