"""Reset and reuse (``reuse="reset"``): a rollout gets a sandbox an earlier one used, reset.

The state-leak check runs on every reuse: a file (in the workdir, /tmp, the home and the
image's own /etc, changed and deleted), a process, an environment change (a profile) and a
listening socket left by one rollout are absent from the next, on real bwrap sandboxes and
real docker containers, on both transports.
"""

from __future__ import annotations

import pytest

from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.substrate import RESET_PHASE
from pytest_rollout_tax.errors import ConfigError
from pytest_rollout_tax.fleet.reuse import Recycler
from pytest_rollout_tax.substrates.local import LocalSubstrate

#: What one rollout leaves behind: files added, changed and deleted, a detached process, a
#: profile that sets a variable, and a socket listening on port 7321.
LEAVE = (
    "echo left > leak.txt && mkdir -p sub && echo left > sub/f && echo left > /tmp/leak && "
    "echo left > /root/leak && echo changed >> /etc/issue && rm /etc/debian_version && "
    "echo 'export LEAKED=yes' >> /etc/profile && "
    "(setsid sleep 3217 >/dev/null 2>&1 &) && "
    "(setsid python3 -c 'import socket,time; s=socket.socket(); "
    's.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 7321)); '
    's.listen(); open("/tmp/listening", "w").close(); time.sleep(600)\' >/dev/null 2>&1 &) && '
    "while [ ! -e /tmp/listening ]; do sleep 0.01; done"
)
#: What the next rollout must find: nothing of it (the session's step helper, placed in /tmp
#: under a new name by each session, aside).
LOOK = (
    "ls -A; ls -A /tmp /root | grep -v '^[.]rtx-step-'; cat /etc/issue; cat /etc/debian_version; "
    "grep -la '[s]leep.3217' /proc/[0-9]*/cmdline 2>/dev/null; sh -lc 'echo LEAKED=$LEAKED'; "
    "grep -c ' 0A ' /proc/net/tcp"
)


@pytest.fixture(params=["bwrap", "bwrap-session", "docker", "docker-session"])
def recycler(request, sandbox_image):
    if request.param.startswith("bwrap"):
        request.getfixturevalue("bwrap_ready")
    kind, _, session = request.param.partition("-")
    transport = "session" if session else "exec"
    if kind == "bwrap":
        from pytest_rollout_tax.substrates.bwrap import BwrapSubstrate

        substrate = BwrapSubstrate(image=sandbox_image, reuse="reset", transport=transport)
    else:
        from pytest_rollout_tax.substrates.docker import DockerSubstrate

        substrate = DockerSubstrate(image=sandbox_image, reuse="reset", transport=transport)
    recycler = Recycler(substrate)
    yield recycler
    recycler.close()
    assert substrate.reap(substrate.session_id) == 0  # nothing left to reap
    substrate.close()


def test_every_reuse_is_the_clean_image_again(recycler):
    with recycler.start(Rollout(substrate="x"), timeout=60) as first:
        clean = first.exec(LOOK)
        left = first.exec(LEAVE)
        assert left.ok, left.stderr
        assert first.exec("grep -c ' 0A ' /proc/net/tcp").stdout.strip() != "0"
        used = first.id
    for _ in range(2):
        rollout = Rollout(substrate="x")
        with recycler.start(rollout, timeout=60) as sandbox:
            assert sandbox.id == used  # the same sandbox, reused
            assert RESET_PHASE in rollout.phases and "create" not in rollout.phases
            kept = recycler.substrate.keeps_session(sandbox.handle)  # docker's, from the host
            assert kept == (recycler.name == "docker" and sandbox.transport.name == "session")
            opened = sandbox.transport.name == "session" and not kept  # a session opened again
            assert ("session" in rollout.phases) == opened
            assert rollout.cold_start_s >= rollout.phases[RESET_PHASE]
            assert sandbox.exec(LOOK).stdout == clean.stdout
            assert sandbox.exec(LEAVE).ok
    assert recycler.reuses == 2


def test_a_substrate_that_cannot_reset_says_so_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"local\.reuse='reset': expected fresh \(local cannot"):
        LocalSubstrate(root=str(tmp_path), reuse="reset")
    with pytest.raises(ConfigError, match=r"reuse='again': expected fresh or reset"):
        from pytest_rollout_tax.substrates.bwrap import BwrapSubstrate

        BwrapSubstrate(reuse="again")


def test_docker_resets_through_the_engine_where_the_host_cannot(sandbox_image, monkeypatch):
    """Without access to the engine's data (another driver, a remote engine, not root): one
    exec kills every process but the keepalive and removes what the engine's diff lists as
    added; the session is then opened again (nothing of it was spared)."""
    from pytest_rollout_tax.substrates.docker import DockerSubstrate, reset

    monkeypatch.setattr(reset, "_host_view", lambda api, container: {})
    substrate = DockerSubstrate(image=sandbox_image, reuse="reset", transport="session")
    recycler = Recycler(substrate)
    try:
        left = (
            "echo left > leak.txt && echo left > /tmp/leak && (setsid sleep 3218 >/dev/null 2>&1 &)"
        )
        look = (
            "ls -A; ls -A /tmp | grep -v '^[.]rtx-step-'; "
            "grep -la '[s]leep.3218' /proc/[0-9]*/cmdline"
        )
        with recycler.start(Rollout(substrate="x"), timeout=60) as first:
            clean = first.exec(look).stdout
            assert first.exec(left).ok
        rollout = Rollout(substrate="x")
        with recycler.start(rollout, timeout=60) as sandbox:
            assert not substrate.keeps_session(sandbox.handle) and "session" in rollout.phases
            assert sandbox.exec(look).stdout == clean
    finally:
        recycler.close()
        substrate.reap(substrate.session_id)
        substrate.close()
