"""The stratified permutation test against a brute-force enumeration of every within-test
relabelling."""

from __future__ import annotations

import itertools

import pytest

from pytest_rollout_tax.gate.stratified import RESAMPLES, Stratum, p_greater


def exact(strata: list[Stratum]) -> float:
    """The exact p-value: every relabelling of every test, the total's change at least the
    observed one."""
    observed = sum(s.change for s in strata)
    totals = [0.0]
    for s in strata:
        pool, k = (*s.baseline, *s.now), len(s.now)
        changes = []
        for chosen in itertools.combinations(range(len(pool)), k):
            now = [pool[i] for i in chosen]
            rest = [pool[i] for i in range(len(pool)) if i not in chosen]
            changes.append(sum(now) / k - sum(rest) / len(rest))
        totals = [t + c for t in totals for c in changes]
    return sum(t >= observed - 1e-12 for t in totals) / len(totals)


CASES = [
    # a changed test beside an unchanged one, near the level (resampled)
    [Stratum("a", (1.0, 1.1, 0.9, 1.05), (1.25, 1.35, 1.15, 1.3)),
     Stratum("b", (5.0, 5.2, 4.9, 5.1), (5.1, 5.0, 5.2, 4.9))],
    # far beyond it (the normal approximation, never below one relabelling in all)
    [Stratum("a", (1.0, 1.1, 0.9, 1.05), (2.0, 2.1, 1.9, 2.2)),
     Stratum("b", (5.0, 5.2, 4.9, 5.1), (5.0, 5.3, 5.1, 4.8))],
    # no change at all
    [Stratum("a", (1.0, 1.1, 0.9, 1.05), (1.0, 1.1, 0.9, 1.05))],
]  # fmt: skip


@pytest.mark.parametrize("strata", CASES)
def test_the_p_value_matches_the_exact_permutation_test(strata: list[Stratum]) -> None:
    found, truth = p_greater(strata), exact(strata)
    assert found >= 1 / (1 + RESAMPLES)
    assert (found < 0.05) == (truth < 0.05)
    assert found == pytest.approx(truth, abs=0.015)  # within the resampling's error


@pytest.mark.parametrize("strata", CASES)
def test_stopping_once_the_verdict_is_settled_keeps_the_verdict(strata: list[Stratum]) -> None:
    """At the level, the sequential p-value is below it exactly when the full count's is; a
    p-value below the level is the full count's itself, one above it an estimate from at
    least 101 hits (within a third of the exact one)."""
    full, sequential, truth = p_greater(strata), p_greater(strata, level=0.05), exact(strata)
    assert (sequential < 0.05) == (full < 0.05)
    if full < 0.05:
        assert sequential == full
    else:
        assert sequential >= 0.05 and sequential == pytest.approx(truth, rel=1 / 3)


def test_a_p_value_inside_the_noise_stops_at_the_settling_hit() -> None:
    """A test whose exact p-value is 22/70 (4 rollouts a side): the sequential p-value is 101
    hits over fewer relabellings than :data:`RESAMPLES`."""
    stratum = Stratum("a", (1.0, 1.1, 0.9, 1.05), (1.1, 1.2, 1.0, 0.95))
    draws = 101 / p_greater([stratum], level=0.05)
    assert draws == pytest.approx(round(draws)) and draws < RESAMPLES / 4


def test_one_slow_outlier_does_not_hide_a_100x_slowdown() -> None:
    """Every current rollout far above the baseline, one of them 100x the others (a loaded
    client): the exact test's smallest p-value, which a normal approximation put at 0.16."""
    stratum = Stratum("a", (0.01,) * 6, (1.0, 1.1, 0.9, 1.05, 1.2, 100.0))
    assert p_greater([stratum]) == pytest.approx(exact([stratum]), abs=0.003) and exact(
        [stratum]
    ) == pytest.approx(1 / 924)


def test_a_test_on_one_side_only_is_not_a_stratum() -> None:
    with pytest.raises(ValueError, match="both sides"):
        p_greater([Stratum("a", (1.0,), ())])
