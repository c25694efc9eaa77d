"""What a warm pool did, as one record: its claims, the time its sandboxes sat idle and its
own creations. Written by the ``pool=K`` warm pool of fleet/pool.py and by a pool a
substrate's service keeps (k8s claim mode's SandboxWarmPool), and read by the report the same
way for both."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from .stats import Stats


@dataclass
class PoolStats:
    """What one or more pools of one substrate did (xdist: one pool per worker, merged)."""

    size: int
    #: Pools merged into this record (one per pytest process that used the substrate).
    pools: int = 1
    #: Claims that found a started sandbox waiting.
    hits: int = 0
    #: Claims that had to wait for a sandbox still starting.
    misses: int = 0
    #: Seconds pooled sandboxes sat started and unclaimed (until claimed or destroyed).
    idle_sandbox_s: float = 0.0
    #: The cold start of each pooled sandbox's own creation, in the background.
    creation_s: list[float] = field(default_factory=list)
    #: Pool creations that failed, by reason.
    failure_reasons: Counter[str] = field(default_factory=Counter)
    #: False for a pool the tool did not make (the user's SandboxWarmPool): its idle time is
    #: not the tool's to count, so ``idle_sandbox_s`` stays 0 and the summary says so.
    made_by_tool: bool = True

    def to_record(self) -> dict[str, Any]:
        """A plain form that travels from an xdist worker and merges with :meth:`merge`."""
        return {**asdict(self), "failure_reasons": dict(self.failure_reasons)}

    @classmethod
    def merge(cls, records: list[dict[str, Any]]) -> PoolStats:
        """One record of several pools' :meth:`to_record` forms."""
        merged = cls(size=max(r["size"] for r in records), pools=0)
        for record in records:
            merged.pools += record["pools"]
            merged.hits += record["hits"]
            merged.misses += record["misses"]
            merged.idle_sandbox_s += record["idle_sandbox_s"]
            merged.creation_s += record["creation_s"]
            merged.failure_reasons.update(record["failure_reasons"])
            merged.made_by_tool &= record.get("made_by_tool", True)
        return merged

    @property
    def claims(self) -> int:
        return self.hits + self.misses

    @property
    def idle_per_claim_s(self) -> float:
        """The idle sandbox time each claimed rollout stands for (the projection's term)."""
        return idle_per_claim(self.idle_sandbox_s, self.claims)

    def to_dict(self) -> dict[str, Any]:
        """The report's ``substrates[NAME].pool`` entry."""
        creations = Stats.of(self.creation_s)
        return {
            "size": self.size,
            "pools": self.pools,
            "hits": self.hits,
            "misses": self.misses,
            "idle_sandbox_s": self.idle_sandbox_s,
            "creations": creations.to_dict() if creations else None,
            "creation_s": list(self.creation_s),
            "creation_failures": sum(self.failure_reasons.values()),
            "failure_reasons": dict(self.failure_reasons.most_common()),
            "made_by_tool": self.made_by_tool,
        }


def idle_per_claim(idle_sandbox_s: float, claims: int) -> float:
    """Seconds pooled sandboxes sat idle, per claimed rollout (0 without a claim)."""
    return idle_sandbox_s / claims if claims else 0.0
