"""Percentiles and summary statistics of latency samples (seconds)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any


def min_samples(stat: str) -> int:
    """The samples a percentile needs to be more than the maximum: 1 / (1 - q), so p50 2,
    p90 10, p95 20, p99 100; 1 for min, mean and max. Below it, the summary and gate warn."""
    if not stat.startswith("p"):
        return 1
    return math.ceil(round(1 / (1 - int(stat[1:]) / 100), 9))


def percentile(sorted_samples: list[float], q: float) -> float:
    """The q-th percentile (0-100) of sorted samples, linearly interpolated (numpy's default)."""
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    rank = (len(sorted_samples) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (rank - low)


@dataclass(frozen=True)
class Stats:
    """The STATS object of the JSON schema: sample count and latency figures in seconds."""

    n: int
    min: float
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, samples: Iterable[float]) -> Stats | None:
        """Summarize samples; None when there are none."""
        ordered = sorted(samples)
        if not ordered:
            return None
        return cls(
            n=len(ordered),
            min=ordered[0],
            mean=math.fsum(ordered) / len(ordered),
            p50=percentile(ordered, 50),
            p90=percentile(ordered, 90),
            p95=percentile(ordered, 95),
            p99=percentile(ordered, 99),
            max=ordered[-1],
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Stats:
        return cls(**{field: data[field] for field in (*STAT_NAMES, "n")})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


STAT_NAMES = ("min", "mean", "p50", "p90", "p95", "p99", "max")
