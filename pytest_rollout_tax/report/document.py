"""The report as one typed document: a :class:`Report` of :class:`SubstrateEntry` items, each
with its :class:`~.projection.Projected` figures, turned into the ``rollout-tax/2`` JSON
(docs/json.md) and back at the file boundary only. :meth:`Report.from_dict` is where a file's
report is checked (``schema.check``) and where older schemas are read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.control_plane import ControlPlane
from ..core.known import from_known
from ..core.price import Rate
from ..core.record import renamed_phases
from ..core.stats import Stats
from .cost import Cost
from .projection import Decomposition, FleetHours, Means, Projected, Scale, Spread, spread
from .records import Burst, Command, Divergence, LaunchType, Pool, RateLimited
from .schema import SAMPLE_METRICS, SCHEMA, check
from .training_doc import Training

#: What an entry's projection is before ``build`` projects it.
UNPROJECTED = Projected(worker_hours=None, tax_hours=None, decomposition=None)
#: The STATS entries of a substrate, each None when nothing was measured.
STATS_KEYS = (*SAMPLE_METRICS, "think")
#: Keys an entry has in the JSON only when they are set (substrates that measure them).
OPTIONAL_KEYS = (
    "unbound", "runtime", "runtime_release", "runtime_platform", "snapshot", "launch_types",
    "command", "divergence", "rate_limited", "burst", "pool", "price_per_hour", "rate",
    "control_plane", "isolation",
)  # fmt: skip


@dataclass
class Isolation:
    """A sandbox runtime's ``isolation`` entry: its reference (the kind on ``runc``) and, with
    one in the run, its excess command time per step and command-time ratio over the tests both
    ran (``report/isolation.py``)."""

    reference: str | None
    per_step_s: float | None = None
    command_ratio: float | None = None
    tests: int = 0


@dataclass
class SubstrateEntry:
    """One ``substrates[NAME]`` entry: what was measured on a substrate, and its projection."""

    kind: str | None = None
    transport: str | None = None
    rollouts: int = 0
    failures: int = 0
    #: Failed rollouts by reason, the most frequent first.
    failure_reasons: dict[str, int] = field(default_factory=dict)
    cold_start: Stats | None = None
    action: Stats | None = None
    step: Stats | None = None
    teardown: Stats | None = None
    trajectory: Stats | None = None
    think: Stats | None = None
    phases: dict[str, Stats | None] = field(default_factory=dict)
    projected: Projected = UNPROJECTED
    # Set only on substrates that measure them (docs/json.md):
    unbound: int | None = None
    runtime: str | None = None
    runtime_release: str | None = None
    runtime_platform: str | None = None
    snapshot: bool = False
    launch_types: dict[str, LaunchType] | None = None
    command: Command | None = None
    divergence: Divergence | None = None
    rate_limited: RateLimited | None = None
    burst: list[Burst] | None = None
    pool: Pool | None = None
    price_per_hour: float | None = None
    rate: Rate | None = None
    control_plane: ControlPlane | None = None
    isolation: Isolation | None = None

    @property
    def failed_all(self) -> bool:
        """True when the substrate ran rollouts and every one of them failed: it has no
        valid result to rank or compare."""
        return bool(self.rollouts) and self.failures >= self.rollouts

    @property
    def success_rate(self) -> float | None:
        """The share of its rollouts that succeeded (None when it ran none)."""
        return 1 - self.failures / self.rollouts if self.rollouts else None

    @property
    def no_valid_result(self) -> str | None:
        """``no valid result (4 of 4 failed: REASON)``, REASON the most frequent failure; None
        when some rollout succeeded."""
        if not self.failed_all:
            return None
        reasons = self.failure_reasons
        why = max(reasons, key=lambda reason: reasons[reason]) if reasons else "no reason recorded"
        return f"no valid result ({self.failures} of {self.rollouts} failed: {why})"

    def isolates(self, name: str) -> bool:
        """False for the unisolated floor: the ``local`` kind, commands on the host itself."""
        return (self.kind or name) != "local"

    @property
    def idle_per_claim_s(self) -> float:
        """A warm pool's idle sandbox-seconds per claimed rollout (0 without a pool)."""
        return self.pool.idle_per_claim_s if self.pool else 0.0

    @property
    def billing(self) -> Rate | None:
        """Its billing: its ``rate``, or an older run's ``price_per_hour`` (a price per
        sandbox-hour, the user's); None when it has no price."""
        if self.rate:
            return self.rate
        if self.price_per_hour is not None:
            return Rate(instance_hour=self.price_per_hour)
        return None

    def means(self) -> Means:
        """What its projection starts from (:func:`~.projection.project`)."""

        def mean(stats: Stats | None) -> float | None:
            return stats.mean if stats else None

        isolation = self.isolation
        return Means(
            cold_start_s=mean(self.cold_start),
            action_s=mean(self.action),
            step_s=mean(self.step),
            teardown_s=mean(self.teardown) or 0.0,
            idle_s=self.idle_per_claim_s,
            command_s=self.command.mean_s if self.command else None,
            isolation_s=isolation.per_step_s if isolation else None,
            think_s=mean(self.think),
            rate=self.billing,
            bursts=tuple(
                (level.concurrency, level.cold_start.mean)
                for level in self.burst or ()
                if level.cold_start
            ),
            pool_size=self.pool.size if self.pool else None,
        )

    @property
    def worker_hours(self) -> float | None:
        return self.projected.worker_hours

    @property
    def tax_hours(self) -> float | None:
        return self.projected.tax_hours

    @property
    def dollars(self) -> float | None:
        """The projection's dollars (``cost_usd``), None without a price."""
        return self.projected.cost.dollars if self.projected.cost else None

    def to_dict(self, *, fleet: bool = False) -> dict[str, Any]:
        """The JSON entry; ``fleet``: whether the run projected a fleet (its key is then there,
        None where this substrate could not be projected on it)."""
        projected = self.projected
        entry: dict[str, Any] = {
            "kind": self.kind,
            "transport": self.transport,
            "rollouts": self.rollouts,
            "failures": self.failures,
            "failure_reasons": dict(self.failure_reasons),
            **{key: _stats_dict(getattr(self, key)) for key in STATS_KEYS},
            "phases": {name: _stats_dict(stats) for name, stats in self.phases.items()},
            "worker_hours": projected.worker_hours,
            "tax_hours": projected.tax_hours,
            "decomposition": projected.decomposition.to_dict() if projected.decomposition else None,
        }
        for key in OPTIONAL_KEYS:
            value = getattr(self, key)
            if value is not None and value is not False:
                entry[key] = _optional_dict(value)
        if fleet:
            entry["fleet"] = projected.fleet.to_dict() if projected.fleet else None
        if projected.cost is not None:
            entry["cost"] = projected.cost.to_dict()
            entry["cost_usd"] = projected.cost.dollars
        return entry

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> SubstrateEntry:
        """An entry as a report file has it (``schema.check`` checked it)."""
        optional: dict[str, Any] = {key: entry.get(key) for key in OPTIONAL_KEYS}
        optional["snapshot"] = bool(entry.get("snapshot"))
        for key, read in READERS.items():
            if optional[key] is not None:
                optional[key] = read(optional[key])
        return cls(
            kind=entry.get("kind"),
            transport=entry.get("transport"),
            rollouts=entry.get("rollouts") or 0,
            failures=entry.get("failures") or 0,
            failure_reasons=dict(entry.get("failure_reasons") or {}),
            **{key: _stats(entry.get(key)) for key in STATS_KEYS},
            phases={
                name: _stats(stats)
                for name, stats in renamed_phases(entry.get("phases") or {}).items()
            },
            projected=_projected(entry),
            **optional,
        )


@dataclass
class Ranked:
    """One item of the ranking (``report/ranking.py``): a substrate's figures, its ratio to the
    reference, and what the noise test said of the difference."""

    substrate: str
    worker_hours: float | None = None
    tax_hours: float | None = None
    dollars: float | None = None
    #: Its figure over the reference's (None: no figure to rank by).
    ratio: float | None = None
    #: ``resolved``, ``within noise`` or ``untested``; None for the reference and the floor.
    noise: str | None = None
    #: The noise test's own words.
    why: str | None = None
    success: float | None = None
    isolates: bool = True
    #: An unisolated substrate cheaper than the reference.
    floor: bool = False
    #: Why it has no ratio, when every rollout failed.
    no_valid_result: str | None = None


@dataclass
class Report:
    """The whole report: the run's facts, its projection's scale, an entry per substrate, the
    ranking, and every rollout's raw samples (``rollouts``, rows made on demand)."""

    projection: Scale
    substrates: dict[str, SubstrateEntry]
    ranking: list[Ranked]
    plugin_version: str
    machine: dict[str, Any]
    commit: dict[str, Any] | None = None
    #: A shard's or a merged run's client facts (shard, workload, saturation), or None.
    client: dict[str, Any] | None = None
    created: str = ""
    schema: str = SCHEMA
    #: Selected substrates that ran no rollout, and why.
    not_run: dict[str, str] = field(default_factory=dict)
    #: Sandboxes more than one rollout got (each an error).
    shared_sandboxes: list[dict] = field(default_factory=list)
    rollouts: Sequence[dict] = ()
    #: A merged run's shards (``report/merge.py``): each client, and the merge's facts.
    clients: list[dict] | None = None
    merge: dict | None = None
    #: What the trainer waits for (``--rollout-train``, ``report/training.py``), or None.
    training: Training | None = None

    @property
    def spread(self) -> Spread | None:
        """The cold-start and worker-hours pairs of the substrates with a valid result."""
        valid = {name: e for name, e in self.substrates.items() if not e.failed_all}
        return spread(
            {name: e.cold_start.p50 for name, e in valid.items() if e.cold_start},
            {name: e.worker_hours for name, e in valid.items() if e.worker_hours is not None},
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``rollout-tax/2`` JSON (``rollouts[]`` the sequence as it is)."""
        fleet = self.projection.fleet is not None
        spread_ = self.spread
        document = {
            "schema": self.schema,
            "created": self.created,
            "plugin_version": self.plugin_version,
            "machine": self.machine,
            "commit": self.commit,
            "client": self.client,
            "projection": self.projection.to_dict(),
            "substrates": {n: e.to_dict(fleet=fleet) for n, e in self.substrates.items()},
            "spread": spread_.to_dict() if spread_ else None,
            "ranking": [dataclasses.asdict(item) for item in self.ranking],
            "not_run": dict(self.not_run),
            "shared_sandboxes": list(self.shared_sandboxes),
            "rollouts": self.rollouts,
        }
        if self.merge is not None:
            document |= {"clients": self.clients, "merge": self.merge}
        if self.training is not None:
            document["training"] = self.training.to_dict()
        return document

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        """The report a file holds, schema ``rollout-tax/2`` or ``/1``; a ValueError names the
        first thing that is not a report's (``substrates.x.cold_start.p50: expected a number``).
        """
        check(data)
        try:
            return cls._of(data)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a rollout-tax report ({type(exc).__name__}: {exc})") from None

    @classmethod
    def _of(cls, data: dict[str, Any]) -> Report:
        return cls(
            projection=Scale.from_dict(data["projection"]),
            substrates={n: SubstrateEntry.from_dict(e) for n, e in data["substrates"].items()},
            ranking=[from_known(Ranked, item) for item in data.get("ranking") or ()],
            plugin_version=data.get("plugin_version", "?"),
            machine=data.get("machine") or {},
            commit=data.get("commit"),
            client=data.get("client"),
            created=data.get("created", ""),
            schema=data["schema"],
            not_run=dict(data.get("not_run") or {}),
            shared_sandboxes=list(data.get("shared_sandboxes") or ()),
            rollouts=[
                {**item, "phases": renamed_phases(item["phases"])}
                if isinstance(item, dict) and isinstance(item.get("phases"), dict)
                else item
                for item in data.get("rollouts") or []
            ],
            clients=data.get("clients"),
            merge=data.get("merge"),
            training=Training.from_dict(data["training"]) if data.get("training") else None,
        )


#: How each sub-record of an entry is read from its JSON (the rest are plain values).
READERS: dict[str, Callable[[Any], Any]] = {
    "launch_types": lambda types: {kind: LaunchType.from_dict(t) for kind, t in types.items()},
    "command": Command.from_dict,
    "divergence": Divergence.from_dict,
    "rate_limited": RateLimited.from_dict,
    "burst": lambda levels: [Burst.from_dict(level) for level in levels],
    "pool": Pool.from_dict,
    "rate": Rate.from_dict,
    "control_plane": ControlPlane.from_dict,
    "isolation": lambda isolation: from_known(Isolation, isolation),
}


def _optional_dict(value: Any) -> Any:
    """The JSON of an entry's optional value: a sub-record's ``to_dict``, item by item."""
    if isinstance(value, list):
        return [_optional_dict(item) for item in value]
    if isinstance(value, dict):
        return {key: _optional_dict(item) for key, item in value.items()}
    if isinstance(value, Isolation):
        return dataclasses.asdict(value)
    return value.to_dict() if hasattr(value, "to_dict") else value


def _projected(entry: dict[str, Any]) -> Projected:
    parts, fleet, cost = entry.get("decomposition"), entry.get("fleet"), entry.get("cost")
    return Projected(
        worker_hours=entry.get("worker_hours"),
        tax_hours=entry.get("tax_hours"),
        decomposition=from_known(Decomposition, parts) if parts else None,
        fleet=from_known(FleetHours, fleet) if fleet else None,
        cost=from_known(Cost, cost) if cost else _dollars_alone(entry.get("cost_usd")),
    )


def _dollars_alone(dollars: float | None) -> Cost | None:
    """The cost of an older run that kept its dollars but not their parts."""
    return None if dollars is None else Cost(dollars=dollars, environment_dollars=dollars)


def _stats(data: dict | None) -> Stats | None:
    return Stats.from_dict(data) if data else None


def _stats_dict(stats: Stats | None) -> dict | None:
    return stats.to_dict() if stats else None
