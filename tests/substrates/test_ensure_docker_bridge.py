"""ensure-docker's check of its engine's default bridge (docker0), which another engine on
the machine can take away.

The script's functions are sourced with a fake ``docker`` and ``ip`` on PATH and the restart
recorded, so the shared engine is never restarted; one read-only test runs the check against
the real engine.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "ensure-docker"
OURS = "unix:///var/run/docker.sock"

FAKE_DOCKER = """\
#!/bin/sh
case "$*" in
    "network inspect bridge"*)
        [ -e "$FAKE/network" ] && { echo docker0; exit 0; }
        echo "Error response from daemon: network bridge not found" >&2; exit 1 ;;
    "info --format {{.DockerRootDir}}") echo "$FAKE_ROOT" ;;
esac
"""
FAKE_IP = '#!/bin/sh\n[ "$*" = "link show dev docker0" ] && [ -e "$FAKE/docker0" ]\n'

#: Sources the script; our dockerd is pid 4242 when FAKE_OURS=1, and a restart (recorded in
#: the restarts file) makes the bridge again unless FAKE_RESTART_FAILS=1.
DRIVER = """\
source "$SCRIPT"
dockerd_pids() { if [ "$1" = ours ] && [ "$FAKE_OURS" = 1 ]; then echo 4242; fi; }
restart_ours() {
    echo "$1" >> "$FAKE/restarts"
    [ "${FAKE_RESTART_FAILS:-0}" = 1 ] || touch "$FAKE/network" "$FAKE/docker0"
}
ensure_bridge
"""


def ensure_bridge(
    tmp_path: Path, *, network: bool, docker0: bool, ours: bool, host: str = OURS, fails=False
) -> tuple[int, list[str], list[str]]:
    """Run ensure_bridge against the fakes: (exit status, its stderr lines, restarts)."""
    fake = tmp_path / "fake"
    bin_dir = fake / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("docker", FAKE_DOCKER), ("ip", FAKE_IP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for name, present in (("network", network), ("docker0", docker0)):
        if present:
            (fake / name).touch()
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "SCRIPT": str(SCRIPT),
        "FAKE": str(fake),
        "FAKE_ROOT": "/var/lib/rollout-tax/docker",
        "FAKE_OURS": "1" if ours else "0",
        "FAKE_RESTART_FAILS": "1" if fails else "0",
        "DOCKER_HOST": host,
    }
    done = subprocess.run(
        ["bash", "-c", DRIVER], env=env, capture_output=True, text=True, timeout=60
    )
    restarts = fake / "restarts"
    restarted = restarts.read_text().split() if restarts.exists() else []
    return done.returncode, done.stderr.splitlines(), restarted


def test_a_bridge_in_place_is_left_alone(tmp_path):
    assert ensure_bridge(tmp_path, network=True, docker0=True, ours=True) == (0, [], [])


def test_our_engine_without_docker0_is_restarted_saying_so(tmp_path):
    code, lines, restarts = ensure_bridge(tmp_path, network=True, docker0=False, ours=True)
    assert (code, restarts) == (0, ["4242"])
    assert lines == [
        "ensure-docker: our dockerd (pid 4242): its default bridge interface docker0 is gone "
        "(ip link show dev docker0), perhaps taken by another engine on this machine; "
        "restarting it to make the bridge again (data root and images kept)",
        "ensure-docker: the default bridge is back",
    ]


def test_our_engine_whose_bridge_network_does_not_answer_is_restarted(tmp_path):
    code, lines, restarts = ensure_bridge(tmp_path, network=False, docker0=False, ours=True)
    assert (code, restarts) == (0, ["4242"])
    assert 'its default network "bridge" does not answer' in lines[0]


def test_a_restart_that_does_not_bring_the_bridge_back_fails(tmp_path):
    code, lines, restarts = ensure_bridge(
        tmp_path, network=True, docker0=False, ours=True, fails=True
    )
    assert (code, restarts) == (1, ["4242"])
    assert lines[-1].startswith(
        "ensure-docker: error: after a restart our dockerd still: its default bridge "
        "interface docker0 is gone"
    )


@pytest.mark.parametrize("missing", ["docker0", "network"])
def test_an_engine_it_did_not_start_gets_one_line_and_no_restart(tmp_path, missing):
    code, lines, restarts = ensure_bridge(
        tmp_path, network=missing != "network", docker0=False, ours=False
    )
    assert (code, restarts) == (0, [])
    [line] = lines
    assert line.startswith(
        f"ensure-docker: warning: the engine at {OURS} (not started by ensure-docker): its "
        f"default {'bridge interface docker0 is gone' if missing == 'docker0' else 'network'}"
    )
    assert line.endswith(
        "so bridge-networked containers fail with 'could not find bridge'; restart that engine "
        "(e.g. 'systemctl restart docker') and stop any other dockerd on this machine that "
        "uses the same bridge"
    )


def test_an_engine_elsewhere_is_not_looked_for_on_this_machine(tmp_path):
    """A rootless or VM engine keeps its bridge out of this machine's sight."""
    elsewhere = "unix:///run/user/1000/docker.sock"
    assert ensure_bridge(tmp_path, network=True, docker0=False, ours=False, host=elsewhere) == (
        0,
        [],
        [],
    )


@pytest.mark.usefixtures("docker_client")
def test_the_engine_under_test_has_its_bridge():
    """Read-only, on the real engine: the check finds nothing wrong."""
    check = textwrap.dedent(
        """\
        source "$SCRIPT"
        why=$(bridge_missing)
        printf '%s' "$why"
        """
    )
    env = os.environ | {"SCRIPT": str(SCRIPT)}
    env.setdefault("DOCKER_HOST", OURS)
    done = subprocess.run(["bash", "-c", check], env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
