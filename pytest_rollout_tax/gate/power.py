"""What a gate could have seen: the metric's measured noise (CV), the smallest relative change
the like-with-like test detects at the gate's level and 80 % power for a run's rollouts, and
the rounds that would bring it down to a threshold (docs/gating-fidelity.md#the-noise-floor).

The total a check judges is ``sum(mean_i)`` over its tests; with a within-test coefficient of
variation ``cv`` its relative standard error is ``cv * sqrt(sum(w_i**2 * (1/nb_i + 1/na_i)))``,
``w_i`` the test's share of the baseline's total. A one-sided test at level ``alpha`` sees, with
probability ``power``, a change of ``(z(1-alpha) + z(power))`` standard errors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

#: The power the minimum detectable effect is stated at.
POWER = 0.8


@dataclass(frozen=True)
class Group:
    """One test's per-rollout figures of a metric in both runs (before any threshold)."""

    baseline: tuple[float, ...]
    now: tuple[float, ...]


def noise_cv(groups: Sequence[Group]) -> float | None:
    """The pooled within-test coefficient of variation of the per-rollout figures: each
    rollout's deviation from its own test's mean on its own side, relative to that mean (None:
    no side of a test has two rollouts)."""
    squares, freedom = 0.0, 0
    for group in groups:
        for side in (group.baseline, group.now):
            if len(side) < 2:
                continue
            centre = math.fsum(side) / len(side)
            if centre <= 0:
                continue
            squares += math.fsum((x / centre - 1) ** 2 for x in side)
            freedom += len(side) - 1
    return math.sqrt(squares / freedom) if freedom else None


def _shares(groups: Sequence[Group]) -> list[float]:
    means = [math.fsum(g.baseline) / len(g.baseline) for g in groups]
    total = math.fsum(means)
    return [m / total for m in means] if total > 0 else [1 / len(groups)] * len(groups)


def _z(alpha: float, power: float) -> float:
    normal = NormalDist()
    return normal.inv_cdf(1 - alpha) + normal.inv_cdf(power)


def mde(groups: Sequence[Group], cv: float, alpha: float, power: float = POWER) -> float:
    """The minimum detectable relative change of the total (0.25: +25 %) for these groups'
    rollout counts."""
    used = [g for g in groups if g.baseline and g.now]
    if not used:
        return math.inf
    weights = _shares(used)
    spread = math.fsum(
        w * w * (1 / len(g.baseline) + 1 / len(g.now)) for w, g in zip(weights, used, strict=True)
    )
    return _z(alpha, power) * cv * math.sqrt(spread)


def rounds_for(
    groups: Sequence[Group], cv: float, change: float, alpha: float, power: float = POWER
) -> int:
    """The rounds per test (on both sides) at which :func:`mde` reaches ``change``."""
    used = [g for g in groups if g.baseline and g.now]
    weights = _shares(used) if used else [1.0]
    needed = 2 * math.fsum(w * w for w in weights) * (_z(alpha, power) * cv / change) ** 2
    return max(2, math.ceil(needed))


@dataclass(frozen=True)
class Sensitivity:
    """What one check could have seen on one substrate."""

    cv: float  #: the measured within-test noise of the check's per-rollout figures
    mde: float  #: the smallest relative change detected with POWER at the gate's level
    rounds: int  #: the run's rounds per test (the fewest rollouts a compared test had a side)
    #: The rounds at which the MDE reaches the threshold (None: it already does).
    rounds_needed: int | None

    def text(self) -> str:
        """``noise CV 12%: sees +18% beyond the threshold at 80% power (5 rounds)``."""
        return (
            f"noise CV {self.cv:.0%}: sees {self.mde:+.0%} beyond the threshold at "
            f"{POWER:.0%} power ({self.rounds} rounds)"
        )


def sensitivity(
    groups: Sequence[Group], alpha: float, threshold: float | None
) -> Sensitivity | None:
    """The check's :class:`Sensitivity`; ``threshold`` a relative change (0.1: 10 %), or None
    when it cannot be one (no rounds advised). None without two rollouts on a side."""
    cv = noise_cv(groups)
    used = [g for g in groups if g.baseline and g.now]
    if cv is None or not used:
        return None
    least = mde(used, cv, alpha)
    needed = None
    if threshold is not None and threshold > 0 and least > threshold:
        needed = rounds_for(used, cv, threshold, alpha)
    rounds = min(min(len(g.baseline), len(g.now)) for g in used)
    return Sensitivity(cv, least, rounds, needed)
