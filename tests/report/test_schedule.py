"""The slot schedule's order statistics against closed forms and large simulations: the
makespan of a batch on as many slots (the batch's maximum) and on fewer (a greedy list
schedule), for exponential and lognormal rollouts, and the async trainer's waits."""

import math
import random

import pytest

from pytest_rollout_tax.report.schedule import async_waits, makespan

#: Batches per simulated mean: the standard error of each mean below is under 1%.
BATCHES = 20_000


def harmonic(n):
    return math.fsum(1 / i for i in range(1, n + 1))


def mean_makespan(draw, batch, slots, batches=BATCHES):
    return (
        math.fsum(makespan([draw() for _ in range(batch)], slots)[0] for _ in range(batches))
        / batches
    )


def test_the_makespan_is_the_batchs_maximum_and_names_the_straggler():
    assert makespan([1.0, 5.0, 2.0], 3) == (5.0, 1)
    assert makespan([], 4) == (0.0, -1)


def test_fewer_slots_run_in_order_on_the_slot_that_frees_first():
    # slots 1 and 2 take 3 and 1; the third job goes to slot 2 at 1 and ends at 5, the fourth
    # to slot 1 at 3 and ends at 4
    assert makespan([3.0, 1.0, 4.0, 1.0], 2) == (5.0, 2)


def test_exponential_rollouts_on_as_many_slots_end_at_the_harmonic_number():
    rng = random.Random(1)
    assert mean_makespan(lambda: rng.expovariate(1.0), 16, 16) == pytest.approx(
        harmonic(16), rel=0.02
    )


def test_exponential_rollouts_on_fewer_slots_match_the_memoryless_closed_form():
    # n jobs on k slots: n - k completions at rate k, then the last k drain (H_k)
    rng = random.Random(2)
    n, k = 32, 8
    expected = (n - k) / k + harmonic(k)
    assert mean_makespan(lambda: rng.expovariate(1.0), n, k) == pytest.approx(expected, rel=0.02)


def lognormal_max_mean(n, mu, sigma):
    """E[max of n lognormals] = the integral of 1 - F(x)^n, by the trapezoid rule."""
    top = math.exp(mu + 8 * sigma)
    steps = 200_000
    width = top / steps

    def tail(x):
        if x <= 0:
            return 1.0
        cdf = 0.5 * math.erfc(-(math.log(x) - mu) / (sigma * math.sqrt(2)))
        return 1 - cdf**n

    return width * (math.fsum(tail(i * width) for i in range(1, steps)) + (tail(0) + tail(top)) / 2)


def test_lognormal_rollouts_on_as_many_slots_match_the_integral_of_the_maximum():
    rng = random.Random(3)
    expected = lognormal_max_mean(16, 0.0, 0.8)
    got = mean_makespan(lambda: rng.lognormvariate(0.0, 0.8), 16, 16)
    assert got == pytest.approx(expected, rel=0.03)


def naive_makespan(durations, slots):
    """The same greedy schedule, the plain way: each job to the slot that is free first."""
    free = [0.0] * slots
    for duration in durations:
        slot = free.index(min(free))
        free[slot] += duration
    return max(free)


def test_lognormal_rollouts_on_fewer_slots_match_a_plain_simulation_and_grahams_bounds():
    rng = random.Random(4)
    for _ in range(2_000):
        durations = [rng.lognormvariate(0.0, 1.0) for _ in range(24)]
        span, last = makespan(durations, 6)
        assert span == pytest.approx(naive_makespan(durations, 6))
        # list scheduling: at least the mean load and the longest job, at most their sum
        assert max(sum(durations) / 6, max(durations)) <= span + 1e-12
        assert span <= sum(durations) / 6 + max(durations) + 1e-12
        assert durations[last] <= span
    # and the mean over many batches agrees with the plain simulation's own
    ours = mean_makespan(lambda: rng.lognormvariate(0.0, 1.0), 24, 6)
    plain = (
        math.fsum(
            naive_makespan([rng.lognormvariate(0.0, 1.0) for _ in range(24)], 6)
            for _ in range(BATCHES)
        )
        / BATCHES
    )
    assert ours == pytest.approx(plain, rel=0.03)


def test_a_synchronous_trainer_waits_for_each_whole_batch():
    # lag=0: each batch starts when the previous step ends: two waves of 1s on 4 slots
    waits = async_waits(lambda: 1.0, batch=8, slots=4, train_s=3.0, lag=0, steps=5)
    assert waits == pytest.approx([2.0] * 5)


def test_generation_ahead_hides_the_batch_behind_a_longer_trainer_step():
    waits = async_waits(lambda: 1.0, batch=8, slots=4, train_s=3.0, lag=1, steps=6)
    assert waits[0] == pytest.approx(2.0)  # the pipeline fills once
    assert waits[2:] == pytest.approx([0.0] * 4)


def test_generation_bound_slots_leave_the_trainer_the_rest_of_each_batch():
    # a batch takes 2s on the slots, the trainer 0.5s: it waits 1.5s a step at steady state
    waits = async_waits(lambda: 1.0, batch=8, slots=4, train_s=0.5, lag=2, steps=8)
    assert waits[3:] == pytest.approx([1.5] * 5)


def test_async_with_exponential_rollouts_never_waits_longer_than_sync():
    rng = random.Random(5)
    draws = [rng.expovariate(1.0) for _ in range(10 * 32)]
    sync = async_waits(iter(draws).__next__, batch=32, slots=8, train_s=2.0, lag=0, steps=10)
    ahead = async_waits(iter(draws).__next__, batch=32, slots=8, train_s=2.0, lag=1, steps=10)
    assert sum(ahead) < sum(sync)
