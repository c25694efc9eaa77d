"""The figures: ECDF points kept few, SVG that scales, and a clear error without matplotlib."""

from __future__ import annotations

import re

import pytest
from support import colour_vision

from pytest_rollout_tax.core.stats import Stats
from pytest_rollout_tax.page import plots
from pytest_rollout_tax.report.document import SubstrateEntry


def test_a_short_ecdf_keeps_every_positive_sample() -> None:
    values, fractions = plots.ecdf_points([0.3, 0.1, 0.2, 0.0])
    assert values == [0.1, 0.2, 0.3]  # 0 has no place on a log axis
    assert fractions == pytest.approx([1 / 3, 2 / 3, 1.0])


def test_a_long_ecdf_is_thinned_to_the_limit_keeping_both_ends() -> None:
    samples = [i / 1000 for i in range(1, 100_001)]
    values, fractions = plots.ecdf_points(samples, limit=300)
    assert len(values) == 300
    assert (values[0], values[-1]) == (0.001, 100.0)
    assert (fractions[0], fractions[-1]) == (1 / 100_000, 1.0)
    assert values == sorted(values) and fractions == sorted(fractions)


def test_figures_are_svg_elements_as_wide_as_their_container() -> None:
    palette = plots.colors(["local", "docker"])
    svg = plots.ecdf("Cold start (ECDF)", {"local": [0.001, 0.002], "docker": [0.2]},
                     palette=palette)  # fmt: skip
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert 'width="100%"' in svg and 'aria-label="Cold start (ECDF)"' in svg
    assert "<?xml" not in svg and "<!DOCTYPE" not in svg
    assert ">local</text>" in svg  # text stays text (no glyph paths)
    assert plots.ecdf("nothing", {"local": []}, palette=palette) is None


def test_the_same_figure_twice_is_the_same_svg() -> None:
    """Stable ids and no date: a regenerated page (and its screenshot) changes only with data."""
    draw = lambda: plots.decomposition(  # noqa: E731
        {"local": {"cold_start": 1.0, "command": 3.0}}, title="t"
    )
    assert draw() == draw()


def texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_a_time_axis_under_one_decade_is_linear_with_plain_ticks() -> None:
    svg = plots.ecdf("t", {"docker": [0.24, 0.3, 0.38]}, palette=plots.colors(["docker"]))
    shown = texts(svg)
    assert "time" in shown and "time (log scale)" not in shown
    assert [t for t in shown if t.endswith("ms")] == ["240ms", "280ms", "320ms", "360ms"]


def test_a_time_axis_over_decades_is_log_with_plain_ticks() -> None:
    svg = plots.ecdf("t", {"a": [0.0005, 0.002], "b": [0.3]}, palette=plots.colors(["a", "b"]))
    shown = texts(svg)
    assert "time (log scale)" in shown
    assert {"1ms", "10ms", "100ms"} <= set(shown)
    assert not [t for t in shown if "\u00d7" in t or "10^" in t or "$" in t]


def mean(seconds: float) -> Stats:
    """One sample's stats: every figure is ``seconds``."""
    return Stats.of([seconds])


def test_phase_bars_carry_their_values_and_no_grid() -> None:
    svg = plots.phases({
        "docker": SubstrateEntry(phases={"create": mean(0.12), "first_exec": mean(0.12)}),
        "local": SubstrateEntry(phases={"create": mean(0.002)}),
    })  # fmt: skip
    shown = texts(svg)
    assert " 2ms" in shown and " 240ms" in shown  # each bar's total, local's too
    assert shown.count("120ms") == 2  # each wide segment's own value
    grid = "stroke-opacity: 0.3"  # how a gridline is drawn (grid.alpha)
    assert grid not in svg and grid in plots.ecdf("t", {"a": [0.1, 0.2]}, palette={})


def test_without_matplotlib_the_error_names_the_extra(no_matplotlib) -> None:
    with pytest.raises(plots.PlotsUnavailable) as info:
        plots.require()
    assert str(info.value) == (
        "the HTML report needs matplotlib: pip install 'pytest-rollout-tax[html]'"
    )


PHASES = ("requested", "create", "pull", "start", "first_exec")


def test_five_cold_start_phases_are_five_colours_told_apart_under_colour_blindness() -> None:
    """Not greys: each phase its own hue, apart (delta E 15 or more) in normal vision and under
    protanopia, deuteranopia and tritanopia, and named in the legend."""
    svg = plots.phases({
        "docker": SubstrateEntry(phases={p: mean(0.05 * (i + 1)) for i, p in enumerate(PHASES)}),
        "local": SubstrateEntry(phases={"create": mean(0.002)}),
    })  # fmt: skip
    fills = list(dict.fromkeys(re.findall(r"fill: (#[0-9a-f]{6})", svg)))
    drawn = [c for c in fills if c in plots.PHASE_PALETTE]
    assert len(drawn) == 5, fills
    for color in drawn:
        assert colour_vision.chroma(color) > 30, color  # a hue, not a grey
    for vision in colour_vision.VISIONS:
        for i, a in enumerate(drawn):
            for b in drawn[i + 1 :]:
                assert colour_vision.distance(a, b, vision) >= 15, (vision, a, b)
    legend = texts(svg)
    assert all(phase in legend for phase in PHASES), legend


def test_every_phase_colour_stays_apart_and_more_phases_than_colours_are_hatched() -> None:
    palette = plots.PHASE_PALETTE
    for vision in colour_vision.VISIONS:
        for i, a in enumerate(palette):
            assert all(colour_vision.distance(a, b, vision) >= 15 for b in palette[i + 1 :])
    styles = [plots.phase_style(i) for i in range(len(palette) * 2)]
    assert len(set(styles)) == len(styles)  # the eighth phase is the first colour, hatched
