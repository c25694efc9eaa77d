"""The daytona substrate's options and what one sandbox is to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..hosted import HostedOptions

API_KEY_VARIABLE = "DAYTONA_API_KEY"
API_URL_VARIABLE = "DAYTONA_API_URL"
DEFAULT_API_URL = "https://app.daytona.io/api"
#: Daytona's published limit on sandbox creations: 600 a minute.
PUBLISHED_CREATES_PER_S = 10.0


@dataclass
class DaytonaOptions(HostedOptions):
    labels_option: ClassVar[str] = "labels"

    #: The snapshot every sandbox starts from (None: the organisation's default snapshot).
    snapshot: str | None = None
    #: Or an image (``debian:12``): the service builds a snapshot of it on first use.
    image: str | None = None
    #: Resources of a sandbox made from ``image`` (vCPUs, GiB of memory and of disk).
    cpu: int | None = None
    memory: int | None = None
    disk: int | None = None
    #: The region (default: ``DAYTONA_TARGET``, else the organisation's default).
    target: str | None = None
    #: Extra labels on every sandbox (the rollout-tax.io/ ownership labels are added).
    labels: dict[str, str] = field(default_factory=dict)
    #: Environment variables of every sandbox.
    env_vars: dict[str, str] = field(default_factory=dict)
    #: Seconds a create may take until the sandbox has started.
    create_timeout: float = 60.0
    #: Minutes without activity after which the service stops a forgotten sandbox (0: never).
    auto_stop_interval: int = 15
    #: The absolute directory relative paths and commands start in; made empty at cold start.
    workdir: str = "/home/daytona/workspace"
    #: Creates started per second at most (0: no pacing); the default is Daytona's published
    #: limit, 600 a minute.
    max_creates_per_s: float | None = PUBLISHED_CREATES_PER_S
    #: One client for every rollout (its connection warm), instead of a client, and so a
    #: connection set up, per rollout.
    reuse_connection: bool = False

    def check(self) -> None:
        super().check()
        if self.snapshot is not None and self.image is not None:
            raise ValueError("snapshot and image: give one, not both")
        if self.image is None and any(v is not None for v in (self.cpu, self.memory, self.disk)):
            raise ValueError("cpu, memory, disk: apply to a sandbox made from an image only")
        if self.create_timeout <= 0:
            raise ValueError(f"create_timeout={self.create_timeout}: must be > 0 s")
        if self.auto_stop_interval < 0:
            raise ValueError(f"auto_stop_interval={self.auto_stop_interval}: must be >= 0")
