import pytest

from pytest_rollout_tax.core.stats import Stats, percentile


def test_percentile_interpolates_like_numpy():
    samples = [1.0, 2.0, 3.0, 4.0]
    assert percentile(samples, 0) == 1.0
    assert percentile(samples, 50) == 2.5
    assert percentile(samples, 100) == 4.0
    assert percentile(samples, 90) == pytest.approx(3.7)


def test_percentile_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        percentile([], 50)


def test_stats_of_unsorted_samples():
    stats = Stats.of([0.3, 0.1, 0.2])
    assert (stats.n, stats.min, stats.max, stats.p50) == (3, 0.1, 0.3, 0.2)
    assert stats.mean == pytest.approx(0.2)


def test_stats_of_nothing_is_none():
    assert Stats.of([]) is None


def test_stats_round_trip_through_dict():
    stats = Stats.of([1.0, 5.0])
    assert Stats.from_dict(stats.to_dict()) == stats
    assert set(stats.to_dict()) == {"n", "min", "mean", "p50", "p90", "p95", "p99", "max"}


@pytest.mark.parametrize(
    ("stat", "needed"),
    [("p50", 2), ("p90", 10), ("p95", 20), ("p99", 100), ("mean", 1), ("max", 1), ("min", 1)],
)
def test_a_percentile_needs_one_over_its_tail_share_of_samples(stat, needed):
    from pytest_rollout_tax.core.stats import min_samples

    assert min_samples(stat) == needed
