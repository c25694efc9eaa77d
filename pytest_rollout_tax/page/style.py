"""The HTML page's style sheet: the leaderboard's marks, plots side by side on a wide screen,
and tables that become cards on a phone (nothing scrolls sideways, nothing is clipped)."""

CSS = """
:root { color-scheme: light; --muted: #555; --line: #ddd; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #111; background: #fff; }
main { max-width: 1000px; margin: 0 auto; padding: 12px 12px 40px; }
h1 { font-size: 1.4em; margin: 0.4em 0 0.2em; overflow-wrap: anywhere; }
h2 { font-size: 1.15em; margin: 1.4em 0 0.4em; border-bottom: 1px solid var(--line); }
p.lead, figcaption, .muted, .key { color: var(--muted); }
p.decision { font-size: 1.05em; font-weight: 600; margin: 0.2em 0; overflow-wrap: anywhere; }
p.lead { margin: 0.1em 0; overflow-wrap: anywhere; }
.key { font-size: 0.85em; }
nav { margin: 0.4em 0; }
nav a { margin-right: 0.8em; white-space: nowrap; }
.verdict { margin: 0.6em 0; padding: 8px 12px; border-left: 6px solid #888; background: #f3f3f3; }
.verdict.failed { border-color: #b00020; background: #fdecee; }
.verdict.passed { border-color: #1e7b34; background: #e9f6ec; }
.verdict.partial, .verdict.unjudged { border-color: #b26a00; background: #fff4e0; }
.verdict.failed::first-line { font-weight: 600; }
figure { margin: 0.4em 0 1em; min-width: 0; }
.plots { display: grid; gap: 4px 24px;
         grid-template-columns: repeat(auto-fit, minmax(min(100%, 420px), 1fr)); }
.plots.wide { grid-template-columns: minmax(0, 560px); }
svg { display: block; width: 100%; height: auto; max-width: 560px; }
table { border-collapse: collapse; font-size: 0.9em; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: right;
         vertical-align: top; }
td { white-space: nowrap; }
th { vertical-align: bottom; }
th:first-child, td:first-child { text-align: left; }
table.facts td { text-align: left; white-space: normal; overflow-wrap: anywhere; }
.best { background: #e3f4e6; color: #124d22; font-weight: 600; }
.worst { background: #fbe7e7; color: #8b1a1a; }
.change { display: block; font-size: 0.8em; color: var(--muted); font-weight: normal; }
.credible { color: #b00020; font-weight: 600; }
.card-name { display: none; }
.swatch { display: inline-block; width: 0.7em; height: 0.7em; margin: 0 6px 0 4px; }
.place { color: var(--muted); }
ul.notes { padding-left: 1.2em; font-size: 0.9em; }
ul.notes li { overflow-wrap: anywhere; }
li.warn { color: #8a4500; }
li.failed { color: #b00020; font-weight: 600; }
li.noise { color: #555; }
pre { background: #f6f6f6; padding: 8px; font-size: 0.8em; white-space: pre-wrap;
      overflow-wrap: anywhere; }
@media (max-width: 640px) {
  table.cards, table.cards tbody, table.cards tr { display: block; width: 100%; }
  table.cards thead { display: none; }
  table.cards tr { border-bottom: 1px solid var(--line); padding: 4px 0; }
  table.cards td { display: inline-block; border: 0; text-align: left; padding: 2px 6px;
                   margin: 0 4px 2px 0; white-space: normal; overflow-wrap: anywhere; }
  table.cards td::before { content: attr(data-label); display: block; font-size: 0.75em;
                           color: var(--muted); font-weight: normal; }
  table.cards td:first-child { display: block; font-weight: 600; }
  table.cards td:first-child::before { content: none; }
  table.board td:first-child { display: inline-block; min-width: 9em; }
  table.compare .card-name { display: inline; }
}
"""

#: The few rules the leaderboard and plots need inside another page (pytest-html's), scoped to
#: the rollout part so that page keeps its own look.
FRAGMENT_CSS = """
.rollout-tax .best { background: #e3f4e6; color: #124d22; font-weight: 600; }
.rollout-tax .worst { background: #fbe7e7; color: #8b1a1a; }
.rollout-tax .swatch { display: inline-block; width: 0.7em; height: 0.7em; margin: 0 6px; }
.rollout-tax .plots { display: flex; flex-wrap: wrap; gap: 12px; }
.rollout-tax svg { width: 100%; height: auto; max-width: 480px; }
"""
