"""The session's step helper, ``rtx-step``: built here from ``stepper.c``, nothing downloaded.

One static program serves a session and runs each step whole: its own process group, both
streams relayed, the deadline enforced, the status reported (see ``stepper.c``). It is compiled
once per machine with the host's C compiler (``$CC``, else ``musl-gcc`` where Debian's
``musl-tools`` is installed, which makes it about 50 KB instead of glibc's 720 KB, else ``cc``;
static, so it runs in any Linux sandbox of the host's architecture) into a cache keyed by its
source, flags and compiler, and placed in each sandbox when a session opens. Without a
compiler (or a static C library), every session falls back to a relay in the shell
(:data:`~pytest_rollout_tax.core.shell.RELAY`), which keeps the same contract at a few more
processes per step (``ROLLOUT_TAX_STEPPER=off`` forces it).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

#: The program's name, as ``/proc/PID/comm`` shows it.
NAME = "rtx-step"
#: What ``rtx-step --check`` prints where it runs.
CHECK_OUTPUT = b"rtx-step ok\n"
FLAGS = ("-static", "-Os", "-s", "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections")
#: Set to ``off`` to run every session step through the shell's relay instead.
SWITCH = "ROLLOUT_TAX_STEPPER"
#: How long one compile may take.
BUILD_TIMEOUT_S = 120.0


def source() -> bytes:
    return resources.files(__package__).joinpath("stepper.c").read_bytes()


def cache_dir() -> Path:
    """Where built helpers are kept: ``$XDG_CACHE_HOME`` (else ``~/.cache``)/pytest-rollout-tax."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-rollout-tax"


def built() -> Path | None:
    """The helper for this machine, compiled on first use (None: it cannot be built here, or
    :data:`SWITCH` is ``off``)."""
    return None if os.environ.get(SWITCH, "").lower() == "off" else _build()


@functools.cache
def _build() -> Path | None:
    compiler = compiler_path()
    if compiler is None or platform.system() != "Linux":
        return None
    key = source() + " ".join([compiler, *FLAGS]).encode()
    digest = hashlib.sha256(key).hexdigest()[:16]
    target = cache_dir() / f"{platform.machine()}-{digest}" / NAME  # its name, as comm shows
    if target.is_file() and os.access(target, os.X_OK):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # a move within it is whole
        return _compile(compiler, target)
    except (OSError, subprocess.SubprocessError):
        return None


def compiler_path() -> str | None:
    """``$CC``, else ``musl-gcc`` (the smallest static helper), else ``cc``, else ``gcc``."""
    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"])
    return shutil.which("musl-gcc") or shutil.which("cc") or shutil.which("gcc")


def _compile(compiler: str, target: Path) -> Path | None:
    """Compile into a file of this process's own, then move it in place (concurrent sessions
    may build at once; each move is whole)."""
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        src = Path(work) / "stepper.c"
        src.write_bytes(source())
        out = Path(work) / NAME
        done = subprocess.run(
            [compiler, *FLAGS, "-o", str(out), str(src)],
            capture_output=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0 or not out.is_file():
            return None
        check = subprocess.run([str(out), "--check"], capture_output=True, timeout=30, check=False)
        if check.stdout != CHECK_OUTPUT:
            return None
        os.replace(out, target)
    return target
