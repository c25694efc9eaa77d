"""A live terminal line while cold starts take long: ``docker: 12/32 ready, p50 250ms, 1
starting for 2.4s``, shown after ``AFTER_S`` and erased as soon as no cold start is pending.

:class:`ColdStartProgress` keeps the counts and decides what to show from its clock;
:class:`TerminalLine` draws on a terminal, after whatever the current line already holds.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..text.units import seconds

#: A cold start pending this long (seconds) brings the line up.
AFTER_S = 2.0
#: How often (seconds) the line is redrawn while it is up.
INTERVAL_S = 0.25


class LiveLine(Protocol):
    def show(self, text: str) -> None: ...

    def clear(self) -> None: ...


@dataclass
class _Counts:
    expected: int = 0
    ready: list[float] = field(default_factory=list)
    #: Pending cold starts: token -> when it began (clock seconds).
    pending: dict[int, float] = field(default_factory=dict)


class ColdStartProgress:
    """Counts cold starts per substrate and shows the live line while one takes long.

    ``starting`` and ``finished`` may be called from any thread (a burst starts sandboxes in
    parallel); ``refresh`` draws. Without a ``line`` (a quiet or non-terminal session) it only
    counts.
    """

    def __init__(
        self,
        line: LiveLine | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        after_s: float = AFTER_S,
    ) -> None:
        self.line = line
        self.clock = clock
        self.after_s = after_s
        self._counts: dict[str, _Counts] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._shown: str | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def expect(self, substrate: str, count: int) -> None:
        """``count`` cold starts on ``substrate`` are planned this session (the N of ``n/N``)."""
        with self._lock:
            self._counts.setdefault(substrate, _Counts()).expected = count

    def starting(self, substrate: str) -> int:
        """A cold start on ``substrate`` begins; returns the token to pass to ``finished``."""
        with self._lock:
            token = next(self._tokens)
            self._counts.setdefault(substrate, _Counts()).pending[token] = self.clock()
        self._start_ticker()
        return token

    def finished(self, token: int, cold_start_s: float | None) -> None:
        """The cold start ``token`` is over: ready after ``cold_start_s``, or failed (None)."""
        with self._lock:
            for counts in self._counts.values():
                if counts.pending.pop(token, None) is not None and cold_start_s is not None:
                    counts.ready.append(cold_start_s)
        self.refresh()

    def text(self) -> str | None:
        """The line to show now, or None when no cold start has been pending ``after_s``."""
        with self._lock:
            return self._text(self.clock())

    def _text(self, now: float) -> str | None:
        oldest = {
            name: min(counts.pending.values())
            for name, counts in self._counts.items()
            if counts.pending
        }
        if not oldest:
            return None
        name = min(oldest, key=oldest.__getitem__)
        waited = now - oldest[name]
        if waited < self.after_s:
            return None
        counts = self._counts[name]
        ready = len(counts.ready)
        text = (
            f"{name}: {ready}/{counts.expected} ready"
            if counts.expected
            else f"{name}: {ready} ready"
        )
        if counts.ready:
            text += f", p50 {seconds(statistics.median(counts.ready))}"
        return text + f", {len(counts.pending)} starting for {seconds(waited)}"

    def refresh(self) -> None:
        """Show the line, redraw it, or erase it, as the counts and the clock say."""
        if self.line is None:
            return
        with self._lock:
            text = self._text(self.clock())
            if text == self._shown:
                return
            if text is None:
                self.line.clear()
            else:
                self.line.show(text)
            self._shown = text

    def close(self) -> None:
        """Stop redrawing and erase the line."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self._shown is not None and self.line is not None:
                self.line.clear()
            self._shown = None

    def _start_ticker(self) -> None:
        if self.line is None or self._ticker is not None:
            return
        with self._lock:
            if self._ticker is None:
                self._ticker = threading.Thread(
                    target=self._tick, name="rollout-tax-progress", daemon=True
                )
                self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.refresh()


class TerminalLine:
    """The live line drawn after the text of the terminal's current line, as pytest's own
    progress is: the cursor is saved and restored around it, wrapping is off while it is drawn
    (a line too long is cut at the edge), and erasing it leaves the current line as it was."""

    SAVE, RESTORE, ERASE = "\x1b7", "\x1b8", "\x1b[K"
    NO_WRAP, WRAP = "\x1b[?7l", "\x1b[?7h"

    def __init__(self, write: Callable[[str], None]) -> None:
        #: Writes to the terminal as it is, at once (and, under pytest, past output capture).
        self.write = write

    def show(self, text: str) -> None:
        self.write(f"{self.SAVE}{self.NO_WRAP} {text}{self.ERASE}{self.WRAP}{self.RESTORE}")

    def clear(self) -> None:
        self.write(self.ERASE)
