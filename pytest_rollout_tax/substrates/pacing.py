"""Creates paced to a provider's published rate limit (``max_creates_per_s``)."""

from __future__ import annotations

import threading
import time


class CreatePacer:
    """Spaces calls to :meth:`wait` at least ``1 / max_creates_per_s`` seconds apart, across
    threads; ``None`` does not pace."""

    def __init__(self, max_creates_per_s: float | None) -> None:
        if max_creates_per_s is not None and max_creates_per_s <= 0:
            raise ValueError(f"max_creates_per_s={max_creates_per_s}: must be > 0 (or none)")
        self.interval = 1.0 / max_creates_per_s if max_creates_per_s else 0.0
        self._lock = threading.Lock()
        self._next = 0.0

    def wait(self) -> None:
        """Return once this create may go out."""
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)
