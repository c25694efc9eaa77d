"""The runloop substrate's options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..hosted import HostedOptions

API_KEY_VARIABLE = "RUNLOOP_API_KEY"
BASE_URL_VARIABLE = "RUNLOOP_BASE_URL"
DEFAULT_BASE_URL = "https://api.runloop.ai"
#: Runloop publishes no limit on devbox creations (its API reference: back off on 429), so
#: creates are not paced unless ``max_creates_per_s`` says so.
PUBLISHED_CREATES_PER_S = 0.0
#: Runloop's preset sizes (vCPU, GiB of memory), from its launch parameters' reference;
#: a devbox without one is SMALL.
SIZES = {
    "X_SMALL": (0.5, 1.0),
    "SMALL": (1.0, 2.0),
    "MEDIUM": (2.0, 4.0),
    "LARGE": (2.0, 8.0),
    "X_LARGE": (4.0, 16.0),
    "XX_LARGE": (8.0, 32.0),
}
DEFAULT_SIZE = "SMALL"
#: Runloop's longest devbox lifetime (``keep_alive_time_seconds``): 48 hours.
MAX_KEEP_ALIVE_S = 172_800


@dataclass
class RunloopOptions(HostedOptions):
    labels_option: ClassVar[str] = "metadata"
    #: The blueprint every devbox starts from, by name (None: Runloop's default image).
    blueprint: str | None = None
    #: A preset size (``X_SMALL`` ... ``XX_LARGE``; None: Runloop's default, SMALL).
    size: str | None = None
    #: Devbox lifetime in seconds: Runloop shuts a devbox down this long after its creation.
    keep_alive: int = 3600
    #: Extra metadata on every devbox (the rollout-tax.io/ ownership labels are added).
    metadata: dict[str, str] = field(default_factory=dict)
    #: Environment variables of every devbox.
    env: dict[str, str] = field(default_factory=dict)
    #: Seconds from the create request until the devbox is running.
    create_timeout: float = 300.0
    #: Seconds one API request may take (the SDK's default: 30).
    request_timeout: float = 30.0
    #: The absolute directory relative paths and commands start in; made empty at cold start.
    workdir: str = "/home/user/workspace"
    #: Creates started per second at most (0 or none: unpaced; Runloop publishes no limit).
    max_creates_per_s: float | None = PUBLISHED_CREATES_PER_S
    #: One client for every rollout, on the SDK's process-wide HTTP/2 pool, instead of a
    #: client, and so a connection set up, per rollout.
    reuse_connection: bool = False

    def check(self) -> None:
        super().check()
        if self.size is not None and self.size not in SIZES:
            raise ValueError(f"size={self.size!r}: expected one of {', '.join(SIZES)}")
        if self.blueprint is not None and not self.blueprint.strip():
            raise ValueError("blueprint: must not be empty")
        if not 1 <= self.keep_alive <= MAX_KEEP_ALIVE_S:
            raise ValueError(f"keep_alive={self.keep_alive}: expected 1 to {MAX_KEEP_ALIVE_S} s")
        for name in ("create_timeout", "request_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)}: must be > 0 s")

    def launch_parameters(self) -> dict[str, Any]:
        """Runloop's ``launch_parameters`` of every devbox."""
        launch: dict[str, Any] = {"keep_alive_time_seconds": self.keep_alive}
        if self.size is not None:
            launch["resource_size_request"] = self.size
        return launch
