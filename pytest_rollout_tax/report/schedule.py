"""Rollouts on a fixed number of slots, in order, each on the slot that frees first (a greedy
list schedule, what a pool of workers pulling from one queue does): a synchronous step's
makespan, and an asynchronous trainer's waits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heapify, heappop, heappush, heapreplace


def makespan(durations: Sequence[float], slots: int) -> tuple[float, int]:
    """When the last of ``durations`` (in order) ends on ``slots`` slots, all free at 0, and
    the index of the job that ends last (the straggler)."""
    if not durations:
        return 0.0, -1
    if slots >= len(durations):
        longest = max(durations)
        return longest, durations.index(longest)
    free = list(durations[:slots])
    heapify(free)
    ends = list(free)
    for duration in durations[slots:]:
        end = free[0] + duration
        heapreplace(free, end)
        ends.append(end)
    last = max(ends)
    return last, ends.index(last)


def async_waits(
    draw: Callable[[], float], *, batch: int, slots: int, train_s: float, lag: int, steps: int
) -> list[float]:
    """The trainer's wait before each of ``steps`` steps when generation runs ahead.

    Rollouts (durations from ``draw``) run in order on ``slots`` slots; those of batch ``b``
    may start once the trainer has ended step ``b - 1 - lag`` (their policy at most ``lag``
    steps stale; ``lag=0`` is the synchronous step). Step ``k`` starts when step ``k - 1``
    has ended and ``k * batch`` rollouts have finished (any of them, first finished first
    used), and takes ``train_s``. Rollouts of batches past ``k + lag`` cannot start before
    step ``k`` does, so they are scheduled only after it.
    """
    free = [0.0] * slots
    finished: list[float] = []
    ends = [0.0]  # ends[k]: when the trainer ended step k (0: the start)
    waits = []
    scheduled = 0
    for step in range(1, steps + 1):
        while scheduled < min(step + lag, steps):
            scheduled += 1
            gate = ends[scheduled - 1 - lag] if scheduled - 1 - lag >= 0 else 0.0
            for _ in range(batch):
                end = max(free[0], gate) + draw()
                heapreplace(free, end)
                heappush(finished, end)
        ready = 0.0
        for _ in range(batch):
            ready = heappop(finished)
        start = max(ends[-1], ready)
        waits.append(start - ends[-1])
        ends.append(start + train_s)
    return waits
