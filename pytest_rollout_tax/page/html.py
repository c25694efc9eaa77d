"""The HTML report: one self-contained page (inline SVG, no script, no network) of one run.

Built from the ``rollout-tax/2`` report (``report.document.Report``), so the plugin
(``--rollout-html``) and the command line (``python -m pytest_rollout_tax html``) give the same
page. It leads with the decision (the verdict, then the leaderboard) and says everything the
terminal says, with the terminal's own lines, beside the figures they qualify.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.files import write_atomically
from ..core.stats import Stats
from ..errors import PlotsUnavailable
from ..gate.compare import Verdict, table_rows
from ..gate.compare import notes as comparison_notes
from ..gate.latest import Latest
from ..gate.lines import gate_lines
from ..gate.sides import Side, sides
from ..report.document import Report
from ..report.projection import project
from ..report.records import knee
from ..summary.lines import ranked_names
from ..summary.sections import Summary, fleet_lines, shares_line, summarize, tax_cap_note
from ..text.units import hours, seconds
from . import changes, plots, training
from .leaderboard import board, verdict_line
from .markup import e, notes, table
from .style import CSS, FRAGMENT_CSS


def run_title(report: Report, name: str | None) -> str:
    """``Rollout tax: NAME @ SHA12`` (``-dirty`` with uncommitted changes): the run by its saved
    name or JSON path (else when it was made) and its commit."""
    commit = report.commit or {}
    sha = str(commit.get("sha") or "")[:12]
    label = name or f"run of {report.created or '?'}"
    return f"Rollout tax: {label}" + (
        f" @ {sha}{'-dirty' if commit.get('dirty') else ''}" if sha else ""
    )


def render(
    report: Report,
    *,
    baseline: Report | None = None,
    baseline_label: str = "baseline",
    verdict: Verdict | None = None,
    title: str = "Rollout tax",
    summary: Summary | None = None,
    train_log: Sequence[str] = (),
    history: Latest | None = None,
) -> str:
    """The page of ``report``; with ``baseline`` (a report) its figures' changes, ECDFs and
    worker-hours overlaid, and ``verdict`` (the comparison's) shown first. The page lays out
    the sections of ``summary`` (None: the report's), as the terminal does; ``train_log``, a
    training run's lines (``summary/train_log.py``), is a section of its own; ``history``, a
    gated run's latest change points, too."""
    substrates = report.substrates
    summary = summary or summarize(report)
    ranked = [name for name, _ in summary.rows]
    palette = plots.colors(ranked)
    scale = report.projection
    now = sides(report, scale)
    before = sides(baseline, scale) if baseline else None
    in_order = {name: substrates[name] for name in ranked}
    outcomes = verdict.outcomes if verdict else ()
    sections = [  # (anchor, heading, content); a section without content is left out
        (
            "leaderboard",
            "Leaderboard",
            _leaderboard(report, summary, palette, baseline, outcomes),
        ),
        ("training", "Training step", training.section(report, summary, palette)),
        ("comparisons", "Comparisons", notes(summary.comparisons)),
        ("figures", "Every figure of the summary", _figures(in_order)),
        ("cold-start", "Cold start", _cold_start(now, before, in_order, ranked, palette)),
        ("latency", "Per-action latency", _latency(now, before, ranked, palette)),
        ("worker-hours", "Worker-hours", _worker_hours(report, baseline, ranked)),
        ("fleet", "Bursts, warm pools and the fleet", _fleet(in_order)),
        ("failures", "Failures", _failures(in_order)),
        ("train-log", "Your training run", notes(train_log)),
    ]
    if verdict is not None:
        caveats = comparison_notes(baseline, report) if baseline else []
        sections.append(("gate", "Against the baseline",
                         _gate(baseline_label, verdict, before, now, caveats)))  # fmt: skip
    sections.append(("change-points", "Change points", changes.section(history)))
    sections.append(("machine", "Machine and commit", _machine(report)))
    sections = [section for section in sections if section[2]]
    nav = " ".join(f'<a href="#{anchor}">{name}</a>' for anchor, name, _ in sections)
    decision = "".join(f'<p class="decision">{e(line)}</p>\n' for line in summary.decision)
    lead = "".join(
        f'<p class="lead">{e(line)}</p>\n' for line in [str(report.created), *summary.header]
    )
    body = "\n".join(f'<section id="{anchor}">\n<h2>{name}</h2>\n{content}\n</section>'
                     for anchor, name, content in sections)  # fmt: skip
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{e(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        f"<h1>{e(title)}</h1>\n{decision}{lead}{_verdict(verdict, baseline_label)}\n"
        f"<nav>{nav}</nav>\n"
        f"{body}\n</main>\n</body>\n</html>\n"
    )


def write(path: str | os.PathLike[str], page: str) -> Path:
    """Write ``page`` atomically to ``path``."""
    return write_atomically(path, lambda handle: handle.write(page))


def fragment(report: Report, summary: Sequence[str]) -> str:
    """The run in a part of another page (pytest-html's): the leaderboard, the terminal summary
    and, where matplotlib is installed, the cold-start ECDF, phases and worker-hours figures."""
    ranked = ranked_names(report)
    palette = plots.colors(ranked)
    parts = [
        '<div class="rollout-tax">',
        f"<h2>Rollout tax</h2>\n<style>{FRAGMENT_CSS}</style>",
        board(report, ranked, palette=palette),
        f"<pre>{e(chr(10).join(summary))}</pre>",
    ]
    try:
        plots.require()
    except PlotsUnavailable as exc:
        return "\n".join([*parts, f"<p>Plots: {e(str(exc))}</p>", "</div>"])
    now = sides(report, report.projection)
    found = [
        plots.ecdf("Cold start (ECDF)", _samples(now, "cold_start", ranked), palette=palette),
        plots.phases({name: report.substrates[name] for name in ranked}),
        plots.decomposition(_bars(report, None, ranked), title="Worker-hours by part"),
    ]
    parts.append('<div class="plots">' + "".join(svg for svg in found if svg) + "</div></div>")
    return "\n".join(parts)


# -- sections ------------------------------------------------------------------------------------


def _verdict(verdict: Verdict | None, label: str) -> str:
    """The gate's verdict in one line, first on the page."""
    if verdict is None:
        return ""
    if verdict.outcomes or verdict.checks:
        text, status = verdict_line(verdict.outcomes)
        if not verdict.outcomes:  # checks given, none judged: never green
            text, status = f"Gate {verdict.state}: {' '.join(verdict.summary)}", "unjudged"
        return (
            f'<p class="verdict {status}" id="verdict">{e(text)} '
            f'<a href="#gate">Against {e(label)}</a></p>'
        )
    if label:  # compared, with no check given
        return (
            f'<p class="verdict" id="verdict">Compared with {e(label)}; no check was given, so '
            f'nothing is gated. <a href="#gate">The comparison</a></p>'
        )
    return f'<p class="verdict" id="verdict">{e(" ".join(verdict.summary))}</p>'


def _leaderboard(
    report: Report,
    summary: Summary,
    palette: Mapping[str, str],
    baseline: Report | None,
    outcomes: Sequence[Any],
) -> str:
    key = (
        "Ranked by projected worker-hours, cheapest first. Each column has one unit; its "
        '<span class="best">best</span> and <span class="worst">worst</span> figures as shown '
        "are marked (equal figures alike)."
    )
    if baseline is not None:
        key += (
            " Under each figure its change from the baseline, a share's in percentage points "
            '(pp), none where nothing changed; <span class="credible">credible</span> where a '
            "check found a credible slowdown. A change inside the noise is not marked."
        )
    qualifiers = [*summary.dollars, *summary.warnings, *summary.notes, *summary.caveats]
    ranked = [name for name, _ in summary.rows]
    table_html = board(report, ranked, palette=palette, baseline=baseline, outcomes=outcomes)
    return f'{table_html}<p class="key">{key}</p>{notes(qualifiers)}'


def _figures(entries: Mapping[str, Any]) -> str:
    """The terminal's table: rollouts, failures and every percentile it shows."""

    def pair(stats: Stats | None) -> str:
        return f"{seconds(stats.p50)} / {seconds(stats.p95)}" if stats else "-"

    def p50(stats: Stats | None) -> str:
        return seconds(stats.p50) if stats else "-"

    headers = ("substrate", "rollouts", "failed", "cold start p50 / p95", "action p50 / p95",
               "step p50", "teardown p50", "worker-hours", "tax-hours")  # fmt: skip
    rows = [
        [name, str(entry.rollouts), str(entry.failures), pair(entry.cold_start),
         pair(entry.action), p50(entry.step), p50(entry.teardown),
         hours(entry.worker_hours), hours(entry.tax_hours)]
        if not (invalid := entry.no_valid_result)
        else [name, str(entry.rollouts), str(entry.failures), invalid, *["-"] * 5]
        for name, entry in entries.items()
    ]  # fmt: skip
    return table(headers, rows)


def _figure(svg: str | None, caption: str) -> str:
    if svg is None:
        return f'<p class="muted">No samples: {e(caption)}</p>'
    return f"<figure>\n{svg}\n<figcaption>{e(caption)}</figcaption>\n</figure>"


def _cold_start(
    now: Mapping[str, Side],
    before: Mapping[str, Side] | None,
    entries: Mapping[str, Any],
    ranked: Sequence[str],
    palette: Mapping[str, str],
) -> str:
    ecdf = plots.ecdf(
        "Cold start (ECDF)",
        _samples(now, "cold_start", ranked),
        _samples(before, "cold_start", ranked) if before else None,
        palette=palette,
    )
    caption = (
        "Share of rollouts whose sandbox was ready within a time: the further left, the faster;"
        " a long flat top is the tail." + (" Dashed: the baseline." if before else "")
    )
    phase_caption = (
        "Mean time of each phase of the cold start, in the order they happen, with each bar's "
        "total. A phase that is recorded but not counted (an image pull) is drawn too."
    )
    return (
        f'<div class="plots">{_figure(ecdf, caption)}\n'
        f"{_figure(plots.phases(entries), phase_caption)}</div>"
    )


def _latency(
    now: Mapping[str, Side],
    before: Mapping[str, Side] | None,
    ranked: Sequence[str],
    palette: Mapping[str, str],
) -> str:
    parts = []
    for metric, title, caption in (
        ("action", "No-op action (ECDF)",
         "The substrate's tax per tool call: no-op execs timed after each cold start."),
        ("step", "Step (ECDF)",
         "Every tool call of the workloads (exec, write_file, read_file): the tax plus the "
         "command's own time."),
    ):  # fmt: skip
        svg = plots.ecdf(
            title,
            _samples(now, metric, ranked),
            _samples(before, metric, ranked) if before else None,
            palette=palette,
        )
        parts.append(_figure(svg, caption + (" Dashed: the baseline." if before else "")))
    return f'<div class="plots">{"".join(parts)}</div>'


def _worker_hours(report: Report, baseline: Report | None, ranked: Sequence[str]) -> str:
    entries = report.substrates
    svg = plots.decomposition(_bars(report, baseline, ranked), title="Worker-hours by part")
    caption = (
        "Where the projected worker-hours go. Hatched parts (cold start, per-step overhead, "
        "teardown, a pool's idle sandboxes) are the substrate's tax; commands and think time "
        "are the agent's."
    )
    if baseline:
        caption += " Each baseline bar follows its substrate's, projected at this run's scale."
    lines = [line for name in ranked if (line := shares_line(name, entries[name]))]
    lines += [line for name in ranked if (line := tax_cap_note(name, entries[name]))]
    return f'<div class="plots wide">{_figure(svg, caption)}</div>{notes(lines)}'


def _fleet(entries: Mapping[str, Any]) -> str:
    """Burst levels (success rate beside each percentile, the knee marked), warm pools and the
    fleet projection: the terminal's lines under their tables."""
    levels, pools, lines = [], [], []
    for name, entry in entries.items():
        found = knee(entry.burst) if entry.burst else None
        for level in entry.burst or []:
            cold, n = level.cold_start, level.concurrency
            levels.append([
                name, str(n) + (" (knee)" if n == found else ""),
                seconds(cold.p50) if cold else "-", seconds(cold.p95) if cold else "-",
                f"{1 - level.failures / n:.0%}" if n else "-",
                f"{level.creates_per_s:.3g}" if level.creates_per_s is not None else "-",
            ])  # fmt: skip
        if pool := entry.pool:
            created = pool.creations
            pools.append([
                name, str(pool.size), str(pool.claims), str(pool.hits),
                str(pool.misses), seconds(pool.idle_sandbox_s),
                seconds(created.p50) if created else "-",
            ])  # fmt: skip
        lines += fleet_lines(name, entry)
    parts = []
    if levels:
        parts.append(table(("burst", "concurrency", "cold start p50", "p95", "success",
                            "creates/s"), levels))  # fmt: skip
    if pools:
        parts.append(table(("warm pool", "size", "claims", "hits", "misses", "idle in all",
                            "creation p50"), pools))  # fmt: skip
    return "".join(parts) + notes(lines)


def _failures(entries: Mapping[str, Any]) -> str:
    """Each substrate's failures by reason: the workload's, then the infrastructure's."""
    rows = [
        [name, reason, str(count)]
        for name, entry in entries.items()
        for reason, count in entry.failure_reasons.items()
    ]
    rows += [
        [name, f"infra_failed: {reason}", str(count)]
        for name, entry in entries.items()
        if entry.infra_failed
        for reason, count in entry.infra_failed.reasons.items()
    ]
    if not rows:
        return "<p>No rollout failed.</p>"
    return table(("substrate", "reason", "rollouts"), rows)


def _gate(
    label: str,
    verdict: Verdict,
    before: Mapping[str, Side] | None,
    now: Mapping[str, Side],
    caveats: Sequence[str],
) -> str:
    """The full comparison: each check's line, what makes it less like for like, then each
    common substrate's table."""
    if before is None:
        return notes(verdict.summary)
    checks = []
    for line in gate_lines(list(verdict.outcomes)) if verdict.outcomes else []:
        kind = "failed" if line.startswith("FAILED") else "noise" if line.startswith(
            "not credible") else "note"  # fmt: skip
        checks.append(f'<li class="{kind}">{e(line)}</li>')
    parts = [f"<p>Baseline: {e(label)}</p>"]
    if checks:
        parts.append(f'<ul class="notes checks">{"".join(checks)}</ul>')
    parts.append(notes(caveats))
    for name in now:
        if name in before:
            headers = (name, "baseline", "now", "change", "change %", "n base/now")
            rows = [  # a card on a phone names its substrate, as the column's header does
                [f'<span class="card-name">{e(name)} </span>{e(first)}', *map(e, rest)]
                for first, *rest in table_rows(before[name], now[name])
            ]
            parts.append(table(headers, rows, css="cards compare", raw=True))
    return "".join(parts)


def _machine(report: Report) -> str:
    machine = dict(report.machine)
    commit = report.commit or {}
    unknown = {"ci": "not in CI"}  # what a missing fact means, where it means something
    rows = [
        [key, str(value) if value is not None else unknown[key]]
        for key, value in machine.items()
        if value is not None or key in unknown
    ]
    if commit:
        sha = str(commit.get("sha", ""))
        rows.append(["commit", sha + (" (dirty)" if commit.get("dirty") else "")])
        if commit.get("branch"):
            rows.append(["branch", str(commit["branch"])])
    else:
        rows.append(["commit", "not a git checkout"])
    rows.append(["plugin version", str(report.plugin_version)])
    return table(("fact", "value"), rows, css="facts", header=False)


# -- helpers -------------------------------------------------------------------------------------


def _samples(
    by_substrate: Mapping[str, Side] | None, metric: str, ranked: Sequence[str]
) -> dict[str, list[float]]:
    found = by_substrate or {}
    return {name: found[name].pooled(metric) for name in ranked if name in found}


def _bars(
    report: Report, baseline: Report | None, ranked: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Each substrate's decomposition, ranked; each baseline's next to it, at this run's scale."""
    bars = {}
    for name in ranked:
        if parts := report.substrates[name].projected.decomposition:
            bars[name] = parts.to_dict()
        old = baseline.substrates.get(name) if baseline else None
        parts = project(old.means(), report.projection).decomposition if old else None
        if parts:
            bars[f"{name} (baseline)"] = parts.to_dict()
    return bars
