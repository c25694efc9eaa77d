"""How the summary writes its numbers: durations, hours, ratios, shares."""

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


def ratio(value: float) -> str:
    if value < 0.1:
        return f"{value:.2g}x"
    return f"{value:.2f}x" if value < 10 else f"{value:,.0f}x"


def share(fraction: float) -> str:
    """A share of a whole: ``84%``, ``3.6%``, ``0.1%``, ``<0.1%``, ``0%``."""
    if fraction == 0:
        return "0%"
    if fraction < 0.001:
        return "<0.1%"
    return f"{fraction:.0%}" if fraction >= 0.1 else f"{fraction:.1%}"
