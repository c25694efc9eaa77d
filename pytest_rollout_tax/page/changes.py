"""The page's change-point section: on a gated run with history, the latest change point of each
series of this run's testbeds (gate/latest.py), with its size and the run it happened at."""

from __future__ import annotations

from ..gate.latest import Latest
from ..text.units import percent, value
from .markup import notes, table

HEADERS = ("testbed", "figure", "before", "after", "change", "x run-to-run noise",
           "beyond the noise", "run", "date")  # fmt: skip


def section(latest: Latest | None) -> str:
    """The section's content: a table of the change points, then the notes (none: nothing)."""
    if latest is None:
        return ""
    rows = []
    for c in latest.points:
        unit = c.metric.split(".")[-2]
        noise = f"{c.sigmas:.1f}" if c.noise else "-"
        rows.append([c.testbed, c.metric, value(unit, c.before), value(unit, c.after),
                     percent(c.before, c.after), noise, "yes" if c.beyond_noise else "no",
                     c.run, c.created or "?"])  # fmt: skip
    intro = (
        f"<p>Over {latest.runs} saved run(s), kept per testbed: the latest change point of each "
        "figure (PELT, each kept by a t-test).</p>"
    )
    return intro + (table(HEADERS, rows) if rows else "") + notes(latest.notes)
