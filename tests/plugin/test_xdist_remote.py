"""pytest-xdist remote workers (docs/scale-out.md): rollouts run in execnet socket servers
(``--tx socket=HOST:PORT//chdir=DIR``) and over SSH in a real sshd container with Python and
the plugin (``--tx ssh=...`` with ``--rsyncdir``); their records come back to the controller
on the teardown reports, as with -n."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.docker_exec import run
from support.ec2_moto import free_port, generate_key, ssh_banner, wait_until

import pytest_rollout_tax

WORKLOAD = """\
import pytest


@pytest.mark.trajectory(rounds=4)
def test_a(sandbox):
    sandbox.exec("true")
"""


@pytest.fixture
def socket_servers() -> Iterator[list[tuple[int, int]]]:
    """Two ``python -m execnet.script.socketserver`` processes: (pid, port) each."""
    servers: list[subprocess.Popen] = []
    found = []
    try:
        for _ in range(2):
            port = free_port()
            process = subprocess.Popen(
                [sys.executable, "-u", "-m", "execnet.script.socketserver", f"127.0.0.1:{port}"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
            servers.append(process)
            line = process.stdout.readline()  # printed once it listens
            assert "Entering Accept loop" in line, line
            found.append((process.pid, port))
        yield found
    finally:
        for process in servers:
            process.kill()
            process.communicate()


def test_rollouts_run_on_socket_workers_and_report_on_the_controller(pytester, socket_servers):
    pytester.makepyfile(test_remote=WORKLOAD)
    workers = [f"--tx=socket=127.0.0.1:{port}//chdir={pytester.path}" for _, port in socket_servers]
    result = pytester.runpytest("-p", "xdist", "--dist=load", *workers, "--rollout-json=r.json")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*= rollout tax =*", "local * 4 *"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert len(report["rollouts"]) == 4
    # a local sandbox is named rollout-tax-<session>-<pid>-*: the socket servers ran them
    pids = {
        int(re.search(r"rollout-tax-\w+-(\d+)-", r["sandbox_id"])[1]) for r in report["rollouts"]
    }
    assert pids <= {pid for pid, _ in socket_servers} and pids


#: The workload of the SSH test: it passes only where the container's hostname is.
ON_HOST = """\
import socket

import pytest


@pytest.mark.trajectory(rounds=3)
def test_on_the_remote_host(sandbox):
    sandbox.exec("true")
    assert socket.gethostname() == {hostname!r}
"""


@pytest.fixture
def python_over_ssh(docker_client, sshd_image, tmp_path):
    """An sshd container whose python3 sees this Python's packages and this plugin (bind
    mounts, read-only): (ssh config path, host alias, container hostname)."""
    key = generate_key(tmp_path)
    site = sysconfig.get_paths()["purelib"]
    package = str(Path(pytest_rollout_tax.__file__).resolve().parent.parent)
    container = docker_client.containers.run(
        sshd_image, detach=True, init=True, environment={"AUTHORIZED_KEYS": key.public},
        ports={"22/tcp": ("127.0.0.1", None)}, labels={"rollout-tax.io/test": "xdist-ssh"},
        volumes={site: {"bind": "/opt/site", "mode": "ro"},
                 package: {"bind": "/opt/plugin", "mode": "ro"}},
    )  # fmt: skip
    try:
        container.reload()
        port = int(container.ports["22/tcp"][0]["HostPort"])
        wait_until(lambda: ssh_banner("127.0.0.1", port), 60, "sshd did not answer")
        asked = ["python3", "-c", "import sys; print(sys.version_info[:2])"]
        version = run(container, asked).stdout.decode().strip()
        if version != str(sys.version_info[:2]):
            pytest.skip(f"the container's python3 is {version}")
        config = tmp_path / "ssh_config"
        config.write_text(
            f"Host remote\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
            f"  IdentityFile {key.private}\n  StrictHostKeyChecking no\n"
            "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        )
        yield config, "remote", container.attrs["Config"]["Hostname"]
    finally:
        container.remove(force=True)


def test_rollouts_run_over_ssh_and_report_on_the_controller(pytester, python_over_ssh):
    config, alias, hostname = python_over_ssh
    suite = pytester.mkdir("suite")
    (suite / "test_remote.py").write_text(ON_HOST.format(hostname=hostname))
    python = "env PYTHONPATH=/opt/plugin:/opt/site python3"
    tx = f"--tx=ssh={alias}//ssh_config={config}//python={python}//chdir=/root/work"
    result = pytester.runpytest(
        "-p", "xdist", "--dist=load", tx, f"--rsyncdir={suite}", "--rollout-json=r.json",
        str(suite),
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "r.json").read_text())
    assert [r["outcome"] for r in report["rollouts"]] == ["passed"] * 3
    assert report["substrates"]["local"]["rollouts"] == 3
