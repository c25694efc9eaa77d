"""The gate's like-with-like noise test: a permutation test of a substrate's total, permuting
each test's rollouts only among that test's own (docs/gating-fidelity.md#like-with-like).

Each test both runs measured is a stratum: its baseline rollouts (raised by the check's
threshold) and its current rollouts. The statistic is the total of the tests' changes,
``D = sum(mean(now_i) - mean(raised_i))``: what the check's threshold is about. Under "no change
beyond the threshold" a test's rollouts are exchangeable between its two sides, so relabelling
them within each test (never across tests) gives D's null distribution. A test that did not
change adds only its own noise, not the spread between tests, and a test that doubled adds its
full change to the total.

The p-value comes from :data:`RESAMPLES` seeded within-test relabellings, so a verdict is the
same on a rerun. No normal approximation: with one slow outlier among a test's rollouts (a
loaded client, a provider's hiccup) the permutation distribution of a mean is far from
normal, and the approximation called a 100x slowdown noise.

Why not van Elteren's stratified rank-sum: it weighs each test's rank evidence the same
whatever the test's share of the bill, and an unchanged test sits *below* the threshold-raised
baseline, so its ranks cancel the changed test's. The permutation test of the total judges the
figure the threshold is set on.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: Seeded within-test relabellings drawn for a p-value (its smallest is 1 / (1 + RESAMPLES)).
RESAMPLES = 2000
#: A test with at most this many relabellings has every one listed (5 rounds a side: 252).
LISTED = 5000


@dataclass(frozen=True)
class Stratum:
    """One test's per-rollout figures in the baseline (raised by the threshold) and now."""

    test: str
    baseline: tuple[float, ...]
    now: tuple[float, ...]

    @property
    def usable(self) -> bool:
        return bool(self.baseline) and bool(self.now)

    @property
    def change(self) -> float:
        """mean(now) - mean(baseline): this test's part of the total's change."""
        return _mean(self.now) - _mean(self.baseline)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def p_greater(strata: Sequence[Stratum], seed: int = 0) -> float:
    """One-sided p-value that the total of ``strata``'s changes is above 0 (now larger)."""
    used = [s for s in strata if s.usable]
    if not used:
        raise ValueError("the permutation test needs a test with rollouts on both sides")
    observed = math.fsum(s.change for s in used)
    return _resampled(used, observed, seed)


def _resampled(strata: Sequence[Stratum], observed: float, seed: int) -> float:
    """The Monte Carlo permutation p-value, ``(1 + hits) / (1 + RESAMPLES)``.

    A relabelling's change in a test is ``S * (1/k + 1/(n-k)) - T/(n-k)``, ``S`` the sum of
    the ``k`` rollouts labelled "now" among the test's ``n`` (sum ``T``): only ``S`` is drawn,
    from the list of every subset's sum when the test is small enough to list them."""
    rng = random.Random(seed)
    draws = [_draw(s, rng) for s in strata]
    tolerance = 1e-9 * max(abs(x) for s in strata for x in (*s.baseline, *s.now))
    hits = sum(
        math.fsum(draw() for draw in draws) >= observed - tolerance for _ in range(RESAMPLES)
    )
    return (1 + hits) / (1 + RESAMPLES)


def _draw(stratum: Stratum, rng: random.Random) -> Callable[[], float]:
    """A function drawing one relabelling's change of ``stratum``."""
    pool = (*stratum.baseline, *stratum.now)
    n, k = len(pool), len(stratum.now)
    total, weight = math.fsum(pool), 1 / k + 1 / (n - k)
    if math.comb(n, k) <= LISTED:
        sums = [weight * math.fsum(c) - total / (n - k) for c in itertools.combinations(pool, k)]
        return lambda: sums[int(rng.random() * len(sums))]
    return lambda: weight * math.fsum(rng.sample(pool, k)) - total / (n - k)
