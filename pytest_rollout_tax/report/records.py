"""The sub-records of a substrate's report entry (docs/json.md), each a dataclass whose
``to_dict`` is the JSON it was and whose ``from_dict`` reads any version's (missing keys
defaulted, unknown ones left): launch types, a replay's command time and divergence, the
creates a limiter refused, burst levels and a warm pool. The entry's ``rate`` is a
:class:`~..core.price.Rate` and its ``control_plane`` a :class:`~..core.substrate.ControlPlane`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.known import from_known
from ..core.pool_stats import PoolStats, idle_per_claim
from ..core.stats import Stats
from ..fleet import burst
from ..fleet.burst import BurstLevel

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

R = TypeVar("R", bound="DataclassInstance")


def _read(cls: type[R], data: Mapping[str, Any], *stats: str) -> R:
    """``cls`` of ``data``, its ``stats`` fields read as STATS objects (None when absent)."""
    read = {key: Stats.from_dict(data[key]) if data.get(key) else None for key in stats}
    return from_known(cls, {**data, **read})


def _stats_dict(stats: Stats | None) -> dict[str, Any] | None:
    return stats.to_dict() if stats else None


@dataclass(frozen=True)
class LaunchType:
    """A ``launch_types[warm|cold]`` item: claimed sandboxes of one launch type (k8s claims)."""

    rollouts: int = 0
    #: Its share of the rollouts whose launch type is known.
    share: float = 0.0
    cold_start: Stats | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rollouts": self.rollouts, "share": self.share,
                "cold_start": _stats_dict(self.cold_start)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchType:
        return _read(cls, data, "cold_start")


@dataclass(frozen=True)
class Command:
    """The ``command`` entry: a shape replay's command time per step, known apart from the
    step, and how many of the steps recorded it."""

    mean_s: float
    recorded_steps: int = 0
    steps: int = 0
    source: str = "recorded"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "mean_s": self.mean_s,
                "recorded_steps": self.recorded_steps, "steps": self.steps}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Command:
        return from_known(cls, data)


@dataclass(frozen=True)
class Divergence:
    """The ``divergence`` entry of an exact replay: steps that did not do what was recorded."""

    replayed_steps: int = 0
    divergent_steps: int = 0
    #: Divergent steps by kind, the most frequent first.
    kinds: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Divergence:
        return from_known(cls, data)


@dataclass(frozen=True)
class RateLimited:
    """The ``rate_limited`` entry: rollouts whose create the provider's limiter refused."""

    rollouts: int = 0
    #: The provider's messages, each with how often it came.
    messages: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RateLimited:
        return from_known(cls, data)


@dataclass(frozen=True)
class InfraFailed:
    """The ``infra_failed`` entry: rollouts the infrastructure failed (outcome ``infra_failed``,
    or ``rate_limited``), apart from the workload's ``failures`` (``core/infra.py``)."""

    rollouts: int = 0
    #: Their share of the substrate's rollouts.
    rate: float = 0.0
    #: Their causes (``start``, ``unavailable``, ``lost``, ``teardown``, ``rate_limited``, ...),
    #: the most frequent first.
    causes: dict[str, int] = field(default_factory=dict)
    #: Their reasons, as ``failure_reasons`` counts the workload's.
    reasons: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InfraFailed:
        return from_known(cls, data)


@dataclass(frozen=True)
class Burst:
    """A ``burst[]`` item: one burst level as the report keeps it (``BurstLevel.to_dict``)."""

    concurrency: int
    cold_start: Stats | None = None
    ready_all_s: float | None = None
    creates_per_s: float | None = None
    failures: int = 0
    failure_reasons: dict[str, int] = field(default_factory=dict)
    rate_limited: int = 0
    released_at: float | None = None
    #: The raw cold starts (None: written by a version that did not keep them).
    cold_start_s: list[float] | None = None
    #: Merged levels only: how far apart the clients' releases were.
    release_spread_s: float | None = None

    @classmethod
    def of(cls, level: BurstLevel) -> Burst:
        return cls.from_dict(level.to_dict())

    def level(self) -> BurstLevel:
        """The level itself, to merge (a ValueError when its raw cold starts were not kept)."""
        return BurstLevel.from_dict(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self) | {"cold_start": _stats_dict(self.cold_start)}
        for key in ("cold_start_s", "release_spread_s"):
            if data[key] is None:
                del data[key]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Burst:
        return _read(cls, data, "cold_start")


def knee(levels: Sequence[Burst]) -> int | None:
    """The knee of a substrate's burst levels (:func:`~..fleet.burst.knee`), or None."""
    return burst.knee([level.to_dict() for level in levels])


@dataclass(frozen=True)
class Pool:
    """The ``pool`` entry: what a warm pool of the substrate did (``PoolStats.to_dict``)."""

    size: int
    pools: int = 1
    hits: int = 0
    misses: int = 0
    idle_sandbox_s: float = 0.0
    creations: Stats | None = None
    #: The raw creation times (None: written by a version that did not keep them).
    creation_s: list[float] | None = None
    creation_failures: int = 0
    failure_reasons: dict[str, int] = field(default_factory=dict)
    made_by_tool: bool = True

    @classmethod
    def of(cls, stats: PoolStats) -> Pool:
        return cls.from_dict(stats.to_dict())

    @property
    def claims(self) -> int:
        return self.hits + self.misses

    @property
    def idle_per_claim_s(self) -> float:
        """The idle sandbox time each claimed rollout stands for (the projection's term)."""
        return idle_per_claim(self.idle_sandbox_s, self.claims)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self) | {"creations": _stats_dict(self.creations)}
        if self.creation_s is None:
            del data["creation_s"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pool:
        return _read(cls, data, "creations")
