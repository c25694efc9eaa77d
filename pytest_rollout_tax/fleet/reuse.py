"""Reset and reuse (``reuse="reset"`` on a substrate that can reset a sandbox): a rollout gets
a sandbox an earlier rollout used, reset to the clean image.

A rollout's sandbox is not deleted when it ends: its transport is closed and the sandbox is
kept for the next rollout, which resets it (phase ``reset``: processes killed, writable layer
dropped, /tmp and the workdir emptied) as its cold start. With none kept, the rollout creates
one as usual. Where the substrate's reset spares a session's shell (docker's, reset from the
host), the session is kept open with the sandbox, so the next rollout does not open one again.
Under xdist each worker keeps its own; every kept sandbox is deleted when the session ends,
and one whose reset fails is deleted at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..core.record import Rollout
from ..core.sandbox import Handle, Sandbox
from ..core.transport import RawResult, Transport

if TYPE_CHECKING:
    from ..core.substrate import Substrate


class Recycler:
    """The used sandboxes of one substrate, kept for the next rollout; the Owner of the
    sandboxes it hands out (closing one gives it back instead of deleting it)."""

    def __init__(self, substrate: Substrate) -> None:
        self.substrate = substrate
        self.name = substrate.name
        self._kept: list[Handle] = []
        #: The open session of each kept sandbox whose reset spares it, by handle id.
        self._sessions: dict[str, Transport] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: How many rollouts got a used sandbox.
        self.reuses = 0

    def start(self, rollout: Rollout, *, timeout: float | None) -> Sandbox:
        """A used sandbox reset for ``rollout``, or a new one if none is kept."""
        with self._lock:
            handle = self._kept.pop() if self._kept else None
            kept = self._sessions.pop(handle.id, None) if handle is not None else None
        if handle is None:
            sandbox = self.substrate.start(rollout, timeout=timeout)
        else:
            try:
                sandbox = self.substrate.reuse(handle, rollout, timeout=timeout, kept=kept)
            except BaseException:
                with contextlib.suppress(Exception):  # the reaper is the backstop
                    if kept is not None:
                        kept.close()
                    self.substrate.destroy(handle)
                raise
            self.reuses += 1
        sandbox.substrate = self
        if self.substrate.keeps_session(sandbox.handle):
            sandbox.transport = _Kept(sandbox.transport, self, sandbox.handle)
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
            sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            with contextlib.suppress(Exception):
                session.close()
        for handle in kept:
            with contextlib.suppress(Exception):  # the reaper is the backstop
                self.substrate.destroy(handle)

    def keep_session(self, handle: Handle, session: Transport) -> None:
        """Keep ``session`` open with ``handle`` (closed at once after :meth:`close`)."""
        with self._lock:
            if not self._closed:
                self._sessions[handle.id] = session
                return
        session.close()


class _Kept(Transport):
    """A session kept open when its sandbox is kept: its close hands it to the recycler."""

    def __init__(self, inner: Transport, recycler: Recycler, handle: Handle) -> None:
        self.inner, self._recycler, self._handle = inner, recycler, handle
        self.name = inner.name  # type: ignore[misc]  # the name of what it wraps

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        return self.inner.run(argv, timeout=timeout, env=env, cwd=cwd)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        self.inner.write(path, data, timeout=timeout)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        return self.inner.read(path, timeout=timeout)

    def close(self) -> None:
        self._recycler.keep_session(self._handle, self.inner)
