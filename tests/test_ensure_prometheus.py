"""``scripts/ensure-prometheus`` stops only the processes its install started (issue 47,
finding 8: it ran ``pkill -x prometheus``, ending every such process on the machine).

The install is Debian's, stood in for by an ``apt-get`` on a PATH of its own that installs two
programs and starts one as a package's service would; beside it runs a foreign process of the
same name, which must outlive both runs of the script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "scripts" / "ensure-prometheus"
TOOLS = ("bash", "mkdir", "date", "dirname", "pgrep", "awk", "sleep", "cat", "chmod")

PROGRAM = """#!/bin/bash
if [ "${1:-}" = --version ]; then echo "prometheus, version 2.42.0"; exit 0; fi
while :; do sleep 1; done
"""

APT_GET = """#!/bin/bash
# apt-get update | install: the packages' programs, and their service started as Debian does
case " $* " in *" install "*)
    for name in prometheus prometheus-pushgateway; do
        printf '%s' "$PROGRAM" >"$BIN/$name"; chmod +x "$BIN/$name"
    done
    "$BIN/prometheus" serve </dev/null >/dev/null 2>&1 &
    echo $! >"$BIN/service.pid"
    until [ "$(cat /proc/$!/comm 2>/dev/null)" = prometheus ]; do kill -0 $! || exit 1; done ;;
esac
exit 0
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by no one yet, has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pgrep and /proc: Linux")
def test_two_runs_beside_a_foreign_prometheus_leave_it_running(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "id").write_text("#!/bin/bash\necho 0\n")  # as root, wherever the test runs
    (bin_dir / "apt-get").write_text(APT_GET)
    for stub in ("id", "apt-get"):
        (bin_dir / stub).chmod(0o755)
    foreign_dir = tmp_path / "elsewhere"
    foreign_dir.mkdir()
    (foreign_dir / "prometheus").write_text(PROGRAM)
    (foreign_dir / "prometheus").chmod(0o755)
    foreign = subprocess.Popen([foreign_dir / "prometheus"], start_new_session=True)
    env = {
        "PATH": str(bin_dir),
        "BIN": str(bin_dir),
        "PROGRAM": PROGRAM,
        "ROLLOUT_TAX_APT_LOG": str(tmp_path / "apt.log"),
        "ROLLOUT_TAX_PROMETHEUS_PIDFILE": str(tmp_path / "prometheus.pids"),
    }
    try:
        for _ in range(2):
            run = subprocess.run(
                [bin_dir / "bash", SCRIPT], env=env, capture_output=True, text=True, timeout=60
            )
            assert run.returncode == 0, run.stderr
        assert foreign.poll() is None and _alive(foreign.pid)
        service = int((bin_dir / "service.pid").read_text())
        assert (tmp_path / "prometheus.pids").read_text().split() == [str(service)]
        assert not _alive(service)
    finally:
        foreign.kill()
        foreign.wait()
        service_pid = bin_dir / "service.pid"
        if service_pid.exists() and _alive(pid := int(service_pid.read_text())):
            os.kill(pid, 9)
