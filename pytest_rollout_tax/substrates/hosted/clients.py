"""Connection reuse: one shared SDK client, or a client (and a connection) per rollout.

A public leaderboard's record-low cold starts reuse one warm connection, so connection setup
never appears in them. A hosted substrate states which it does (``connection``: the row of
the report that says it): ``per-rollout`` (each rollout's client connects, paid in its cold
start, as a fresh worker's would) or ``reused``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

PER_ROLLOUT = "per-rollout"
REUSED = "reused"


class Clients:
    """The shared client (made on first use) and the per-rollout ones, closed when released."""

    def __init__(
        self, connect: Callable[[], Any], disconnect: Callable[[Any], None], *, reuse: bool
    ) -> None:
        self._connect = connect
        self._disconnect = disconnect
        self.reuse = reuse
        self._lock = threading.Lock()
        self._shared: Any = None

    @property
    def shared(self) -> Any:
        """The substrate's own client: for listing, reaping, and every rollout if reused."""
        with self._lock:
            if self._shared is None:
                self._shared = self._connect()
            return self._shared

    def for_rollout(self) -> Any:
        """A new client, or the shared one when connections are reused."""
        return self.shared if self.reuse else self._connect()

    def release(self, client: Any) -> None:
        """Close a rollout's own client (never the shared one); a failure to close is moot."""
        if client is not None and client is not self._shared:
            with contextlib.suppress(Exception):
                self._disconnect(client)

    def close(self) -> None:
        with self._lock:
            client, self._shared = self._shared, None
        if client is not None:
            with contextlib.suppress(Exception):
                self._disconnect(client)
