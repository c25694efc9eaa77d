"""The session's step helper, ``rtx-step``: which one a sandbox gets, or why it gets none.

One static program serves a session and runs each step whole: its own process group, both
streams relayed, the deadline enforced, the status reported (see ``stepper.c``). The package
ships it prebuilt for the two machines sandboxes run on (``prebuilt/x86_64/rtx-step`` and
``prebuilt/aarch64/rtx-step``: static, musl, about 40 KB, built from ``stepper.c`` by
``scripts/build-stepper`` with zig's C compiler from PyPI), with a manifest of their sha256 and
of the source they were built from: a helper is used only while both match. A session asks its
sandbox ``uname -m`` and places the helper of that machine (:func:`for_machine`).

:data:`SWITCH` (``ROLLOUT_TAX_STEPPER``) chooses: ``prebuilt`` (the default) the package's,
else (a machine without one, or helpers that no longer match the source) one built here;
``build`` one compiled on first use with this host's C compiler (``$CC``, else ``musl-gcc``,
else ``cc``; static, for the host's own machine) into a cache keyed by its source, flags and
compiler; ``off`` none. Without a helper every session step runs through the shell's relay
(:data:`~pytest_rollout_tax.core.shell.RELAY`), the same contract at a few more processes per
step, and :attr:`Helper.why` says why.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

#: The program's name, as ``/proc/PID/comm`` shows it.
NAME = "rtx-step"
#: What ``rtx-step --check`` prints where it runs.
CHECK_OUTPUT = b"rtx-step ok\n"
#: The flags of every build, prebuilt or local.
FLAGS = ("-static", "-Os", "-s", "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections")
#: ``prebuilt`` (default), ``build`` or ``off``: see the module's docstring.
SWITCH = "ROLLOUT_TAX_STEPPER"
MODES = ("prebuilt", "build", "off")
#: How long one compile may take.
BUILD_TIMEOUT_S = 120.0
#: The machines (as ``uname -m`` names them) the package has a helper for, and the target
#: zig builds each for (``scripts/build-stepper``).
TARGETS = {"x86_64": "x86_64-linux-musl", "aarch64": "aarch64-linux-musl"}
#: Other names of those machines (``uname -m`` on some systems, Docker's platforms).
ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}
#: The folder of the prebuilt helpers and their manifest, in this package.
PREBUILT = "prebuilt"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Helper:
    """The helper a session places (``path``), or why there is none (``why``)."""

    path: Path | None
    #: ``prebuilt`` (the package's), ``built`` (compiled on this host) or ``relay`` (none).
    origin: str
    why: str | None = None


def relay(why: str) -> Helper:
    return Helper(None, "relay", why)


def for_machine(machine: str) -> Helper:
    """The helper for a sandbox whose ``uname -m`` is ``machine``, as :data:`SWITCH` says."""
    raw = os.environ.get(SWITCH, "")
    mode = raw.strip().lower() or "prebuilt"
    if mode not in MODES:
        return relay(f"{SWITCH}={raw!r} is not one of {', '.join(MODES)}")
    if mode == "off":
        return relay(f"{SWITCH}=off")
    arch = ALIASES.get(machine, machine)
    if not arch:
        return relay("the sandbox did not say its machine (uname -m)")
    prebuilt_why = None
    if mode == "prebuilt":
        path, prebuilt_why = prebuilt(arch)
        if path is not None:
            return Helper(path, "prebuilt")
    path, build_why = built(arch)
    if path is not None:
        return Helper(path, "built")
    return relay("; ".join(why for why in (prebuilt_why, build_why) if why) or "no helper")


# -- prebuilt --------------------------------------------------------------------------------


def source() -> bytes:
    return resources.files(__package__).joinpath("stepper.c").read_bytes()


def prebuilt_dir() -> Path:
    """Where the package keeps its prebuilt helpers (a folder of the installed package)."""
    return Path(str(resources.files(__package__).joinpath(PREBUILT)))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest() -> dict[str, Any] | None:
    """The prebuilt helpers' manifest (``scripts/build-stepper`` writes it), None if absent."""
    try:
        found: dict[str, Any] = json.loads((prebuilt_dir() / MANIFEST).read_text())
        return found
    except (OSError, ValueError):
        return None


@functools.cache
def prebuilt(arch: str) -> tuple[Path | None, str | None]:
    """The package's helper for ``arch`` once checked against its manifest and the source
    (runnable where it lies, else a copy in :func:`cache_dir`), or why not."""
    known = manifest()
    if known is None:
        return None, "this install has no prebuilt helpers"
    if known.get("source_sha256") != sha256(source()):
        return None, "the prebuilt helpers were built from another stepper.c"
    if arch not in known.get("helpers", {}):
        return None, f"no prebuilt helper for {arch!r} (only {', '.join(TARGETS)})"
    path = prebuilt_dir() / arch / NAME
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, f"the prebuilt helper for {arch} cannot be read: {exc.strerror}"
    digest = sha256(data)
    if digest != known["helpers"][arch].get("sha256"):
        return None, f"the prebuilt helper for {arch} does not match its manifest's sha256"
    if os.access(path, os.X_OK):
        return path, None
    try:  # an install that kept no mode bits: a runnable copy of its own
        return _cached(f"{arch}-{digest[:16]}", data), None
    except OSError as exc:
        return None, f"the prebuilt helper for {arch} cannot be made runnable: {exc.strerror}"


def _cached(key: str, data: bytes) -> Path:
    """``data`` as an executable :data:`NAME` (its name, as comm shows) in the cache."""
    target = cache_dir() / key / NAME
    if not (target.is_file() and os.access(target, os.X_OK)):
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as file:
            file.write(data)
        os.chmod(file.name, 0o755)
        os.replace(file.name, target)  # concurrent sessions: each move is whole
    return target


# -- built here ------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where built helpers are kept: ``$XDG_CACHE_HOME`` (else ``~/.cache``)/pytest-rollout-tax."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-rollout-tax"


def host_machine() -> str:
    return ALIASES.get(platform.machine(), platform.machine())


def built(arch: str) -> tuple[Path | None, str | None]:
    """The helper for ``arch`` compiled here on first use, or why it cannot be."""
    if platform.system() != "Linux":
        return None, f"this host ({platform.system()}) builds no Linux helper"
    if arch != host_machine():
        return None, f"this host builds for {host_machine()}, not {arch}"
    compiler = compiler_path()
    if compiler is None:
        return None, "this host has no C compiler ($CC, musl-gcc, cc or gcc)"
    key = source() + " ".join([compiler, *FLAGS]).encode()
    path = _build(compiler, cache_dir() / f"{arch}-{sha256(key)[:16]}" / NAME)
    if path is None:
        return None, f"{compiler} could not build a static helper (a static C library?)"
    return path, None


def compiler_path() -> str | None:
    """``$CC``, else ``musl-gcc`` (the smallest static helper), else ``cc``, else ``gcc``."""
    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"])
    return shutil.which("musl-gcc") or shutil.which("cc") or shutil.which("gcc")


@functools.cache
def _build(compiler: str, target: Path) -> Path | None:
    """``target`` (its name the helper's, as comm shows it), compiled once by ``compiler``
    unless there already; None if it cannot be (tried once per process)."""
    if target.is_file() and os.access(target, os.X_OK):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # a move within it is whole
        return _compile(compiler, target)
    except (OSError, subprocess.SubprocessError):
        return None


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
