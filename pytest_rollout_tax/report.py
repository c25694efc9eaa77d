"""The terminal summary table and the atomic JSON writer."""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
from pathlib import Path

from tabulate import tabulate

from .errors import ConfigError
from .stats import MIN_SAMPLES_FOR_P95

#: The summary fits a terminal this wide.
WIDTH = 100

HEADERS = (
    "substrate",
    "rollouts",
    "failed",
    "cold start\np50/p95",
    "action\np50/p95",
    "step\np50",
    "teardown\np50",
    "worker\nhours",
    "tax\nhours",
)


def seconds(value: float | None) -> str:
    """A duration in the unit that reads best: ``850us``, ``12.3ms``, ``1.24s``, ``2m05s``."""
    if value is None:
        return "-"
    if value < 0.9995e-3:  # below what rounds to 1.00ms
        return f"{value * 1e6:.0f}us"
    if value < 0.9995:
        return f"{value * 1e3:.3g}ms"
    if value < 119.5:
        return f"{value:.3g}s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes}m{rest:02d}s"


def hours(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def ratio(value: float) -> str:
    return f"{value:.2f}x" if value < 10 else f"{value:,.0f}x"


def render_summary(report: dict) -> list[str]:
    """The lines of the end-of-session summary: one table row per substrate, then notes."""
    projection = report["projection"]
    think = projection["think_time_s"]
    headline = (
        f"hours projected for {projection['rollouts']:,} rollouts x {projection['steps']} steps"
        + (f" with {seconds(think)} think time per step" if think else "")
        + "; tax = substrate overhead only"
    )
    lines = textwrap.wrap(headline, width=WIDTH)
    notes = []
    rows = []
    for name, sub in report["substrates"].items():
        rows.append(
            [
                name,
                sub["rollouts"],
                sub["failures"],
                _pair(sub["cold_start"]),
                _pair(sub["action"]),
                _stat(sub["step"], "p50"),
                _stat(sub["teardown"], "p50"),
                hours(sub["worker_hours"]),
                hours(sub["tax_hours"]),
            ]
        )
    lines += tabulate(
        rows,
        headers=HEADERS,
        tablefmt="simple",
        colalign=("left",) + ("right",) * (len(HEADERS) - 1),
    ).splitlines()
    spread = report["spread"]
    if spread:
        notes.append(
            f"spread: cold start p50 {ratio(spread['cold_start_p50'])} "
            f"({spread['slowest']} vs {spread['fastest']}), "
            f"worker-hours {ratio(spread['worker_hours'])}"
        )
    for name, sub in report["substrates"].items():
        if sub.get("cost_usd") is not None:  # the substrate knows its price (ec2.price_per_hour)
            notes.append(
                f"{name}: the projected worker-hours cost ${sub['cost_usd']:,.0f} "
                f"at ${sub['price_per_hour']:g} per sandbox-hour"
            )
        if sub["failures"]:
            reasons = "; ".join(f"{n}x {why}" for why, n in sub["failure_reasons"].items())
            success = 1 - sub["failures"] / sub["rollouts"]
            notes.append(f"{name}: {success:.0%} of rollouts succeeded; failures: {reasons}")
        samples = sub["cold_start"]["n"] if sub["cold_start"] else 0
        if samples < MIN_SAMPLES_FOR_P95:
            notes.append(
                f"warning: {name} has {samples} cold-start sample(s); a p95 needs "
                f"{MIN_SAMPLES_FOR_P95} or more (--rollout-rounds N)"
            )
    for note in notes:
        lines += textwrap.wrap(note, width=WIDTH, subsequent_indent="    ")
    return lines


def _pair(stats: dict | None) -> str:
    return f"{seconds(stats['p50'])}/{seconds(stats['p95'])}" if stats else "-"


def _stat(stats: dict | None, name: str) -> str:
    return seconds(stats[name]) if stats else "-"


def check_json_path(path: str | os.PathLike[str]) -> Path:
    """Fail fast (before any rollout runs) when a report cannot be written to ``path``."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--rollout-json={path}: cannot create its directory: {exc.strerror}"
        ) from None
    if target.is_dir():
        raise ConfigError(f"--rollout-json={path}: is a directory; name a file")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--rollout-json={path}: its directory is not writable")
    return target


def write_json(path: str | os.PathLike[str], data: dict) -> Path:
    """Write ``data`` as JSON atomically: a crash never leaves a half-written file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, allow_nan=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise
    return target
