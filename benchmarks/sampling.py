"""Sampling helpers shared by the benchmarks (run as scripts: this directory is on sys.path)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


def interleaved_all(
    n: int,
    samplers: Mapping[str, Callable[[], T]],
    progress: Callable[[int], None] | None = None,
) -> dict[str, list[T]]:
    """``n`` samples of each sampler, ABBA order generalized (ABC CBA ABC ...): every round takes
    one sample of each, in reverse order every other round, so drift hits all alike.

    ``progress`` is called with the number of rounds done after each round.
    """
    samples: dict[str, list[T]] = {name: [] for name in samplers}
    order = list(samplers)
    for i in range(n):
        for name in order if i % 2 == 0 else reversed(order):
            samples[name].append(samplers[name]())
        if progress is not None:
            progress(i + 1)
    return samples
