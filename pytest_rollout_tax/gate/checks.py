"""A gate's checks: ``METRIC.STAT:THRESHOLD`` parsed (``--rollout-compare-fail``, ``--fail``),
and how much growth each threshold allows."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.stats import STAT_NAMES
from ..errors import ConfigError
from ..report.schema import SAMPLE_METRICS

#: Metrics projected from the means (one figure per run, ``.mean`` only).
PROJECTED = ("worker_hours", "cost")
#: Metrics that are a share of the rollouts (``.rate`` only): the rollouts the infrastructure
#: failed. A threshold is in percentage points: ``infra_failed.rate:5%`` fails a rate that
#: rose by more than 5 points over the baseline's.
RATES = ("infra_failed",)
METRICS = (*SAMPLE_METRICS, *PROJECTED, *RATES)
STATS = STAT_NAMES

_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
_THRESHOLD = re.compile(r"((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(%|us|µs|ms|s|min|h)?")


@dataclass(frozen=True)
class Threshold:
    """How much growth is allowed: a fraction of the baseline, or an absolute duration."""

    value: float  #: a fraction (0.15 for ``15%``) when relative, else seconds
    relative: bool
    text: str

    @classmethod
    def parse(cls, text: str) -> Threshold:
        """``15%``, ``0.5%``, ``5ms``, ``250us``, ``0.2s``, ``1min`` or ``2h``."""
        match = _THRESHOLD.fullmatch(text.strip())
        if not match:
            raise ValueError(f"malformed threshold {text!r} (expected e.g. 15%, 5ms or 0.2s)")
        number, unit = float(match.group(1)), match.group(2)
        if unit is None:
            raise ValueError(f"threshold {text!r} needs a unit: % or us, ms, s, min, h")
        if not math.isfinite(number):
            raise ValueError(f"malformed threshold {text!r}")
        if unit == "%":
            return cls(number / 100, True, text.strip())
        return cls(number * _UNITS[unit], False, text.strip())

    def allowed(self, baseline: float, metric: str) -> float:
        """The largest growth that passes, in the metric's unit (hours for worker_hours, a
        share for a rate, whose percentage is in points)."""
        if metric in RATES:
            return self.value
        if self.relative:
            return self.value * baseline
        return self.value / 3600 if metric == "worker_hours" else self.value

    def share(self, baseline: float, metric: str) -> float | None:
        """The allowed growth as a fraction of ``baseline`` (None: a baseline of 0)."""
        return self.allowed(baseline, metric) / baseline if baseline > 0 else None

    def crossed(self, baseline: float, now: float, metric: str) -> bool:
        return now - baseline > self.allowed(baseline, metric)

    def raised(self, figures: Sequence[float], baseline: float, metric: str) -> list[float]:
        """Per-rollout ``figures`` of the baseline grown by the allowed amount: a run right at
        the threshold. ``baseline`` is the check's figure, which converts an absolute
        worker-hours threshold to a share."""
        if metric in RATES:  # each rollout's 0 or 1, the baseline's rate grown by the points
            return [f + self.value for f in figures]
        if self.relative:
            return [f * (1 + self.value) for f in figures]
        if metric == "worker_hours":
            share = self.allowed(baseline, metric) / baseline if baseline > 0 else 0.0
            return [f * (1 + share) for f in figures]
        return [f + self.value for f in figures]


@dataclass(frozen=True)
class Check:
    """One ``METRIC.STAT:THRESHOLD`` gate."""

    metric: str
    stat: str
    threshold: Threshold
    text: str

    @classmethod
    def parse(cls, text: str, option: str = "check") -> Check:
        """Parse ``cold_start.p95:15%``; ``worker_hours:10%`` means ``worker_hours.mean:10%``.
        An error names ``option`` (where the text came from)."""
        where = f"{option}={text!r}"
        target, sep, limit = text.partition(":")
        if not sep:
            raise ConfigError(f"{where}: expected METRIC.STAT:THRESHOLD, e.g. cold_start.p95:15%")
        metric, dot, stat = (part.strip() for part in target.partition("."))
        if metric not in METRICS:
            raise ConfigError(f"{where}: unknown metric {metric!r}; one of {', '.join(METRICS)}")
        if metric in RATES:
            if dot and stat != "rate":
                raise ConfigError(f"{where}: {metric} is a share of rollouts; use {metric}.rate")
            stat = "rate"
        elif metric in PROJECTED and not dot:
            stat = "mean"
        elif not dot:
            raise ConfigError(f"{where}: missing STAT after {metric!r}; e.g. {metric}.p95:{limit}")
        if stat not in STATS and metric not in RATES:
            raise ConfigError(f"{where}: unknown stat {stat!r}; one of {', '.join(STATS)}")
        if metric in PROJECTED and stat != "mean":
            raise ConfigError(
                f"{where}: {metric} is projected from means; use {metric}.mean:{limit}"
            )
        try:
            threshold = Threshold.parse(limit)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if metric == "cost" and not threshold.relative:
            raise ConfigError(f"{where}: cost takes a percentage, e.g. cost.mean:10%")
        if metric in RATES and not threshold.relative:
            raise ConfigError(
                f"{where}: {metric}.rate takes percentage points, e.g. {metric}.rate:5%"
            )
        return cls(metric, stat, threshold, text.strip())

    @property
    def name(self) -> str:
        return f"{self.metric}.{self.stat}"
