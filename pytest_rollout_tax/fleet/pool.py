"""Warm pools (``pool=K`` on any substrate): K sandboxes kept started in the background.

A rollout claims a started sandbox and a refill starts at once. The claim is the rollout's
cold start, phase ``claim``: from the request until the claimed sandbox's first no-op exec
returns. The pooled sandboxes' own creations are recorded apart, as pool creations, and the
time they sit started and unclaimed is the pool's idle cost. A pooled sandbox is never reused:
each one serves one rollout and is destroyed after it (or at session end, unclaimed).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.pool_stats import PoolStats
from ..core.record import Rollout
from ..core.sandbox import Sandbox
from ..errors import RolloutTaxError, SandboxStartError, reason_of

if TYPE_CHECKING:
    from ..core.substrate import Substrate


@dataclass
class _Slot:
    """A pool creation's outcome: a started sandbox (and when it became ready), or its error."""

    sandbox: Sandbox | None = None
    ready_at: float = 0.0
    error: RolloutTaxError | None = None


class WarmPool:
    """K sandboxes of one substrate kept started by background threads; each claimed once."""

    def __init__(self, substrate: Substrate, size: int) -> None:
        if size < 1:
            raise ValueError(f"a warm pool holds at least 1 sandbox, not {size}")
        self.substrate = substrate
        self.stats = PoolStats(size=size)
        self._ready: queue.Queue[_Slot] = queue.Queue()
        self._lock = threading.Lock()
        self._creators: set[threading.Thread] = set()
        self._filled = False
        self._closed = False

    def fill(self) -> None:
        """Start the first K creations (once); claims refill from then on."""
        with self._lock:
            if self._filled or self._closed:
                return
            self._filled = True
            for _ in range(self.stats.size):
                self._refill()

    def claim(self, rollout: Rollout, *, timeout: float | None = None) -> Sandbox:
        """A fresh started sandbox for ``rollout``; its cold start is the claim (phase ``claim``).

        Waits for a creation under way when none is ready (a miss). A pooled sandbox that
        failed to start fails the claim with its reason.
        """
        requested = time.perf_counter()
        rollout.stamp("create")
        self.fill()
        with self._lock:
            if self._closed:
                raise SandboxStartError(f"{self.substrate.name}: the warm pool is closed")
            hit = not self._ready.empty()
            self.stats.hits += hit
            self.stats.misses += not hit
            self._refill()
        slot = self._ready.get()
        if slot.sandbox is None:
            raise SandboxStartError(f"pooled sandbox failed to start: {slot.error}")
        with self._lock:
            self.stats.idle_sandbox_s += max(0.0, time.perf_counter() - slot.ready_at)
        return self.substrate.claim(slot.sandbox, rollout, timeout=timeout, requested=requested)

    def close(self) -> None:
        """Stop refilling, wait for creations under way, destroy every unclaimed sandbox."""
        with self._lock:
            self._closed = True
            creators = list(self._creators)
        for creator in creators:
            creator.join()
        while True:
            try:
                slot = self._ready.get_nowait()
            except queue.Empty:
                break
            if slot.sandbox is not None:
                self.stats.idle_sandbox_s += max(0.0, time.perf_counter() - slot.ready_at)
                with contextlib.suppress(Exception):  # reap_session is the backstop
                    slot.sandbox.close()

    # -- the background --------------------------------------------------------------------

    def _refill(self) -> None:
        """Start one creation in the background (the caller holds the lock)."""
        creator = threading.Thread(
            target=self._create, name=f"rollout-tax-pool-{self.substrate.name}", daemon=True
        )
        self._creators.add(creator)
        creator.start()

    def _create(self) -> None:
        record = Rollout(substrate=self.substrate.name)
        try:
            sandbox = self.substrate.start(record)
        except RolloutTaxError as exc:
            slot = _Slot(error=exc)
        except Exception as exc:  # a backend bug: still one readable reason, never a hang
            slot = _Slot(error=SandboxStartError(f"{type(exc).__name__}: {exc}"))
        else:
            slot = _Slot(sandbox=sandbox, ready_at=time.perf_counter())
        with self._lock:
            self._creators.discard(threading.current_thread())
            if slot.error is None:  # a sandbox was made
                self.stats.creation_s.append(record.cold_start_s or 0.0)
            else:
                self.stats.failure_reasons[reason_of(slot.error)] += 1
            self._ready.put(slot)
