"""How figures read: durations, hours, ratios, shares and changes, and the parts' labels."""

from __future__ import annotations


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


def signed_hours(value: float, unit: str) -> str:
    """A change in hours with its unit: ``+13,828 worker-hours``, ``-6,233 tax-hours``."""
    return f"{value:+,.0f} {unit}"


def dollars(value: float | None) -> str:
    """Dollars: ``$18,136``, ``$886``, ``$0.42``."""
    if value is None:
        return "-"
    return f"${value:,.0f}" if value >= 10 else f"${value:.2g}"


def ratio(value: float) -> str:
    if value < 0.1:
        return f"{value:.2g}x"
    return f"{value:.2f}x" if value < 10 else f"{value:,.0f}x"


#: How the summary names the parts of the worker-hours decomposition.
PART_LABELS = {
    "cold_start": "cold start",
    "overhead": "overhead",
    "command": "command",
    "think": "think",
    "teardown": "teardown",
    "idle": "pool idle",
    "isolation": "isolation",
    "minimum": "launch minimum",
    "fixed": "fixed fee",
}


def share(fraction: float) -> str:
    """A share of a whole: ``84%``, ``3.6%``, ``0.1%``, ``<0.1%``, ``0%``."""
    if fraction == 0:
        return "0%"
    if fraction < 0.001:
        return "<0.1%"
    return f"{fraction:.0%}" if fraction >= 0.1 else f"{fraction:.1%}"


def value(metric: str, figure: float | None) -> str:
    if metric == "worker_hours":
        return "-" if figure is None else f"{hours(figure)} h"
    if metric == "cost":
        return dollars(figure)
    if metric == "infra_failed":
        return "-" if figure is None else share(figure)
    return seconds(figure)


def percent(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "-"
    if before == 0:
        return "0.0%" if after == 0 else "n/a"
    return f"{(after - before) / before:+.1%}"
