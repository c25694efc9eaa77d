"""HTML building blocks the report page shares: escaping, tables that fit a phone, notes."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

#: A cell: its text, or (text, CSS class) to mark it.
Cell = str | tuple[str, str]


def e(text: str) -> str:
    """``text`` escaped for an element or an attribute."""
    return html.escape(text, quote=True)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    *,
    css: str = "cards",
    header: bool = True,
    raw: bool = False,
) -> str:
    """A table whose cells carry their column's name (``data-label``), so that on a narrow
    screen the ``cards`` layout stacks each row as a card instead of making the page scroll.
    ``raw`` cells are HTML already (escaped by the caller)."""
    head = "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr></thead>"
    body = []
    for row in rows:
        cells = []
        for label, cell in zip(headers, row, strict=True):
            text, mark = cell if isinstance(cell, tuple) else (cell, "")
            attributes = f' data-label="{e(label)}"' + (f' class="{mark}"' if mark else "")
            cells.append(f"<td{attributes}>{text if raw else e(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="{css}">{head if header else ""}<tbody>{"".join(body)}</tbody></table>'


def notes(lines: Iterable[str]) -> str:
    """The terminal's notes and warnings as a list (warnings and errors marked), or nothing."""
    items = []
    for line in lines:
        kind = "warn" if line.startswith(("warning:", "rollout-tax: error")) else "note"
        items.append(f'<li class="{kind}">{e(line)}</li>')
    return f'<ul class="notes">{"".join(items)}</ul>' if items else ""
