"""Sampling helpers shared by the benchmarks (run as scripts: this directory is on sys.path)."""

from __future__ import annotations

from collections.abc import Callable


def interleaved(
    n: int, first: Callable[[], float], second: Callable[[], float]
) -> tuple[list[float], list[float]]:
    """``n`` samples of each, in ABBA order so drift hits both alike; the two lists of seconds."""
    a: list[float] = []
    b: list[float] = []
    for i in range(n):
        if i % 2 == 0:
            a.append(first())
            b.append(second())
        else:
            b.append(second())
            a.append(first())
    return a, b
