"""Where a run happened: machine and commit facts for reports, without identifying secrets."""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Any

#: Environment variables that name the CI service a run is on (their presence, never values).
CI_VARIABLES = (
    ("GITHUB_ACTIONS", "GitHub Actions"),
    ("GITLAB_CI", "GitLab CI"),
    ("BUILDKITE", "Buildkite"),
    ("CIRCLECI", "CircleCI"),
    ("JENKINS_URL", "Jenkins"),
    ("CI", "CI"),
)


def ci_name() -> str | None:
    """The CI service this process runs on, from its well-known variables; None: not on CI."""
    return next((name for variable, name in CI_VARIABLES if os.environ.get(variable)), None)


def machine_info() -> dict[str, Any]:
    """CPU count, Python and platform; the hostname only as a hash (to tell machines apart);
    the CI service, if any (where the client ran)."""
    return {
        "ci": ci_name(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname_sha256": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
    }


#: What aligning several clients by epoch time is worth (said wherever it is done).
CLOCK_NOTE = (
    "shards are aligned by their wall clocks: the alignment is only as good as the clients' "
    "clock sync (NTP, chrony)"
)
#: A client is saturated when it used more than this share of its cores while measuring.
SATURATED = 0.9


def _cpu_seconds() -> float:
    """User and system CPU seconds of this process and its finished children (xdist workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _machine_ticks() -> tuple[int, int] | None:
    """(busy, total) CPU ticks of the whole machine since boot (Linux ``/proc/stat``), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(value) for value in handle.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = sum(fields[3:5])  # idle and iowait; guest time is already counted in user
    return sum(fields) - idle, sum(fields)


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


@dataclass(frozen=True)
class Saturation:
    """How busy the client was while it measured, from :meth:`start` to :meth:`report`."""

    wall: float
    cpu_s: float
    ticks: tuple[int, int] | None
    load: float | None

    @classmethod
    def start(cls) -> Saturation:
        return cls(time.monotonic(), _cpu_seconds(), _machine_ticks(), _load())

    def report(self) -> dict[str, Any]:
        """The report's ``client.saturation``: the process's CPU time over wall time (its
        cores' share, ``process_cpu_share``), the whole machine's busy share where the system
        says (Linux), the 1-minute load average at start and end, and whether it passed
        :data:`SATURATED`."""
        wall = max(time.monotonic() - self.wall, 1e-9)
        cores = os.cpu_count() or 1
        cpu_s = _cpu_seconds() - self.cpu_s
        ticks = _machine_ticks()
        machine = None
        if self.ticks is not None and ticks is not None and ticks[1] > self.ticks[1]:
            machine = (ticks[0] - self.ticks[0]) / (ticks[1] - self.ticks[1])
        process = cpu_s / wall / cores
        return {
            "wall_s": wall,
            "cpu_s": cpu_s,
            "cpu_count": cores,
            "process_cpu_share": process,
            "machine_cpu_share": machine,
            "load_start": self.load,
            "load_end": _load(),
            "saturated": max(process, machine or 0.0) > SATURATED,
        }


def commit_info(cwd: str | os.PathLike[str] = ".") -> dict[str, Any] | None:
    """``{"sha", "branch", "dirty"}`` of the git checkout at ``cwd``, or None outside one."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        branch = git("rev-parse", "--abbrev-ref", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"sha": sha, "branch": branch, "dirty": dirty}
