"""gVisor's runtimes as the engine registers them: which one a platform picks, and what release
and platform a registered runtime runs (recorded on every rollout that uses it)."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

#: gVisor's platforms (how the Sentry intercepts system calls): ``systrap``, its default since
#: mid-2023; ``ptrace``, the older default; ``kvm``, where the host offers /dev/kvm.
PLATFORMS = ("systrap", "ptrace", "kvm")
_VERSION = re.compile(r"runsc version (?:\d+\.\d+~)?(\S+)")
_DEFAULT_PLATFORM = re.compile(r'-platform string\n.*\(default "(\w+)"\)')


@dataclass(frozen=True)
class Runtime:
    """A registered runtime: its engine name, and for gVisor its release and platform."""

    name: str
    #: ``20240729.0`` (``runsc --version``), None when not gVisor or its binary is not here.
    release: str | None = None
    #: ``systrap``, ``ptrace`` or ``kvm``: its ``--platform`` argument, else the binary's default.
    platform: str | None = None


def is_gvisor(name: str | None) -> bool:
    """Whether a runtime name is one of gVisor's (``runsc``, ``runsc-ptrace``, ...)."""
    return name is not None and name.split("-")[0] == "runsc"


def pick(runtime: str, platform: str | None, registered: dict[str, Any]) -> str:
    """The registered runtime that runs gVisor ``runtime`` on ``platform``: ``runsc-ptrace``
    for ``runsc`` on ptrace, else ``runsc`` itself when that is its platform; ``runtime`` (for
    the caller's not-registered message) when neither is."""
    if platform is None:
        return runtime
    named = f"{runtime}-{platform}"
    if named in registered:
        return named
    if runtime in registered and describe(runtime, registered[runtime]).platform == platform:
        return runtime
    return named if runtime in registered else runtime


def describe(name: str, entry: dict[str, Any] | None) -> Runtime:
    """The release and platform of the engine's runtime ``name`` (its ``docker info`` entry),
    read from its binary when the engine runs on this machine."""
    if not is_gvisor(name) and "runsc" not in os.path.basename((entry or {}).get("path") or ""):
        return Runtime(name)
    entry = entry or {}
    path = entry.get("path") or name
    release, default = _binary(path)
    platform = default
    for argument in entry.get("runtimeArgs") or ():
        if argument.startswith("--platform="):
            platform = argument.partition("=")[2]
    return Runtime(name, release, platform)


@functools.cache
def _binary(path: str) -> tuple[str | None, str | None]:
    """``(release, default platform)`` of the runsc at ``path``; Nones if it cannot run here."""
    try:
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        flags = subprocess.run(
            [path, "flags"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None, None
    release = _VERSION.search(version)
    default = _DEFAULT_PLATFORM.search(flags.stdout + flags.stderr)
    return (release[1] if release else None), (default[1] if default else None)
