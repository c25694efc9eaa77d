"""The options of the bwrap substrate, each checked from its value alone."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Literal

from ...core.substrate import SubstrateOptions
from .. import SANDBOX_IMAGE as DEFAULT_IMAGE
from ..docker.options import memory_bytes


@dataclass
class BwrapOptions(SubstrateOptions):
    #: The Docker image whose filesystem is every sandbox's root: exported once per image id
    #: (by the Docker engine) into :attr:`cache`, read-only under each sandbox's own layer.
    image: str = DEFAULT_IMAGE
    #: ``none`` (a network namespace of its own, only ``lo``) or ``host`` (the host's).
    network: Literal["none", "host"] = "none"
    #: Address space of each process in the sandbox (``RLIMIT_AS``), e.g. ``2g``: a limit the
    #: kernel allows without root; a cgroup's (all processes together, CPUs) needs root.
    memory: str | None = None
    #: The sandbox's working directory; relative paths in steps resolve against it.
    workdir: str = "/workspace"
    #: Extra environment variables for every command.
    env: dict[str, str] = field(default_factory=dict)
    #: Where exported roots and sandboxes' layers live (default: the user's cache directory,
    #: ``$XDG_CACHE_HOME/pytest-rollout-tax/bwrap``).
    cache: str | None = None

    def check(self) -> None:
        """Check every value; ``parse_options`` reports a ValueError as a usage error."""
        if not self.image.strip():
            raise ValueError(
                f"image={self.image!r}: expected an image reference, e.g. {DEFAULT_IMAGE}"
            )
        if self.memory is not None:
            memory_bytes(self.memory)
        if not posixpath.isabs(self.workdir) or posixpath.normpath(self.workdir) == "/":
            raise ValueError(
                f"workdir={self.workdir!r}: expected an absolute path, e.g. /workspace"
            )
        if self.cache is not None and not posixpath.isabs(self.cache):
            raise ValueError(f"cache={self.cache!r}: expected an absolute path")
        for key in self.env:
            if not key or "=" in key or "\0" in key:
                raise ValueError(f"env: invalid variable name {key!r}")
