"""The HTML report's figures: matplotlib (the ``[html]`` extra) drawn to inline SVG strings.

Every function takes plain figures (samples, STATS dicts, hours) and returns one ``<svg>``
element that scales to its container's width. No pyplot: each figure is its own object.
"""

from __future__ import annotations

import html
import importlib
import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import RolloutTaxError
from .terminal import PART_LABELS

#: Points drawn per ECDF curve at most: a 10,000-rollout run stays a small page.
ECDF_POINTS = 300
#: The parts of the worker-hours decomposition in stacking order: the tax first, then the agent's.
STACKING = ("cold_start", "overhead", "teardown", "idle", "isolation", "command", "think")
PART_COLORS = {
    "cold_start": "#c0392b", "overhead": "#e67e22", "teardown": "#f1c40f",
    "idle": "#8e44ad", "isolation": "#16a085", "command": "#2980b9", "think": "#95a5a6",
}  # fmt: skip
_STYLE = {
    "svg.fonttype": "none",  # text stays text: smaller, selectable, no embedded glyphs
    "svg.hashsalt": "rollout-tax",  # stable ids: the same report gives the same page
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
_SIZE = re.compile(r'<svg([^>]*?) width="[^"]*" height="[^"]*"')


class PlotsUnavailable(RolloutTaxError):
    """matplotlib, which draws the HTML report's figures, is not installed."""


def require() -> Any:
    """matplotlib, imported with the parts drawing needs; raises PlotsUnavailable (naming the
    extra) when it is missing."""
    try:
        for module in ("matplotlib.figure", "matplotlib.backends.backend_svg", "matplotlib.ticker"):
            importlib.import_module(module)
    except ImportError:
        raise PlotsUnavailable(
            "the HTML report needs matplotlib: pip install 'pytest-rollout-tax[html]'"
        ) from None
    return importlib.import_module("matplotlib")


def colors(names: Sequence[str]) -> dict[str, str]:
    """One color per substrate, the same in every figure."""
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    return {name: palette[index % len(palette)] for index, name in enumerate(names)}


def ecdf_points(samples: Sequence[float], limit: int = ECDF_POINTS) -> tuple[list, list]:
    """The ECDF of the positive ``samples`` as at most ``limit`` (value, fraction) points.

    Past ``limit`` samples, evenly spaced ranks are kept, always with the minimum and maximum.
    """
    ordered = sorted(value for value in samples if value > 0)
    count = len(ordered)
    if count <= limit:
        ranks = range(count)
    else:
        ranks = sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})
    return [ordered[r] for r in ranks], [(r + 1) / count for r in ranks]


def ecdf(
    title: str,
    now: Mapping[str, Sequence[float]],
    baseline: Mapping[str, Sequence[float]] | None = None,
    *,
    palette: Mapping[str, str],
) -> str | None:
    """Each substrate's ECDF on a log time axis; the baseline's dashed. None without samples."""
    curves = [(name, samples, "-", "") for name, samples in now.items() if samples]
    curves += [
        (name, samples, "--", " (baseline)")
        for name, samples in (baseline or {}).items()
        if samples and name in now
    ]
    if not curves:
        return None
    with _style():
        figure, axes = _figure(height=3.8)
        for name, samples, line, suffix in curves:
            values, fractions = ecdf_points(samples)
            if values:
                axes.step(values, fractions, where="post", linestyle=line, linewidth=1.6,
                          color=palette.get(name), label=f"{name}{suffix}")  # fmt: skip
        axes.set_xscale("log")
        axes.xaxis.set_major_formatter(_seconds_formatter())
        axes.set_ylim(0, 1.02)
        axes.set_ylabel("fraction of samples")
        axes.set_xlabel("seconds (log scale)")
        axes.set_title(title, loc="left")
        figure.legend(loc="outside lower center", ncol=4, fontsize=8, frameon=False)
        return _svg(figure, title)


def phases(entries: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Mean cold-start phases as one stacked horizontal bar per substrate (a color per phase)."""
    rows = {name: e.get("phases") or {} for name, e in entries.items() if e.get("phases")}
    if not rows:
        return None
    names = list(dict.fromkeys(phase for row in rows.values() for phase in row))
    title = "Cold start by phase (mean seconds)"
    with _style():
        figure, axes = _figure(height=1.5 + 0.45 * len(rows))
        shades = _shades(len(names))
        labels = list(rows)
        left = [0.0] * len(labels)
        for index, phase in enumerate(names):
            widths = [(rows[n].get(phase) or {}).get("mean", 0.0) for n in labels]
            axes.barh(labels, widths, left=left, color=shades[index], label=phase, height=0.6)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        axes.invert_yaxis()
        axes.xaxis.set_major_formatter(_seconds_formatter())
        axes.set_xlabel("seconds")
        axes.set_title(title, loc="left")
        figure.legend(loc="outside lower center", ncol=min(len(names), 4), fontsize=8,
                      frameon=False)  # fmt: skip
        return _svg(figure, title)


def decomposition(
    bars: Mapping[str, Mapping[str, float]], *, title: str, palette: Mapping[str, str]
) -> str | None:
    """Worker-hours by part as one stacked horizontal bar per label (substrate or baseline)."""
    if not bars:
        return None
    with _style():
        figure, axes = _figure(height=1.5 + 0.45 * len(bars))
        labels = list(bars)
        left = [0.0] * len(labels)
        for part in STACKING:
            widths = [bars[name].get(part, 0.0) for name in labels]
            if not any(widths):
                continue
            axes.barh(labels, widths, left=left, color=PART_COLORS[part],
                      label=PART_LABELS[part], height=0.6)  # fmt: skip
            left = [a + b for a, b in zip(left, widths, strict=True)]
        for row, total in enumerate(left):
            axes.annotate(f" {total:,.0f} h", (total, row), va="center", fontsize=8)
        axes.invert_yaxis()
        axes.set_xlim(0, max(left) * 1.18 or 1)
        axes.set_xlabel("projected worker-hours")
        axes.set_title(title, loc="left")
        figure.legend(loc="outside lower center", ncol=6, fontsize=8, frameon=False)
        return _svg(figure, title)


# -- helpers -------------------------------------------------------------------------------------


def _style() -> Any:
    return require().rc_context(_STYLE)


def _figure(height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, height), layout="constrained")
    FigureCanvasSVG(figure)
    return figure, figure.add_subplot()


def _svg(figure: Any, title: str) -> str:
    """The figure as an ``<svg>`` element 100% wide (its viewBox keeps the aspect ratio)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]  # no XML prolog or DOCTYPE inside HTML
    label = html.escape(title, quote=True)
    return _SIZE.sub(
        lambda m: f'<svg{m.group(1)} width="100%" role="img" aria-label="{label}"', text, count=1
    )


def _seconds_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    def label(value: float, _position: float) -> str:
        if value <= 0 or not math.isfinite(value):
            return "0"
        if value < 1e-3:
            return f"{value * 1e6:.3g}µs"
        if value < 1:
            return f"{value * 1e3:.3g}ms"
        return f"{value:.3g}s"

    return FuncFormatter(label)


def _shades(count: int) -> list[str]:
    cmap = require().colormaps["viridis"]
    return [cmap(0.15 + 0.7 * i / max(1, count - 1)) for i in range(count)]
