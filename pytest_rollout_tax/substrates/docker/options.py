"""The options of the docker substrate, each checked from its value alone."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Literal

from ...core.limits import LIMITS
from ...core.substrate import SubstrateOptions
from .. import SANDBOX_IMAGE as DEFAULT_IMAGE
from .gvisor import PLATFORMS, is_gvisor

__all__ = ["DEFAULT_IMAGE", "DockerOptions", "memory_bytes"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_MIN_MEMORY = 6 * 1024**2  # the engine refuses less


@dataclass
class DockerOptions(SubstrateOptions):
    #: The image every sandbox runs; it must exist locally unless ``pull=missing``.
    image: str = DEFAULT_IMAGE
    #: ``none`` (no network, only ``lo``), ``bridge``, ``host`` or the name of a docker network.
    network: str = "none"
    #: CPU limit, e.g. ``1.5``.
    cpus: float | None = None
    #: Memory limit, e.g. ``512m``, ``2g``.
    memory: str | None = None
    #: Maximum number of processes (``-1``: unlimited).
    pids_limit: int | None = None
    #: OCI runtime, e.g. ``runsc`` for gVisor (registered in the engine); None: its default.
    runtime: str | None = None
    #: gVisor's platform (``systrap``, ``ptrace``, ``kvm``) with a gVisor runtime: picks the
    #: engine's ``runsc-<platform>`` runtime (or ``runsc`` when it runs that platform);
    #: None: the runtime as registered.
    platform: str | None = None
    #: Restore each rollout's prepared sandbox (marker ``prepare=``) from a gVisor checkpoint.
    snapshot: bool = False
    #: The sandbox's working directory; relative paths in steps resolve against it.
    workdir: str = "/workspace"
    #: Run commands as this user (``name``, ``uid`` or ``uid:gid``); files written are theirs.
    user: str | None = None
    #: Extra environment variables for every command.
    env: dict[str, str] = field(default_factory=dict)
    #: ``never``: a missing image is an error; ``missing``: pull it once (not timed as cold start).
    pull: Literal["never", "missing"] = "never"
    #: Which leftovers ``--rollout-reap`` removes: ``mine`` (labelled with this user's name,
    #: on a shared engine) or ``all`` (every user's, and containers labelled by hand).
    reap: Literal["mine", "all"] = "mine"

    def check(self) -> None:
        """Check every value; ``parse_options`` reports a ValueError as a usage error."""

        def bad(key: str, why: str) -> ValueError:
            return ValueError(f"{key}={getattr(self, key)!r}: {why}")

        if not self.image.strip():
            raise bad("image", "expected an image reference, e.g. rollout-tax/sandbox:bookworm")
        if not _NAME.match(self.network.removeprefix("container:")):
            raise bad("network", "expected none, bridge, host or a docker network name")
        if self.cpus is not None and not 0.01 <= self.cpus <= LIMITS["docker.cpus"].high:
            # below 0.01, docker's NanoCPUs round to 0: no limit at all, silently
            raise bad("cpus", f"expected {LIMITS['docker.cpus'].text()}, e.g. 1.5")
        bound = LIMITS["docker.pids_limit"]
        if self.pids_limit is not None and self.pids_limit > bound.high:
            raise bad("pids_limit", f"expected {bound.text()} (-1: no limit)")
        if self.memory is not None:
            memory_bytes(self.memory)
        if self.pids_limit is not None and self.pids_limit < 1 and self.pids_limit != -1:
            raise bad("pids_limit", "expected a positive number of processes, or -1 for no limit")
        if self.runtime is not None and not _NAME.match(self.runtime):
            raise bad("runtime", "expected the name of an OCI runtime, e.g. runsc")
        if self.platform is not None and self.platform not in PLATFORMS:
            raise bad("platform", f"expected one of gVisor's platforms: {', '.join(PLATFORMS)}")
        if self.platform is not None and self.runtime is not None and not is_gvisor(self.runtime):
            # the runtime is the wrong one (a variant such as docker-gvisor sets the platform)
            raise bad("runtime", f"not gVisor's (runsc), which platform={self.platform!r} needs")
        if self.platform is not None and not is_gvisor(self.runtime):
            raise bad("platform", "needs a gVisor runtime (runtime=runsc)")
        if self.snapshot and not is_gvisor(self.runtime):
            raise bad("snapshot", "needs runtime=runsc (gVisor's checkpoints; runc's need CRIU)")
        if not posixpath.isabs(self.workdir):
            raise bad("workdir", "expected an absolute path, e.g. /workspace")
        if self.user is not None and not _USER.match(self.user):
            raise bad("user", "expected NAME, UID or UID:GID")
        for key in self.env:
            if not key or "=" in key or "\0" in key:
                raise ValueError(f"env: invalid variable name {key!r}")


def memory_bytes(text: str) -> int:
    """``512m`` -> 536870912 (binary units, as docker reads them); ValueError naming ``memory``."""
    match = _MEMORY.match(text)
    if not match:
        raise ValueError(f"memory={text!r}: expected a size like 512m or 2g")
    number, unit = float(match[1]), match[2].lower()
    size = int(number * 1024 ** " kmgt".index(unit or " "))
    if size < _MIN_MEMORY:
        raise ValueError(f"memory={text!r}: the engine needs at least 6m")
    return size
