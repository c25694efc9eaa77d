"""A claim-mode SandboxWarmPool's figures in the form of a ``pool=K`` warm pool's (PoolStats).

For the pool the tool made (``template_from = "pod"``), one background watch on the namespace's
Sandboxes follows the pool's own ones (those whose controlling owner is the pool): each sits
idle from its ``Ready`` until the controller hands it to a claim (its owner becomes the claim)
or until the pool is deleted at session end; its creation is the time from its appearing to its
``Ready``, as the client watched them. Claims count as hits when the controller launched them
``warm`` and as misses otherwise. The user's own pool is not followed: its idle time is not the
tool's to count (``made_by_tool`` False), only its claims are.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from ...core.pool_stats import PoolStats
from .agent_sandbox import POOL, SANDBOX, Objects, condition

#: Seconds of one watch request; the watch is renewed from its last version after each.
WATCH_WINDOW_S = 5.0


class PoolIdle:
    """The claims, idle sandbox-seconds and creations of one SandboxWarmPool, as PoolStats."""

    def __init__(
        self,
        pool: str,
        size: int,
        *,
        made_by_tool: bool,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.pool = pool
        self.stats = PoolStats(size=size, made_by_tool=made_by_tool)
        self._clock = clock
        self._lock = threading.Lock()
        #: The pool's sandboxes not yet claimed: when each appeared, and when it turned Ready.
        self._appeared: dict[str, float] = {}
        self._ready: dict[str, float] = {}
        self._closed = threading.Event()

    def follow(self, objects: Objects, resource_version: str) -> None:
        """Watch the pool's sandboxes from ``resource_version`` (the pool's creation) on, in a
        daemon thread, until :meth:`close`."""
        thread = threading.Thread(
            target=self._follow,
            args=(objects, resource_version),
            name=f"rollout-tax-pool-idle-{self.pool}",
            daemon=True,
        )
        thread.start()

    def _follow(self, objects: Objects, version: str) -> None:
        while not self._closed.is_set():
            try:
                with contextlib.closing(
                    objects.watch(SANDBOX, "", version, WATCH_WINDOW_S)
                ) as events:
                    for kind, obj in events:
                        if self._closed.is_set():
                            return
                        if kind == "ERROR":  # 410 Gone: from now on (a re-list as ADDED)
                            version = ""
                            break
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        self.see(kind, obj)
            except Exception:  # never a traceback from a figure's thread
                if self._closed.wait(0.2):
                    return

    def see(self, kind: str, sandbox: dict[str, Any]) -> None:
        """One watch event of a Sandbox: the pool's appearing, turning Ready, claimed, gone."""
        meta = sandbox.get("metadata") or {}
        name = meta.get("name") or ""
        now = self._clock()
        with self._lock:
            if self._closed.is_set():
                return
            if kind in ("ADDED", "MODIFIED") and self._owned(meta):
                self._appeared.setdefault(name, now)
                ready = (condition(sandbox) or {}).get("status") == "True"
                if ready and name not in self._ready:
                    self._ready[name] = now
                    self.stats.creation_s.append(now - self._appeared[name])
            elif kind in ("ADDED", "MODIFIED", "DELETED"):  # claimed (another owner), or gone
                self._appeared.pop(name, None)
                if name in self._ready:
                    self.stats.idle_sandbox_s += max(0.0, now - self._ready.pop(name))

    def _owned(self, meta: dict[str, Any]) -> bool:
        return any(
            ref.get("controller") and ref.get("kind") == POOL.kind and ref.get("name") == self.pool
            for ref in meta.get("ownerReferences") or []
        )

    def claimed(self, launch_type: str | None) -> None:
        """A claim the controller launched ``warm`` (a hit) or otherwise (a miss)."""
        with self._lock:
            self.stats.hits += launch_type == "warm"
            self.stats.misses += launch_type != "warm"

    def close(self) -> PoolStats:
        """Stop following; the sandboxes still idle count until now (the pool's deletion)."""
        now = self._clock()
        with self._lock:
            self._closed.set()
            for ready_at in self._ready.values():
                self.stats.idle_sandbox_s += max(0.0, now - ready_at)
            self._ready.clear()
        return self.stats
