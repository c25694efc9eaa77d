"""The HTML report: one self-contained page (inline SVG, no script, no network) of one run.

Built from the ``rollout-tax/2`` report dict, so the plugin (``--rollout-html``) and the
command line (``python -m pytest_rollout_tax html``) give the same page.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import plots
from .files import write_atomically
from .sides import Side, decompose_entry, scale_of, sides
from .terminal import shares_line
from .units import hours, ratio, seconds

CSS = """
:root { color-scheme: light; --muted: #555; --line: #ddd; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #111; background: #fff; }
main { max-width: 960px; margin: 0 auto; padding: 12px 16px 40px; }
h1 { font-size: 1.5em; margin: 0.4em 0 0.2em; }
h2 { font-size: 1.15em; margin: 1.6em 0 0.4em; border-bottom: 1px solid var(--line); }
p.lead, figcaption, .muted { color: var(--muted); }
figure { margin: 0.6em 0 1.2em; }
svg { display: block; width: 100%; height: auto; max-width: 100%; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9em; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: right;
         white-space: nowrap; }
th { white-space: normal; vertical-align: bottom; }
th:first-child, td:first-child { text-align: left; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 0.8em; }
.failed { color: #b00020; font-weight: 600; }
nav a { margin-right: 0.8em; white-space: nowrap; }
table.facts td { text-align: left; white-space: normal; }
"""


def render(
    report: dict,
    *,
    baseline: dict | None = None,
    baseline_label: str = "baseline",
    verdict: Sequence[str] = (),
    title: str = "Rollout tax",
) -> str:
    """The page of ``report``; with ``baseline`` (a report) its ECDFs and worker-hours overlaid,
    and ``verdict`` (the comparison's lines) shown as the gate's verdict."""
    substrates = report["substrates"]
    palette = plots.colors(list(substrates))
    now = sides(report, scale_of(report))
    before = sides(baseline, scale_of(baseline)) if baseline else None
    sections = [  # (anchor, heading, content)
        ("summary", "Summary", _summary_table(report)),
        ("cold-start", "Cold start", _cold_start(now, before, substrates, palette)),
        ("latency", "Per-action latency", _latency(now, before, palette)),
        ("worker-hours", "Worker-hours", _worker_hours(report, baseline, palette)),
        ("failures", "Failures", _failures(substrates)),
    ]
    if baseline is not None or verdict:
        sections.append(("gate", "Against the baseline", _gate(baseline_label, verdict)))
    sections.append(("machine", "Machine and commit", _machine(report)))
    nav = " ".join(f'<a href="#{anchor}">{name}</a>' for anchor, name, _ in sections)
    projection = report["projection"]
    lead = (
        f"{_e(str(report.get('created', '')))} &middot; hours projected for "
        f"{projection['rollouts']:,} rollouts &times; {projection['steps']} steps"
        + (
            f" with {_e(seconds(projection['think_time_s']))} think time per step"
            if projection["think_time_s"]
            else ""
        )
    )
    body = "\n".join(f'<section id="{anchor}">\n<h2>{name}</h2>\n{content}\n</section>'
                     for anchor, name, content in sections)  # fmt: skip
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        f'<h1>{_e(title)}</h1>\n<p class="lead">{lead}</p>\n<nav>{nav}</nav>\n'
        f"{body}\n</main>\n</body>\n</html>\n"
    )


def write(path: str | os.PathLike[str], page: str) -> Path:
    """Write ``page`` atomically to ``path``."""
    return write_atomically(path, lambda handle: handle.write(page))


def fragment(report: dict, summary: Sequence[str]) -> str:
    """The run in a part of another page (pytest-html's): the terminal summary and, where
    matplotlib is installed, the cold-start ECDF, phases and worker-hours figures."""
    parts = [f"<h2>Rollout tax</h2>\n<pre>{_e(chr(10).join(summary))}</pre>"]
    try:
        plots.require()
    except plots.PlotsUnavailable as exc:
        return "\n".join([*parts, f"<p>Plots: {_e(str(exc))}</p>"])
    palette = plots.colors(list(report["substrates"]))
    now = sides(report, scale_of(report))
    found = [
        plots.ecdf("Cold start (ECDF)", _samples(now, "cold_start"), palette=palette),
        plots.phases(report["substrates"]),
        plots.decomposition(_bars(report, None), title="Worker-hours by part", palette=palette),
    ]
    parts += [f'<div style="max-width:800px">{svg}</div>' for svg in found if svg]
    return "\n".join(parts)


# -- sections ------------------------------------------------------------------------------------


def _figure(svg: str | None, caption: str) -> str:
    if svg is None:
        return f'<p class="muted">No samples: {_e(caption)}</p>'
    return f"<figure>\n{svg}\n<figcaption>{_e(caption)}</figcaption>\n</figure>"


def _summary_table(report: dict) -> str:
    headers = ("substrate", "rollouts", "failed", "cold start p50 / p95", "action p50 / p95",
               "step p50", "teardown p50", "worker-hours", "tax-hours")  # fmt: skip
    rows = []
    for name, entry in report["substrates"].items():
        rows.append([
            name, str(entry["rollouts"]), str(entry["failures"]),
            _pair(entry.get("cold_start")), _pair(entry.get("action")),
            _stat(entry.get("step")), _stat(entry.get("teardown")),
            hours(entry.get("worker_hours")), hours(entry.get("tax_hours")),
        ])  # fmt: skip
    shares = [line for n, e in report["substrates"].items() if (line := shares_line(n, e))]
    notes = "".join(f"<li>{_e(line)}</li>" for line in shares)
    return _table(headers, rows) + (f"<ul>{notes}</ul>" if notes else "")


def _cold_start(
    now: Mapping[str, Side],
    before: Mapping[str, Side] | None,
    substrates: Mapping[str, Any],
    palette: Mapping[str, str],
) -> str:
    ecdf = plots.ecdf(
        "Cold start (ECDF)",
        _samples(now, "cold_start"),
        _samples(before, "cold_start") if before else None,
        palette=palette,
    )
    caption = (
        "Share of rollouts whose sandbox was ready within a time: the further left, the faster;"
        " a long flat top is the tail." + (" Dashed: the baseline." if before else "")
    )
    phases = plots.phases(substrates)
    phase_caption = (
        "Mean time of each phase of the cold start, in the order they happen. A phase that is "
        "recorded but not counted (an image pull) is drawn too."
    )
    return _figure(ecdf, caption) + "\n" + _figure(phases, phase_caption)


def _latency(
    now: Mapping[str, Side], before: Mapping[str, Side] | None, palette: Mapping[str, str]
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
            _samples(now, metric),
            _samples(before, metric) if before else None,
            palette=palette,
        )
        parts.append(_figure(svg, caption + (" Dashed: the baseline." if before else "")))
    return "\n".join(parts)


def _worker_hours(report: dict, baseline: dict | None, palette: Mapping[str, str]) -> str:
    spread = report.get("spread")
    title = "Worker-hours by part"
    if spread:
        title += f" (spread {ratio(spread['worker_hours'])})"
    svg = plots.decomposition(_bars(report, baseline), title=title, palette=palette)
    caption = (
        "Where the projected worker-hours go. Cold start, per-step overhead and teardown (and a "
        "pool's idle sandboxes) are the substrate's tax; commands and think time are the agent's."
    )
    if baseline:
        caption += " The baseline's bars are projected at this run's scale."
    text = ""
    if spread:
        text = (
            f"<p>Spread: {_e(spread['slowest'])}'s cold-start p50 is "
            f"{ratio(spread['cold_start_p50'])} {_e(spread['fastest'])}'s; worker-hours differ "
            f"{ratio(spread['worker_hours'])} between substrates.</p>"
        )
    return _figure(svg, caption) + text


def _failures(substrates: Mapping[str, Any]) -> str:
    rows = [
        [name, reason, str(count)]
        for name, entry in substrates.items()
        for reason, count in (entry.get("failure_reasons") or {}).items()
    ]
    if not rows:
        return "<p>No rollout failed.</p>"
    return _table(("substrate", "reason", "rollouts"), rows)


def _gate(label: str, verdict: Sequence[str]) -> str:
    if not verdict:
        return f"<p>Baseline: {_e(label)}</p>"
    lines = "\n".join(
        f'<span class="failed">{_e(line)}</span>' if line.startswith("FAILED") else _e(line)
        for line in verdict
    )
    return f"<pre>{lines}</pre>"


def _machine(report: dict) -> str:
    machine = dict(report.get("machine") or {})
    commit = report.get("commit") or {}
    rows = [[key, str(value)] for key, value in machine.items()]
    if commit:
        sha = str(commit.get("sha", ""))
        rows.append(["commit", sha + (" (dirty)" if commit.get("dirty") else "")])
        rows.append(["branch", str(commit.get("branch", ""))])
    else:
        rows.append(["commit", "not a git checkout"])
    rows.append(["plugin version", str(report.get("plugin_version", ""))])
    return _table(("", ""), rows, header=False, css="facts")


# -- helpers -------------------------------------------------------------------------------------


def _samples(by_substrate: Mapping[str, Side] | None, metric: str) -> dict[str, list[float]]:
    return {name: side.pooled(metric) for name, side in (by_substrate or {}).items()}


def _bars(report: dict, baseline: dict | None) -> dict[str, dict[str, float]]:
    """Each substrate's decomposition; each baseline's next to it, at this run's scale."""
    scale = scale_of(report)
    bars = {}
    for name, entry in report["substrates"].items():
        if entry.get("decomposition"):
            bars[name] = entry["decomposition"]
        old = (baseline or {}).get("substrates", {}).get(name)
        if old and (parts := decompose_entry(old, scale)):
            bars[f"{name} (baseline)"] = parts
    return bars


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, header: bool = True, css: str = ""
) -> str:
    head = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    attribute = f' class="{css}"' if css else ""
    return f'<div class="scroll"><table{attribute}>{head}{body}</table></div>'


def _pair(stats: Mapping[str, float] | None) -> str:
    return f"{seconds(stats['p50'])} / {seconds(stats['p95'])}" if stats else "-"


def _stat(stats: Mapping[str, float] | None) -> str:
    return seconds(stats["p50"]) if stats else "-"


def _e(text: str) -> str:
    return html.escape(text, quote=True)
