"""pytest-xdist remote workers (docs/scale-out.md): rollouts run in execnet socket servers
(``--tx socket=HOST:PORT//chdir=DIR``), their records come back to the controller on the
teardown reports, as with -n."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.ec2_moto import free_port

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
    result.stdout.fnmatch_lines(["*= rollout tax =*", "local * 4 * 0 *"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert len(report["rollouts"]) == 4
    # a local sandbox is named rollout-tax-<session>-<pid>-*: the socket servers ran them
    pids = {
        int(re.search(r"rollout-tax-\w+-(\d+)-", r["sandbox_id"])[1]) for r in report["rollouts"]
    }
    assert pids <= {pid for pid, _ in socket_servers} and pids
