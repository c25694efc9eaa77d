"""Reaping what a killed session left (docs/leftovers.md): gone means every process, and on a
shared engine, only this user's containers unless asked for all."""

from __future__ import annotations

import os
import signal
import sys

import pytest
from support.pytest_process import interrupt, wait_for

from pytest_rollout_tax.core.processes import process_alive
from pytest_rollout_tax.core.substrate import SESSION_LABEL, new_id

WORKLOAD = """
import pytest

@pytest.mark.trajectory
def test_killed_mid_step(sandbox):
    sandbox.exec(
        "cd / && sleep 301 & echo $! > {pids}/away; "
        "setsid sleep 302 & echo $! > {pids}/session; "
        "sleep 303 & echo $! > {pids}/step; "
        "(cd / && setsid sleep 304 & echo $! > {pids}/escaped); touch {pids}/ready; wait"
    )
"""


def test_reaping_a_local_leftover_kills_every_process_of_its_sandbox(pytester, selected_substrate):
    """Finding 5: after ``kill -9`` of pytest mid-step, reaping removed the workdir and left
    the step's processes running (one left the workdir, one its process group and session,
    one all three)."""
    if selected_substrate.name != "local":
        pytest.skip("local leftovers: the other substrates' processes die with their sandbox")
    pids, root = pytester.mkdir("pids"), pytester.mkdir("root")
    pytester.makepyfile(test_killed=WORKLOAD.format(pids=pids))
    args = [
        *selected_substrate.args,
        f"--substrate-opt=local.root={root}",
        "-p",
        "no:cacheprovider",
    ]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "pytest", *args]
    ready = (pids / "ready").exists
    interrupt(command, cwd=pytester.path, env=env, ready=ready, signum=signal.SIGKILL)
    left = [int((pids / name).read_text()) for name in ("away", "session", "step", "escaped")]
    assert all(process_alive(pid) for pid in left)
    reaped = pytester.run(sys.executable, "-m", "pytest", "--rollout-reap", *args)
    assert reaped.ret == 0 and "removed 1 leftover sandbox(es)" in reaped.stdout.str()
    wait_for(lambda: not any(process_alive(pid) for pid in left), "the leftovers to die", 30)
    assert list(root.iterdir()) == []


def test_reaping_a_shared_engine_spares_other_users_containers_unless_asked(sandbox_image):
    """Finding 12: reaping removed every labelled container whose owner was not alive here,
    other users' included."""
    from pytest_rollout_tax.substrates.docker import DockerSubstrate
    from pytest_rollout_tax.substrates.docker.lifecycle import OWNER_LABEL, USER_LABEL

    session = new_id()
    mine = DockerSubstrate(image=sandbox_image, session_id=session)
    every = DockerSubstrate(image=sandbox_image, session_id=session, reap="all")
    labels = {SESSION_LABEL: session, OWNER_LABEL: "no-such-host:1", USER_LABEL: "someone-else"}
    api = mine.api
    container = api.create_container(sandbox_image, ["sleep", "infinity"], labels=labels)["Id"]
    try:
        assert mine.reap(session) == 0
        assert api.inspect_container(container)["Id"] == container
        assert every.reap(session) == 1
    finally:
        for substrate in (mine, every):
            substrate.reap(session)
            substrate.close()
        with pytest.raises(Exception, match="No such container"):
            api.inspect_container(container)
