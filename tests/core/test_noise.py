"""The noise test: Mann-Whitney U against scipy's figures, and when a crossing is credible."""

from __future__ import annotations

import pytest

from pytest_rollout_tax.core.noise import ALPHA, MIN_SAMPLES, evidence, mann_whitney_greater

COLD = [1.00, 1.21, 0.93, 1.08, 1.15, 0.97, 1.04, 1.12]

# Reference values from scipy.stats.mannwhitneyu(now, baseline, alternative="greater",
# method="asymptotic", use_continuity=True) (scipy 1.17).
SCIPY = [
    ([1.0, 1.2, 1.1, 0.9, 1.3], [1.25, 1.4, 1.1, 1.5, 1.35, 1.6], 0.02206278477479631),
    ([1, 2, 2, 3, 3, 3, 4], [2, 3, 3, 4, 4, 5], 0.07889270525898251),  # ties
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.006092890177672406),
    ([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], 0.9966923245172357),
]


@pytest.mark.parametrize(("baseline", "now", "expected"), SCIPY)
def test_mann_whitney_matches_scipy(baseline, now, expected) -> None:
    assert mann_whitney_greater(baseline, now) == pytest.approx(expected, rel=1e-9)


def test_mann_whitney_edge_cases() -> None:
    assert mann_whitney_greater([1.0] * 6, [1.0] * 6) == 1.0
    assert mann_whitney_greater(COLD, COLD) > 0.4
    with pytest.raises(ValueError):
        mann_whitney_greater([], [1.0])


def test_evidence_rules() -> None:
    slow = [c * 10 for c in COLD]
    assert evidence(COLD, slow).credible
    assert evidence(COLD, slow).p_value < ALPHA
    found = evidence(COLD, COLD)
    assert not found.credible and "Mann-Whitney" in found.why
    assert "(n=8/8 rollouts)" in found.why
    few = evidence(COLD[: MIN_SAMPLES - 1], slow)
    assert few.p_value is None and few.credible and "threshold alone" in few.why
    assert "4/8 rollouts, the noise test needs 5 a side" in few.why
