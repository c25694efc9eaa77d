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
same on a rerun. Given the level it is judged at, the relabelling stops once the verdict is
settled (Besag and Clifford's sequential p-value, 1991): when so many relabellings have reached
the observed total that the p-value cannot fall below the level (101 at 0.05), the p-value is
``hits / relabellings drawn``. A change inside the noise, at p = 0.5, takes about 200
relabellings instead of 2,000; a credible one draws them all, and its p-value is the full
count's.

Each test draws from a stream of its own, seeded by the seed and the test's place, so its
relabellings are independent of the other tests'. Which rollouts a relabelling calls "now" does
not depend on their figures, only on the test's shape (``n`` rollouts, ``k`` of them now): the
index subsets of a shape are drawn once per process and reused: the same relabellings a fresh
draw from the same seed gives, and a calibration's thousands of gate runs on the same shapes
pay for the sums only.

No normal approximation: with one slow outlier among a test's rollouts (a loaded client, a
provider's hiccup) the permutation distribution of a mean is far from normal, and the
approximation called a 100x slowdown noise.

Why not van Elteren's stratified rank-sum: it weighs each test's rank evidence the same
whatever the test's share of the bill, and an unchanged test sits *below* the threshold-raised
baseline, so its ranks cancel the changed test's. The permutation test of the total judges the
figure the threshold is set on.
"""

from __future__ import annotations

import functools
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


def p_greater(strata: Sequence[Stratum], seed: int = 0, level: float | None = None) -> float:
    """One-sided p-value that the total of ``strata``'s changes is above 0 (now larger).

    With ``level``, the relabelling stops once the p-value cannot fall below it; whether the
    p-value is below ``level`` is the same as without it.
    """
    used = tuple(s for s in strata if s.usable)
    if not used:
        raise ValueError("the permutation test needs a test with rollouts on both sides")
    return _resampled(used, seed, level)


@functools.lru_cache(maxsize=256)  # a run of one test asks for its total and its test's alike
def _resampled(strata: tuple[Stratum, ...], seed: int, level: float | None) -> float:
    """The Monte Carlo permutation p-value, ``(1 + hits) / (1 + RESAMPLES)``, or ``hits /
    draws`` when ``hits`` reached the count that settles ``level`` first.

    A relabelling's change in a test is ``S * (1/k + 1/(n-k)) - T/(n-k)``, ``S`` the sum of
    the ``k`` rollouts labelled "now" among the test's ``n`` (sum ``T``): only ``S`` is drawn,
    from the list of every subset's sum when the test is small enough to list them."""
    observed = math.fsum(s.change for s in strata)
    draws = [_draw(s, f"{seed}:{place}") for place, s in enumerate(strata)]
    tolerance = 1e-9 * max(abs(x) for s in strata for x in (*s.baseline, *s.now))
    # At this many hits both p-values are at least ``level``: (1 + hits) / (1 + RESAMPLES),
    # had every relabelling been drawn, and hits / draws, draws <= RESAMPLES.
    settled = math.ceil(level * (1 + RESAMPLES)) if level is not None else RESAMPLES + 1
    hits = 0
    for drawn in range(1, RESAMPLES + 1):
        hits += math.fsum(draw() for draw in draws) >= observed - tolerance
        if hits >= settled:
            return hits / drawn
    return (1 + hits) / (1 + RESAMPLES)


def _draw(stratum: Stratum, stream: str) -> Callable[[], float]:
    """A function drawing ``stratum``'s next relabelling change from the seeded ``stream``."""
    pool = (*stratum.baseline, *stratum.now)
    n, k = len(pool), len(stratum.now)
    total, weight = math.fsum(pool), 1 / k + 1 / (n - k)
    if math.comb(n, k) <= LISTED:
        sums = [weight * math.fsum(c) - total / (n - k) for c in itertools.combinations(pool, k)]
        rng = random.Random(stream)
        return lambda: sums[int(rng.random() * len(sums))]
    subsets = iter(_subsets(n, k, stream))
    return lambda: weight * math.fsum(map(pool.__getitem__, next(subsets))) - total / (n - k)


@functools.lru_cache(maxsize=16)
def _subsets(n: int, k: int, stream: str) -> tuple[tuple[int, ...], ...]:
    """:data:`RESAMPLES` seeded ``k``-subsets of ``range(n)``: the relabellings of a test of
    this shape, the same for every run of it (a calibration asks thousands of times)."""
    rng = random.Random(stream)
    return tuple(tuple(rng.sample(range(n), k)) for _ in range(RESAMPLES))
