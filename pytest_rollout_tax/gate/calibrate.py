"""Calibrate the regression gate on a saved run: its false-alarm rate, its power, and the rounds
it needs for 95 % power.

The gate is :func:`judge.judge`, unchanged (like with like: each workload against its own);
what varies is its input. Resamples draw whole rollouts with replacement, per workload (a
rollout's cold start, probes and steps stay together: they are correlated, and the gate must
cope with that). A/A: two resamples of the run at its own sample sizes; a false alarm is a
comparison where any check fails. Power: the same, with the second resample slowed uniformly
(every sample times ``1 + S``).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.noise import ALPHA, MIN_SAMPLES
from ..core.record import workload_of
from ..errors import ConfigError
from ..report.document import Report
from ..report.projection import Scale
from .checks import Check
from .judge import Run, judge
from .power import POWER, Group, noise_cv, rounds_for
from .sides import Side, rollout_samples

#: The fewest comparisons a calibration makes (a 1 % rate is then ~5 events, not ~0).
MIN_COMPARISONS = 500
DEFAULT_COMPARISONS = 1000
#: The most: a calibration's time grows with them (a million is minutes, not hours).
MAX_COMPARISONS = 1_000_000
#: The power ``rounds_for_95`` asks for, the largest rounds it tries, and the comparisons per
#: round count it tries (fewer than the headline figures: it is a search).
POWER_TARGET = 0.95
MAX_ROUNDS = 512
SEARCH_COMPARISONS = 200


#: One rollout's raw samples, per metric: what a resample picks whole.
Draw = dict[str, tuple[float, ...]]


@dataclass(frozen=True)
class Population:
    """One substrate's rollouts in a saved run, grouped by workload."""

    workloads: tuple[tuple[Draw, ...], ...]

    @property
    def rounds(self) -> int:
        """The run's rounds: the most rollouts any workload had."""
        return max(len(group) for group in self.workloads)

    def resample(
        self, rng: random.Random, rounds: int | None = None, factor: float = 1.0
    ) -> list[Draw]:
        """``rounds`` rollouts per workload (None: as many as the run had), times ``factor``."""
        return [d for group in self.groups(rng, rounds, factor) for d in group]

    def groups(
        self, rng: random.Random, rounds: int | None = None, factor: float = 1.0
    ) -> list[list[Draw]]:
        """:meth:`resample`, each workload's rollouts apart (the gate's tests)."""
        drawn = [rng.choices(group, k=rounds or len(group)) for group in self.workloads]
        if factor == 1.0:
            return drawn
        return [
            [{m: tuple(v * factor for v in values) for m, values in d.items()} for d in group]
            for group in drawn
        ]

    def side(self, scale: Scale) -> Side:
        """The run itself, as the gate sees it."""
        return Side.of([draw for group in self.workloads for draw in group], scale)


def populations(report: Report) -> dict[str, Population]:
    """Every substrate of a report with raw samples, its rollouts grouped by workload."""
    groups: dict[str, dict[str, list[Draw]]] = {}
    for item in report.rollouts:
        substrate = item["substrate"]
        workload = workload_of(item.get("test", ""), substrate, item.get("round", 1))
        by_workload = groups.setdefault(substrate, {})
        by_workload.setdefault(workload, []).append(rollout_samples(item))
    return {
        name: Population(tuple(tuple(group) for group in by_workload.values()))
        for name, by_workload in groups.items()
    }


@dataclass(frozen=True)
class Rates:
    """How often the gate failed in ``comparisons`` comparisons: overall and per check."""

    comparisons: int
    alarms: int
    by_check: dict[str, int]

    @property
    def rate(self) -> float:
        return self.alarms / self.comparisons


@dataclass(frozen=True)
class Calibration:
    """What ``calibrate`` measured on one saved run."""

    comparisons: int
    false_alarms: Rates
    power: Rates
    slowdown: float
    rounds: int
    rounds_for_95: int | None  #: None: not reached by MAX_ROUNDS
    checks: tuple[Check, ...]
    seed: int
    #: The advice checked: the A/A false-alarm rate at ``rounds_for_95`` rounds (None without).
    advised_false_alarms: Rates | None = None
    #: Per substrate and check: the noise and the rounds to see the threshold (power.py).
    needs: tuple[Need, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "comparisons": self.comparisons,
            "false_alarm_rate": self.false_alarms.rate,
            "power": self.power.rate,
            "slowdown": self.slowdown,
            "rounds_for_95": self.rounds_for_95,
            "false_alarm_rate_at_95": (
                self.advised_false_alarms.rate if self.advised_false_alarms else None
            ),
            "rounds": self.rounds,
            "max_rounds": MAX_ROUNDS,
            "seed": self.seed,
            "rounds_needed": [dataclasses.asdict(need) for need in self.needs],
            "checks": [
                {
                    "check": check.text,
                    "false_alarm_rate": self.false_alarms.by_check[check.text] / self.comparisons,
                    "power": self.power.by_check[check.text] / self.comparisons,
                }
                for check in self.checks
            ],
        }


@dataclass(frozen=True)
class Need:
    """What one check needs on one substrate: its noise, and the rounds per workload at which
    the gate's minimum detectable change (80 % power, ALPHA) reaches the check's threshold."""

    substrate: str
    check: str
    cv: float | None  #: None: no workload with two rollouts
    rounds: int | None  #: None: unknown (no noise measured, or a threshold of 0)


def needs(pops: dict[str, Population], checks: Sequence[Check], scale: Scale) -> list[Need]:
    """:class:`Need` of every check on every substrate, from the run's own spread."""
    found = []
    for name, population in pops.items():
        whole = population.side(scale)
        sides = [Side.of(group, scale) for group in population.workloads]
        for check in checks:
            metric = "worker_hours" if check.metric == "cost" else check.metric
            groups = [
                Group(tuple(u), tuple(u)) for side in sides if (u := side.units(metric, check.stat))
            ]
            cv = noise_cv(groups)
            base = whole.value(check.metric, check.stat)
            share = check.threshold.share(base, check.metric) if base else None
            rounds = rounds_for(groups, cv, share, ALPHA) if cv and share else None
            found.append(Need(name, check.text, cv, rounds))
    return found


class Calibrator:
    """Runs the gate on resampled pairs of one saved run, with a seeded generator."""

    def __init__(self, report: Report, checks: Sequence[Check], seed: int = 0) -> None:
        if not checks:
            raise ConfigError("calibrate needs at least one check, e.g. cold_start.p50:15%")
        self.populations = populations(report)
        if not self.populations:
            raise ConfigError("the run has no rollouts[] with raw samples: nothing to resample")
        self.checks = tuple(checks)
        self.scale = report.projection
        self.seed = seed
        self.rng = random.Random(seed)

    @property
    def rounds(self) -> int:
        return max(p.rounds for p in self.populations.values())

    def rates(self, comparisons: int, slowdown: float = 0.0, rounds: int | None = None) -> Rates:
        """How often any check (and each check) fails: A against A slowed by ``slowdown``."""
        alarms = 0
        by_check = dict.fromkeys((c.text for c in self.checks), 0)
        for _ in range(comparisons):
            before = {n: self._side(p, rounds, 1.0) for n, p in self.populations.items()}
            after = {n: self._side(p, rounds, 1.0 + slowdown) for n, p in self.populations.items()}
            outcomes = judge(self.checks, before, after)
            failed = {o.check.text for o in outcomes if o.status == "failed"}
            alarms += bool(failed)
            for text in failed:
                by_check[text] += 1
        return Rates(comparisons, alarms, by_check)

    def _side(self, population: Population, rounds: int | None, factor: float) -> Run:
        """A resampled run of ``population`` as the gate sees it: whole, and per workload."""
        groups = population.groups(self.rng, rounds, factor)
        tests = {str(i): Side.of(group, self.scale) for i, group in enumerate(groups)}
        whole = Side.of([d for group in groups for d in group], self.scale)
        return Run(whole, tests, self.scale)

    def default_slowdown(self) -> float:
        """Twice the largest threshold, as a fraction of the run's own figure."""
        fractions = []
        for population in self.populations.values():
            side = population.side(self.scale)
            for check in self.checks:
                base = side.value(check.metric, check.stat)
                if base:
                    fractions.append(check.threshold.allowed(base, check.metric) / base)
        if not fractions:
            raise ConfigError("the run has no figure any check applies to: nothing to calibrate")
        return 2 * max(fractions)

    def rounds_for(self, slowdown: float, comparisons: int = SEARCH_COMPARISONS) -> int | None:
        """The fewest rounds per workload with power >= POWER_TARGET at ``slowdown``, never
        fewer than the noise test's MIN_SAMPLES: below them the threshold alone decides, and
        its false alarms are not the gate's ALPHA."""

        def enough(rounds: int) -> bool:
            return self.rates(comparisons, slowdown, rounds).rate >= POWER_TARGET

        if enough(MIN_SAMPLES):
            return MIN_SAMPLES
        low, high = MIN_SAMPLES, 2 * MIN_SAMPLES
        while not enough(high):
            if high >= MAX_ROUNDS:
                return None
            low, high = high, min(2 * high, MAX_ROUNDS)
        while high - low > 1:  # enough(high), not enough(low)
            middle = (low + high) // 2
            low, high = (low, middle) if enough(middle) else (middle, high)
        return high

    def run(self, comparisons: int, slowdown: float | None = None) -> Calibration:
        if comparisons < MIN_COMPARISONS:
            raise ConfigError(f"at least {MIN_COMPARISONS} comparisons, got {comparisons}")
        if slowdown is None:
            slowdown = self.default_slowdown()
        false_alarms = self.rates(comparisons)
        power = self.rates(comparisons, slowdown)
        advised = self.rounds_for(slowdown)
        return Calibration(
            comparisons=comparisons,
            false_alarms=false_alarms,
            power=power,
            slowdown=slowdown,
            rounds=self.rounds,
            rounds_for_95=advised,
            checks=self.checks,
            seed=self.seed,
            advised_false_alarms=self.rates(comparisons, rounds=advised) if advised else None,
            needs=tuple(needs(self.populations, self.checks, self.scale)),
        )


def parse_slowdown(text: str) -> float:
    """``20%`` or ``0.2``: a uniform slowdown as a fraction (> 0)."""
    stripped = text.strip()
    try:
        value = float(stripped[:-1]) / 100 if stripped.endswith("%") else float(stripped)
    except ValueError:
        raise ConfigError(f"malformed slowdown {text!r} (expected e.g. 20% or 0.2)") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"slowdown {text!r} must be above 0, e.g. 20%")
    return value


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95 % for ``z=1.96``)."""
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def render(calibration: Calibration, label: str, substrates: Iterable[str]) -> list[str]:
    """The lines ``calibrate`` prints."""
    c = calibration
    n = c.comparisons

    def share(rates: Rates) -> str:
        low, high = wilson(rates.alarms, n)
        return f"{rates.rate:.1%} (95% CI {low:.1%}-{high:.1%}; {rates.alarms} of {n})"

    rounds = (
        f"{c.rounds_for_95} per workload"
        if c.rounds_for_95 is not None
        else f"more than {MAX_ROUNDS} per workload"
    )
    lines = [
        f"calibration of {label}",
        f"substrates: {', '.join(substrates)}; {c.rounds} rounds per workload; "
        f"{n} comparisons per figure, seed {c.seed}",
        f"checks: {', '.join(check.text for check in c.checks)}",
        f"false-alarm rate (A/A):         {share(c.false_alarms)}",
        f"power at +{c.slowdown:.0%} slowdown:     {share(c.power)}",
        f"rounds for {POWER_TARGET:.0%} power at +{c.slowdown:.0%}: {rounds} "
        f"(the run has {c.rounds}; never below the noise test's {MIN_SAMPLES})",
    ]
    if c.advised_false_alarms is not None:
        lines.append(
            f"false-alarm rate (A/A) at {c.rounds_for_95} rounds: {share(c.advised_false_alarms)}"
        )
    for check in c.checks:
        alarms, hits = c.false_alarms.by_check[check.text], c.power.by_check[check.text]
        lines.append(f"  {check.text}: false alarms {alarms / n:.1%}, power {hits / n:.1%}")
    if c.needs:
        lines.append(
            f"rounds needed to see each threshold at {POWER:.0%} power (p < {ALPHA}), from the "
            "run's noise:"
        )
    for need in c.needs:
        cv = f"noise CV {need.cv:.0%}" if need.cv is not None else "noise unknown"
        rounds = f"{need.rounds} rounds" if need.rounds is not None else "rounds unknown"
        lines.append(f"  {need.substrate} {need.check}: {cv}, {rounds}")
    return lines
