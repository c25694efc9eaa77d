"""Where a run happened: machine and commit facts for reports, without identifying secrets."""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess

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


def machine_info() -> dict:
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


def commit_info(cwd: str | os.PathLike[str] = ".") -> dict | None:
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
