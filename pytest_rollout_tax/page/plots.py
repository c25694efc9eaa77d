"""The HTML report's figures: matplotlib (the ``[html]`` extra) drawn to inline SVG strings.

Every function takes plain figures (samples, STATS dicts, hours) and returns one ``<svg>``
element that scales to its container's width. No pyplot: each figure is its own object.
"""

from __future__ import annotations

import html
import importlib
import inspect
import io
import math
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import PlotsUnavailable
from ..report.document import SubstrateEntry
from ..text.units import PART_LABELS

#: Points drawn per ECDF curve at most: a 10,000-rollout run stays a small page.
ECDF_POINTS = 300
#: Figures are this wide (inches): at a phone's 376 CSS px their 10 pt text is 11.9 px.
WIDTH_IN = 4.4
#: Every text of a figure, in points (legends and value labels too).
FONT_PT = 10
#: Substrate colours: saturated, and used for nothing else. The well-known names have their
#: own; any other name is hashed into the palette, so a name's colour never depends on which
#: substrates ran or on the page.
SUBSTRATE_PALETTE = (
    "#1f5fa8", "#d9590b", "#2e8b3a", "#b3202a", "#6a3d9a",
    "#8a5a2b", "#c2188a", "#137b7b", "#6b6b00", "#303030",
)  # fmt: skip
KNOWN_SUBSTRATES = ("local", "docker", "docker-session", "k8s", "k8s-session", "e2b", "ec2",
                    "ec2-session", "docker-pool")  # fmt: skip
#: The parts of the worker-hours decomposition in stacking order: the tax first, then the agent's.
STACKING = ("cold_start", "overhead", "teardown", "idle", "isolation", "command", "think")
#: Parts are pale (never a substrate's saturated colour); the tax's parts are hatched.
PART_COLORS = {
    "cold_start": "#f4b6b0", "overhead": "#f9d9a8", "teardown": "#fbf0b0",
    "idle": "#dccbe6", "isolation": "#bfe8d9", "command": "#bfe0f0", "think": "#e4e4e4",
}  # fmt: skip
#: The tax's parts are hatched, each its own way; the agent's are plain.
PART_HATCHES = {
    "cold_start": "///", "overhead": "\\\\\\", "teardown": "xx", "idle": "..", "isolation": "++",
}  # fmt: skip
#: Cold-start phases: the Okabe-Ito palette, told apart under colour-vision deficiency, taken
#: in the order the phases happen on the chart (its legend names them). Its first five are the
#: ones far from every substrate colour; black is left out. Past seven, the colours repeat
#: hatched.
PHASE_PALETTE = ("#e69f00", "#56b4e9", "#009e73", "#f0e442", "#cc79a7", "#0072b2", "#d55e00")
PHASE_HATCHES = ("", "///", "xx")
_STYLE = {
    "svg.fonttype": "none",  # text stays text: smaller, selectable, no embedded glyphs
    "svg.hashsalt": "rollout-tax",  # stable ids: the same report gives the same page
    "font.size": FONT_PT,
    "legend.fontsize": FONT_PT,
    "axes.titlesize": FONT_PT + 1,
    "axes.labelsize": FONT_PT,
    "xtick.labelsize": FONT_PT,
    "ytick.labelsize": FONT_PT,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "grid.alpha": 0.3,
    "hatch.color": "#666666",
    "hatch.linewidth": 0.6,
}
_SIZE = re.compile(r'<svg([^>]*?) width="[^"]*" height="[^"]*"')


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
    """Each substrate's colour: the same for a name in every figure of every page."""
    return {name: _fixed(name, KNOWN_SUBSTRATES, SUBSTRATE_PALETTE) for name in names}


def phase_style(index: int) -> tuple[str, str]:
    """The colour and hatch of a chart's ``index``-th cold-start phase."""
    turn, place = divmod(index, len(PHASE_PALETTE))
    return PHASE_PALETTE[place], PHASE_HATCHES[turn % len(PHASE_HATCHES)]


def _fixed(name: str, known: Sequence[str], palette: Sequence[str]) -> str:
    index = known.index(name) if name in known else zlib.crc32(name.encode())
    return palette[index % len(palette)]


def ecdf_points(
    samples: Sequence[float], limit: int = ECDF_POINTS
) -> tuple[list[float], list[float]]:
    """The ECDF of the positive ``samples`` as at most ``limit`` (value, fraction) points.

    Past ``limit`` samples, evenly spaced ranks are kept, always with the minimum and maximum.
    """
    ordered = sorted(value for value in samples if value > 0)
    count = len(ordered)
    ranks: Sequence[int]
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
    """Each substrate's ECDF on a time axis (log when the samples span a decade or more); the
    baseline's dashed, in the substrate's colour. None without samples."""
    curves = [(name, samples, "-", "") for name, samples in now.items() if samples]
    curves += [
        (name, samples, "--", " (baseline)")
        for name, samples in (baseline or {}).items()
        if samples and name in now
    ]
    points = [(name, ecdf_points(samples), line, suffix) for name, samples, line, suffix in curves]
    points = [curve for curve in points if curve[1][0]]
    if not points:
        return None
    with _style():
        figure, axes = _figure(height=3.3)
        axes.grid(True, axis="both")
        for name, (values, fractions), line, suffix in points:
            axes.step(values, fractions, where="post", linestyle=line, linewidth=1.6,
                      color=palette.get(name), label=f"{name}{suffix}")  # fmt: skip
        scale = time_axis(axes.xaxis, [v for _, (values, _), _, _ in points for v in values])
        axes.set_ylim(0, 1.02)
        axes.set_ylabel("fraction of samples")
        axes.set_xlabel("time" + (" (log scale)" if scale == "log" else ""))
        axes.set_title(title, loc="left")
        figure.legend(loc="outside lower center", ncol=2, frameon=False)
        return _svg(figure, title)


def time_axis(axis: Any, values: Sequence[float]) -> str:
    """Scale ``axis`` for ``values`` (seconds): ``linear`` when they span less than a decade,
    else ``log``; either way with plain ticks (``250ms``, ``1s``), never powers of ten."""
    from matplotlib.ticker import LogLocator, MaxNLocator, NullFormatter

    positive = [v for v in values if v > 0]
    low, high = (min(positive), max(positive)) if positive else (1.0, 1.0)
    decades = math.log10(high / low)
    if decades < 1:
        axis.set_major_locator(MaxNLocator(nbins=5, min_n_ticks=3))
        scale = "linear"
    else:
        axis.axes.set_xscale("log") if axis.axis_name == "x" else axis.axes.set_yscale("log")
        subs = (1, 2, 5) if decades < 1.7 else (1, 3) if decades < 3.5 else (1,)
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        scale = "log"
    axis.set_major_formatter(_seconds_formatter())
    axis.set_minor_formatter(NullFormatter())
    return scale


def phases(entries: Mapping[str, SubstrateEntry]) -> str | None:
    """Mean cold-start phases as one stacked horizontal bar per substrate (in ``entries``'
    order), each phase in its own colour (named in the legend), each bar labelled with its
    total."""
    rows = {name: e.phases for name, e in entries.items() if e.phases}
    if not rows:
        return None
    names = list(dict.fromkeys(phase for row in rows.values() for phase in row))
    title = "Cold start by phase (mean)"
    labels = list(rows)
    stacks = {p: [s.mean if (s := rows[n].get(p)) else 0.0 for n in labels] for p in names}
    return _stacked_bars(
        title, labels, [(p, stacks[p], *phase_style(i)) for i, p in enumerate(names)], _seconds
    )


def decomposition(bars: Mapping[str, Mapping[str, float]], *, title: str) -> str | None:
    """Worker-hours by part as one stacked horizontal bar per label (substrate or baseline),
    each part pale, the tax's hatched, each bar labelled with its total."""
    if not bars:
        return None
    labels = list(bars)
    stacks = [
        (PART_LABELS[part], [bars[n].get(part, 0.0) for n in labels],
         PART_COLORS[part], PART_HATCHES.get(part, ""))
        for part in STACKING
    ]  # fmt: skip
    return _stacked_bars(
        title,
        labels,
        [s for s in stacks if any(s[1])],
        lambda h: f"{h:,.0f} h",
        xlabel="projected worker-hours",
    )


def makespans(
    quantiles: Mapping[str, Sequence[float]], *, palette: Mapping[str, str]
) -> str | None:
    """Each substrate's simulated makespan per training step as a box (``quantiles``: its
    percentiles 0, 5, ..., 100): the box p25-p75, the line the median, whiskers p5 and p95,
    dots the least and the most; on a time axis (log when they span a decade)."""
    rows = {name: q for name, q in quantiles.items() if len(q) == 21}
    if not rows:
        return None
    title = "Makespan per training step (simulated)"
    boxes = [
        {"label": name, "med": q[10], "q1": q[5], "q3": q[15], "whislo": q[1], "whishi": q[19],
         "fliers": [q[0], q[20]]}
        for name, q in rows.items()
    ]  # fmt: skip
    with _style():
        figure, axes = _figure(height=1.3 + 0.5 * len(rows))
        sideways = (
            {"orientation": "horizontal"}  # matplotlib 3.10 on; before it, vert=False
            if "orientation" in inspect.signature(axes.bxp).parameters
            else {"vert": False}
        )
        drawn = axes.bxp(boxes, patch_artist=True, widths=0.55, **sideways)
        for patch, name in zip(drawn["boxes"], rows, strict=True):
            patch.set_facecolor(palette.get(name, SUBSTRATE_PALETTE[0]))
            patch.set_alpha(0.55)
        axes.invert_yaxis()
        time_axis(axes.xaxis, [v for q in rows.values() for v in q])
        axes.set_xlabel("makespan of a step's batch")
        axes.set_title(title, loc="left")
        return _svg(figure, title)


# -- helpers -------------------------------------------------------------------------------------


def _stacked_bars(
    title: str,
    labels: Sequence[str],
    stacks: Sequence[tuple[str, Sequence[float], str, str]],
    show: Any,
    *,
    xlabel: str = "",
) -> str:
    """Horizontal stacked bars, one per label; ``stacks`` are (legend, widths, colour, hatch).
    A segment wide enough carries its value; every bar its total; no grid."""
    with _style():
        figure, axes = _figure(height=1.3 + 0.42 * len(labels))
        left = [0.0] * len(labels)
        segments = []  # (start, width) of every segment, for its value label
        for legend, widths, color, hatch in stacks:
            axes.barh(labels, widths, left=left, color=color, hatch=hatch, label=legend,
                      height=0.62, edgecolor="#ffffff", linewidth=0.6)  # fmt: skip
            segments += [(row, a, b) for row, (a, b) in enumerate(zip(left, widths, strict=True))]
            left = [a + b for a, b in zip(left, widths, strict=True)]
        top = max(left) or 1.0
        for row, start, width in segments:
            if width > 0.22 * top:  # room for the value inside the segment
                axes.annotate(show(width), (start + width / 2, row), ha="center", va="center")
        for row, total in enumerate(left):
            axes.annotate(f" {show(total)}", (total, row), va="center")
        axes.invert_yaxis()
        axes.set_xlim(0, top * 1.3)
        axes.xaxis.set_major_locator(_locator())
        axes.xaxis.set_major_formatter(_plain(show))
        if xlabel:
            axes.set_xlabel(xlabel)
        axes.set_title(title, loc="left")
        figure.legend(loc="outside lower center", ncol=3, frameon=False)
        return _svg(figure, title)


def _locator() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=4, min_n_ticks=3)


def _plain(show: Any) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _position: "0" if value == 0 else show(value))


def _style() -> Any:
    return require().rc_context(_STYLE)


def _figure(height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, height), layout="constrained")
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


def _seconds(value: float) -> str:
    """A tick's or a label's duration, plain: ``250us``, ``2.5ms``, ``1.2s``."""
    if value <= 0 or not math.isfinite(value):
        return "0"
    if value < 1e-3:
        return f"{value * 1e6:.3g}µs"
    if value < 1:
        return f"{value * 1e3:.3g}ms"
    return f"{value:.3g}s"


def _seconds_formatter() -> Any:
    return _plain(_seconds)
