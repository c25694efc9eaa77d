"""Change points over the history of saved runs, per testbed, substrate and metric
(``history``).

Each saved run is one point of each series (``docker.cold_start.p50``) of the testbed it was
measured on (testbed.py), oldest first: runs from two testbeds are never one series, and runs
saved before testbeds were recorded are the ``unknown`` testbed's. Candidate
change points come from PELT (``ruptures``, l2 cost) on the series in units of its run-to-run
noise; a candidate is kept only when a Student t-test of the runs between it and its neighbours
gives p < ``max_p``, the weakest dropped first until every one left passes, the way Apache Otava
(ex-Hunter) filters E-divisive's candidates. One run alone between two change points is an
outlier, not a level, unless it is the newest run.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from ..errors import HistoryUnavailable, RolloutTaxError
from ..report.document import Report
from ..report.projection import Scale, project
from ..report.schema import SAMPLE_METRICS
from ..text.units import percent, value
from .sides import Side
from .storage import Storage, load
from .testbed import UNKNOWN, testbed_of

#: A change point counts when the t-test between its neighbouring segments gives p below this
#: (Apache Otava's default): about one false change point per thousand runs and series.
MAX_P = 0.001
#: The fewest runs of a series on one testbed that change points are looked for in.
MIN_RUNS = 3
#: A change point's size beyond this many run-to-run sigmas shows in a single run.
BEYOND_NOISE = 2.0
#: PELT's penalty per change point, times log(runs), in units of the noise's variance.
PENALTY = 3.0
#: The series of every substrate: (metric, stat); worker-hours at the newest run's projection.
SERIES = (
    *((metric, stat) for metric in ("cold_start", "action", "step", "teardown")
      for stat in ("p50", "p95")),
    ("worker_hours", "mean"),
)  # fmt: skip


def require() -> None:
    """Raise HistoryUnavailable unless numpy, scipy and ruptures import."""
    try:
        import numpy  # noqa: F401
        import ruptures  # noqa: F401
        import scipy.stats  # noqa: F401
    except ImportError as exc:
        raise HistoryUnavailable(
            f"change-point detection needs {exc.name}: pip install 'pytest-rollout-tax[history]'"
        ) from None


@dataclass(frozen=True)
class Shift:
    """A change point in one series: at ``index``, the mean level went ``before`` -> ``after``."""

    index: int
    before: float
    after: float
    p: float


def _t_test(before: Sequence[float], after: Sequence[float]) -> float:
    """Two-sided p of Student's t-test (pooled variance); one point on one side is allowed."""
    from scipy.stats import t as student

    n1, n2 = len(before), len(after)
    if n1 + n2 < 3:
        return 1.0
    m1, m2 = math.fsum(before) / n1, math.fsum(after) / n2
    ss = math.fsum((v - m1) ** 2 for v in before) + math.fsum((v - m2) ** 2 for v in after)
    pooled = ss / (n1 + n2 - 2)
    if pooled <= 0:
        return 1.0 if m1 == m2 else 0.0
    t = (m2 - m1) / math.sqrt(pooled * (1 / n1 + 1 / n2))
    return float(2 * student.sf(abs(t), n1 + n2 - 2))


def _split_p(before: Sequence[float], after: Sequence[float]) -> float:
    """The t-test's p for the best of the segment's possible splits, Bonferroni-corrected for
    the ``len - 1`` places the split could have been chosen at (PELT chose the likeliest)."""
    return min(1.0, _t_test(before, after) * (len(before) + len(after) - 1))


def _noise(values: Sequence[float]) -> float:
    """The run-to-run noise: the median absolute first difference, as a normal sigma (robust
    to steps); the series' spread when most differences are zero."""
    diffs = sorted(abs(b - a) for a, b in itertools.pairwise(values))
    sigma = diffs[len(diffs) // 2] / (0.6745 * math.sqrt(2)) if diffs else 0.0
    if sigma > 0:
        return sigma
    mean = math.fsum(values) / len(values)
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    return spread or 1.0


def shifts(values: Sequence[float], max_p: float = MAX_P) -> list[Shift]:
    """The change points of one series (oldest first): where its level shifted, credibly."""
    require()
    import numpy as np
    import ruptures

    n = len(values)
    if n < 3:
        return []
    scaled = (np.asarray(values, dtype=float) - float(np.median(values))) / _noise(values)
    detector = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(scaled.reshape(-1, 1))
    cuts = [c for c in detector.predict(pen=PENALTY * math.log(n)) if c < n]
    while cuts:
        bounds = [0, *cuts, n]
        # a lone run before a change point is an outlier, not a level (the newest may be one)
        lone = [bounds[i + 1] for i in range(len(bounds) - 2) if bounds[i + 1] - bounds[i] == 1]
        if lone:
            cuts.remove(lone[0])
            continue
        found = [
            Shift(
                cut,
                _mean(values[bounds[i] : cut]),
                _mean(values[cut : bounds[i + 2]]),
                _split_p(values[bounds[i] : cut], values[cut : bounds[i + 2]]),
            )
            for i, cut in enumerate(cuts)
        ]
        weakest = max(found, key=lambda s: s.p)
        if weakest.p < max_p:
            return found
        cuts.remove(weakest.index)
    return []


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


@dataclass(frozen=True)
class ChangePoint:
    """A ``change_points[]`` item: series ``<substrate>.<metric>.<stat>`` on ``testbed``, from
    its first run after (``run``, saved at ``created``); ``noise``: the series' run-to-run
    sigma."""

    testbed: str
    metric: str
    run: str
    before: float
    after: float
    p: float
    noise: float = 0.0
    created: str | None = None

    @property
    def change(self) -> float:
        return (self.after - self.before) / self.before if self.before else math.inf

    @property
    def sigmas(self) -> float:
        """The step in run-to-run sigmas (inf: a series without run-to-run noise)."""
        return abs(self.after - self.before) / self.noise if self.noise else math.inf

    @property
    def beyond_noise(self) -> bool:
        """A step a single run shows: more than BEYOND_NOISE run-to-run sigmas."""
        return self.sigmas > BEYOND_NOISE

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "change": self.change, "beyond_noise": self.beyond_noise}


#: A series: (testbed, ``<substrate>.<metric>.<stat>``).
Key = tuple[str, str]


@dataclass(frozen=True)
class History:
    """The saved runs in order, the ones that could not be read, the change points, and each
    series' count of runs (per testbed)."""

    runs: list[str]
    unusable: list[str]
    change_points: list[ChangePoint]
    counts: dict[Key, int]

    def to_dict(self) -> dict[str, Any]:
        testbeds: dict[str, int] = {}
        for (bed, _), n in self.counts.items():
            testbeds[bed] = max(testbeds.get(bed, 0), n)
        return {
            "runs": self.runs,
            "testbeds": testbeds,
            "change_points": [c.to_dict() for c in self.change_points],
        }

    def latest(self, key: Key) -> ChangePoint | None:
        """The newest change point of one series (None: none)."""
        found = [c for c in self.change_points if (c.testbed, c.metric) == key]
        return found[-1] if found else None


def run_name(path: Path) -> str:
    """How a saved run is named in the history: its file name without ``.json``."""
    return path.stem


def testbed_key(report: Report, substrate: str) -> str:
    """The testbed a series is kept under: the recorded one's short name, or ``unknown``."""
    bed = testbed_of(report, substrate)
    return bed.key() if bed is not None else UNKNOWN


def series_of(
    runs: Iterable[tuple[str, Report]], scale: Scale
) -> dict[Key, list[tuple[str, float]]]:
    """Every series (testbed, ``<substrate>.<metric>.<stat>``) as (run, value) pairs, oldest
    first."""
    series: dict[Key, list[tuple[str, float]]] = {}
    for name, report in runs:
        for substrate, entry in report.substrates.items():
            bed = testbed_key(report, substrate)
            side = Side(
                stats={metric: getattr(entry, metric) for metric in SAMPLE_METRICS},
                worker_hours=project(entry.means(), scale).worker_hours,
            )
            for metric, stat in SERIES:
                figure = side.value(metric, stat)
                if figure is not None:
                    key = (bed, f"{substrate}.{metric}.{stat}")
                    series.setdefault(key, []).append((name, figure))
    return series


def analyze(
    runs: Sequence[tuple[str, Report]], unusable: Sequence[str] = (), max_p: float = MAX_P
) -> History:
    """The change points of every series of ``runs`` (named, oldest first), per testbed."""
    scale = runs[-1][1].projection if runs else Scale()
    created = {name: report.created for name, report in runs}
    found = []
    all_series = series_of(runs, scale)
    for (bed, metric), points in all_series.items():
        values = [value for _, value in points]
        sigma = _noise(values) if len(values) > 1 else 0.0
        for shift in shifts(values, max_p):
            run = points[shift.index][0]
            found.append(ChangePoint(bed, metric, run, shift.before, shift.after, shift.p,
                                     sigma, created.get(run)))  # fmt: skip
    order = {name: index for index, (name, _) in enumerate(runs)}
    found.sort(key=lambda c: (order[c.run], c.testbed, c.metric))
    counts = {key: len(points) for key, points in all_series.items()}
    return History([name for name, _ in runs], list(unusable), found, counts)


def of_storage(
    storage: Storage, max_p: float = MAX_P, extra: Sequence[tuple[str, Report]] = ()
) -> History:
    """The history of every readable saved run in ``storage``, oldest first, then ``extra``
    (this run, when it was not saved)."""
    runs, unusable = [], []
    for path in storage.paths():
        try:
            runs.append((run_name(path), load(path).report))
        except RolloutTaxError as exc:
            unusable.append(str(exc))
    return analyze([*runs, *extra], unusable, max_p)


def render(history: History, storage: Storage, max_p: float = MAX_P) -> list[str]:
    """The table ``history`` prints: per testbed, one row per change point, oldest first."""
    lines = [
        f"history of {len(history.runs)} saved run(s) in {storage}, oldest first; "
        f"change points at p < {max_p:g}, per testbed"
    ]
    lines += [f"skipped, unusable: {reason}" for reason in history.unusable]
    if not history.change_points:
        lines.append("no change point")
        return lines
    headers = ("metric", "run", "before", "after", "change", "x noise", "p")
    for bed in dict.fromkeys(c.testbed for c in history.change_points):
        rows = [
            [c.metric, c.run, value(_unit(c.metric), c.before), value(_unit(c.metric), c.after),
             percent(c.before, c.after), f"{c.sigmas:.1f}", f"{c.p:.2g}"]
            for c in history.change_points if c.testbed == bed
        ]  # fmt: skip
        lines += ["", f"testbed {bed}:"]
        lines += str(tabulate(rows, headers=headers, tablefmt="simple")).splitlines()
    return lines


def _unit(series: str) -> str:
    """The compare metric name of a series (what its values are formatted as)."""
    return series.split(".")[-2]


def new_change_points(
    found: History, storage: Storage, saved: Sequence[Path], max_p: float = MAX_P
) -> tuple[list[str], list[str]]:
    """The mainline gate: change points of ``found`` (``storage``'s history) that start at a
    just-saved run.

    Returns the summary lines and the regression lines (one per series that got slower; a
    series that got faster is only reported).
    """
    names = {run_name(path) for path in saved}
    new = [c for c in found.change_points if c.run in names]
    where = f"over {len(found.runs)} saved run(s) in {storage}, per testbed"

    def line(c: ChangePoint) -> str:
        unit = _unit(c.metric)
        return (
            f"{c.metric} on [{c.testbed}]: {value(unit, c.before)} -> {value(unit, c.after)} "
            f"({percent(c.before, c.after)}) from {c.run}, t-test p={c.p:.2g} < {max_p:g}"
        )

    slower = [f"NEW CHANGE POINT {line(c)}" for c in new if c.after > c.before]
    faster = [f"rollout-tax: history: faster since this run: {line(c)}" for c in new
              if c.after <= c.before]  # fmt: skip
    if not new:
        faster.append(f"rollout-tax: history: no new change point {where}")
    return faster, [*slower, f"({where})"] if slower else []
