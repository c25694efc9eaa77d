"""Late creates: a create that timed out or was cancelled leaves no sandbox behind.

A provider may go on creating a sandbox after its client gave up: the create ran past its
budget (``NAME.create_timeout``), its answer was lost, or the rollout was cancelled (Ctrl-C,
a task cancelled) between the request and the answer. That sandbox has no handle; it is found
by its tag instead. The template (:meth:`Substrate.start <.substrate.Substrate.start>`) tags
every create with the labels it passes to the backend's ``_create`` (the session, and a
rollout id no other create shares), and the backend writes them on the sandbox at, or before,
its create request. This module is the one policy over the backend's two primitives,
``destroy(handle)`` and ``reap_tagged(labels)``:

1. The create runs bounded (:func:`.bounded.bounded`): past its budget it raises
   :class:`~..errors.CreateTimeout`, which the rollout records as budget ``create``.
2. A create that did not return a handle (past its budget, failed, or interrupted) is
   followed at once by ``reap_tagged(labels)``: what its request made so far is deleted.
3. An abandoned create is awaited in its own thread: the handle it returns late is destroyed
   and ``reap_tagged(labels)`` runs once more, so a sandbox the provider made after the first
   look is deleted too. :meth:`LateCreates.settle` waits for those cleanups (the session does,
   before its end-of-session reap).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from ..errors import CreateTimeout, RateLimited, SubstrateUnavailable
from .bounded import Overrun, bounded

log = logging.getLogger(__name__)

H = TypeVar("H")
H_contra = TypeVar("H_contra", contravariant=True)
#: Failures that sent no create (no client, no credentials) or that the provider refused
#: outright (its rate limiter): nothing can have been made, so nothing is looked up.
NOTHING_MADE = (SubstrateUnavailable, RateLimited)


class Tagging(Protocol[H_contra]):
    """What the policy needs of a substrate: its name and its two cleanup primitives."""

    name: str

    def destroy(self, handle: H_contra) -> None:
        """Delete the environment and return once it is gone."""

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Delete every sandbox carrying ``labels``; return how many."""


class LateCreates:
    """The creates of one substrate that were abandoned, until their cleanup has run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: set[threading.Event] = set()
        #: Sandboxes removed after their create was abandoned (by tag, or by a late handle).
        self.reaped = 0

    def create(
        self,
        substrate: Tagging[H],
        make: Callable[[], H],
        labels: Mapping[str, str],
        budget: float | None,
    ) -> H:
        """``make()`` (the backend's create of a sandbox tagged ``labels``) within ``budget``
        seconds; whatever a create that returns no handle made is deleted, now and when the
        abandoned request ends."""
        cleaned = threading.Event()

        def abandoning() -> None:
            with self._lock:
                self._pending.add(cleaned)

        def late(handle: H | None) -> None:
            try:
                if handle is not None:
                    self._count(substrate, lambda: _destroyed(substrate, handle))
                self._count(substrate, lambda: substrate.reap_tagged(labels))
            finally:
                with self._lock:
                    self._pending.discard(cleaned)
                cleaned.set()

        try:
            return bounded(
                make,
                budget,
                late=late,
                abandoning=abandoning,
                name=f"rollout-tax-create-{substrate.name}",
            )
        except Overrun:
            self._count(substrate, lambda: substrate.reap_tagged(labels))
            raise CreateTimeout(
                f"{substrate.name}: create ran past its {budget:g} s budget "
                f"({substrate.name}.create_timeout); what it made is deleted"
            ) from None
        except NOTHING_MADE:
            raise
        except BaseException:  # failed, or interrupted between the request and the answer
            self._count(substrate, lambda: substrate.reap_tagged(labels))
            raise

    def settle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the cleanups of abandoned creates; whether none
        is left running."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                pending = next(iter(self._pending), None)
            if pending is None:
                return True
            if not pending.wait(max(0.0, deadline - time.monotonic())):
                return False

    @property
    def pending(self) -> int:
        """How many abandoned creates have not been cleaned up yet."""
        with self._lock:
            return len(self._pending)

    def _count(self, substrate: Tagging[H], cleanup: Callable[[], int]) -> None:
        """Run one cleanup and count what it removed; a failure is logged, never raised (the
        create's own error is the one reported; the session's reap is the backstop)."""
        try:
            removed = cleanup()
        except Exception as exc:
            log.warning("rollout-tax: %s: removing a late create failed: %s", substrate.name, exc)
            return
        with self._lock:
            self.reaped += removed


def _destroyed(substrate: Tagging[H], handle: H) -> int:
    """Destroy the sandbox of a handle that came too late: one removed."""
    substrate.destroy(handle)
    return 1
