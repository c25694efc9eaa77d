"""Creates paced to a provider's published limit (``max_creates_per_s``), so a burst above
it measures the sandboxes, not the provider's limiter.

One :class:`CreatePacer` per substrate object: every thread that creates a sandbox calls
:meth:`CreatePacer.wait` first, and the creates start at most ``max_creates_per_s`` apart.
The wait happens before the cold start's clock runs (a paced create is not slower, it is
later); a refused create is :class:`~pytest_rollout_tax.errors.RateLimited`.
"""

from __future__ import annotations

import threading
import time


class CreatePacer:
    """Spaces the starts of creates ``1 / max_creates_per_s`` seconds apart, across threads.

    ``None`` or ``0`` turns pacing off: :meth:`wait` returns at once.
    """

    def __init__(self, max_creates_per_s: float | None) -> None:
        if max_creates_per_s is not None and max_creates_per_s < 0:
            raise ValueError(f"max_creates_per_s={max_creates_per_s}: must be >= 0 (0: no pacing)")
        self.max_creates_per_s = max_creates_per_s or None
        self._interval = 1.0 / max_creates_per_s if max_creates_per_s else 0.0
        self._lock = threading.Lock()
        self._next = 0.0

    def wait(self) -> float:
        """Block until the next create may start; return the seconds waited."""
        if not self._interval:
            return 0.0
        with self._lock:  # reserve a slot, then sleep outside the lock
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self._interval
        delay = slot - now
        if delay > 0:
            time.sleep(delay)
        return delay
