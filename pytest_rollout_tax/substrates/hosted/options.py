"""The options every hosted substrate has, checked once: its workdir, create pacing, labels."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import ClassVar

from ...core.substrate import SubstrateOptions

#: Labels under this prefix are the package's own (session, rollout, owner): never an option's.
LABEL_PREFIX = "rollout-tax.io/"
#: The highest pacing an option may ask for.
MAX_CREATES_PER_S = 10_000


@dataclass
class HostedOptions(SubstrateOptions):
    """A hosted substrate's ``Options`` extends this, redeclaring a field to change its
    default (``workdir``, ``max_creates_per_s``: the provider's published limit)."""

    #: The name of the provider's own extra-labels option (``metadata``, ``tags``, ``labels``):
    #: a dict the ownership labels are added to; a key under ``rollout-tax.io/`` is refused.
    labels_option: ClassVar[str] = "labels"

    #: The absolute directory relative paths and commands start in; made empty at cold start.
    workdir: str = "/workspace"
    #: Creates started per second at most, from this process (0 or none: unpaced); the
    #: default is the provider's published limit.
    max_creates_per_s: float | None = None

    def check(self) -> None:
        pace = self.max_creates_per_s
        if pace is not None and not 0 <= pace <= MAX_CREATES_PER_S:
            raise ValueError(
                f"max_creates_per_s={pace}: expected 0 to {MAX_CREATES_PER_S:,} "
                "(0 or none: unpaced)"
            )
        extra = getattr(self, self.labels_option, None) or {}
        reserved = sorted(key for key in extra if key.startswith(LABEL_PREFIX))
        if reserved:
            raise ValueError(
                f"{self.labels_option}: {', '.join(reserved)}: {LABEL_PREFIX}* is reserved"
            )
        if not posixpath.isabs(self.workdir):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")

    @property
    def extra_labels(self) -> dict[str, str]:
        """The user's own labels (the provider's labels option)."""
        return dict(getattr(self, self.labels_option, None) or {})
