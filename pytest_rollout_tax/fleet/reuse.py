"""Reset and reuse (``reuse="reset"`` on a substrate that can reset a sandbox): a rollout gets
a sandbox an earlier rollout used, reset to the clean image.

A rollout's sandbox is not deleted when it ends: its transport is closed and the sandbox is
kept for the next rollout, which resets it (phase ``reset``: processes killed, writable layer
dropped, /tmp and the workdir emptied) as its cold start. With none kept, the rollout creates
one as usual. Under xdist each worker keeps its own; every kept sandbox is deleted when the
session ends, and one whose reset fails is deleted at once.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from ..core.record import Rollout
from ..core.sandbox import Handle, Sandbox

if TYPE_CHECKING:
    from ..core.substrate import Substrate


class Recycler:
    """The used sandboxes of one substrate, kept for the next rollout; the Owner of the
    sandboxes it hands out (closing one gives it back instead of deleting it)."""

    def __init__(self, substrate: Substrate) -> None:
        self.substrate = substrate
        self.name = substrate.name
        self._kept: list[Handle] = []
        self._lock = threading.Lock()
        self._closed = False
        #: How many rollouts got a used sandbox.
        self.reuses = 0

    def start(self, rollout: Rollout, *, timeout: float | None) -> Sandbox:
        """A used sandbox reset for ``rollout``, or a new one if none is kept."""
        with self._lock:
            handle = self._kept.pop() if self._kept else None
        if handle is None:
            sandbox = self.substrate.start(rollout, timeout=timeout)
        else:
            try:
                sandbox = self.substrate.reuse(handle, rollout, timeout=timeout)
            except BaseException:
                with contextlib.suppress(Exception):  # the reaper is the backstop
                    self.substrate.destroy(handle)
                raise
            self.reuses += 1
        sandbox.substrate = self
        return sandbox

    def destroy(self, handle: Handle) -> None:
        """Keep ``handle`` for the next rollout (the Owner's delete): its teardown is nothing;
        its reset is the next rollout's cold start. After :meth:`close`, delete it."""
        with self._lock:
            if not self._closed:
                self._kept.append(handle)
                return
        self.substrate.destroy(handle)

    def close(self) -> None:
        """Delete every kept sandbox; a sandbox closed from now on is deleted."""
        with self._lock:
            self._closed = True
            kept, self._kept = self._kept, []
        for handle in kept:
            with contextlib.suppress(Exception):  # the reaper is the backstop
                self.substrate.destroy(handle)
