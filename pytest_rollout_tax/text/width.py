"""How wide the text may be: the terminal's width (``COLUMNS``), and notes wrapped to it."""

from __future__ import annotations

import shutil
import textwrap

#: Text is at least this wide, wider on a wider terminal (``COLUMNS``).
MIN_WIDTH = 80


def terminal_width() -> int:
    """The terminal's width (``COLUMNS`` when set), never below MIN_WIDTH."""
    return max(MIN_WIDTH, shutil.get_terminal_size((MIN_WIDTH, 24)).columns)


def wrap(note: str, width: int, *, break_words: bool = True) -> list[str]:
    """A note as lines no wider than ``width``, the later ones indented; never broken at a
    hyphen (substrate names have them). ``break_words=False`` keeps a word longer than the
    line (a path) whole, on a line of its own."""
    return textwrap.wrap(
        note,
        width=width,
        subsequent_indent="    ",
        break_on_hyphens=False,
        break_long_words=break_words,
    )
