"""The gate's noise test: is a slowdown between two runs' per-rollout figures credible?"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: One-sided significance level of the noise test: a slowdown is credible when p < ALPHA.
ALPHA = 0.05
#: The noise test runs only with at least this many raw samples in each run.
MIN_SAMPLES = 5


def mann_whitney_greater(baseline: Sequence[float], now: Sequence[float]) -> float:
    """One-sided p-value of a Mann-Whitney U test that ``now`` tends to be larger.

    Normal approximation with tie correction and continuity correction (scipy's
    ``mannwhitneyu(now, baseline, alternative="greater", method="asymptotic")``).
    """
    n_now, n_base = len(now), len(baseline)
    if not n_now or not n_base:
        raise ValueError("the Mann-Whitney test needs samples on both sides")
    pooled = sorted([(v, True) for v in now] + [(v, False) for v in baseline])
    rank_sum = 0.0
    tie_term = 0.0
    start = 0
    while start < len(pooled):
        end = start
        while end < len(pooled) and pooled[end][0] == pooled[start][0]:
            end += 1
        ties = end - start
        average_rank = (start + 1 + end) / 2
        rank_sum += average_rank * sum(1 for _, is_now in pooled[start:end] if is_now)
        tie_term += ties**3 - ties
        start = end
    total = n_now + n_base
    u = rank_sum - n_now * (n_now + 1) / 2
    variance = n_now * n_base / 12 * ((total + 1) - tie_term / (total * (total - 1)))
    if variance <= 0:  # every sample equal: no evidence either way
        return 1.0
    z = (u - n_now * n_base / 2 - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))


@dataclass(frozen=True)
class Evidence:
    """What the noise test said about one crossing."""

    p_value: float | None  #: None: the test could not run; the threshold alone decides
    why: str

    @property
    def credible(self) -> bool:
        return self.p_value is None or self.p_value < ALPHA


def evidence(baseline: Sequence[float], now: Sequence[float]) -> Evidence:
    """Run the noise test on two runs' per-rollout figures (``Side.units``), if it can run."""
    if len(baseline) < MIN_SAMPLES or len(now) < MIN_SAMPLES:
        return Evidence(
            None,
            f"threshold alone: {len(baseline)}/{len(now)} rollouts, the noise test needs "
            f"{MIN_SAMPLES} a side",
        )
    p = mann_whitney_greater(baseline, now)
    relation = "<" if p < ALPHA else ">="
    n = f"n={len(baseline)}/{len(now)} rollouts"
    return Evidence(p, f"Mann-Whitney p={p:.2g} {relation} {ALPHA} ({n})")
