"""A stand-in's create answered late, on demand: the sandbox is made, its answer held.

A test arms a :class:`HeldAnswer` on a stand-in; the stand-in's next create then makes the
sandbox (``made`` is set) and holds its answer until the test releases it, as a provider whose
answer outlives the client's timeout does. With ``interrupt=True`` the main thread gets a
SIGINT (a Ctrl-C) while the answer is held: a create cancelled between request and answer.
With ``before=True`` the create itself waits for the release (a provider that makes the sandbox
only after the client has given up).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator

#: Seconds a held answer waits for its release at most (a test that forgot it does not hang).
HOLD_LIMIT_S = 60.0


class HeldAnswer:
    """Holds the answer of a stand-in's next create (or of every create while armed)."""

    def __init__(self) -> None:
        self.armed = False
        self.before = False
        self.interrupt = False
        #: Set once a held create has made its sandbox.
        self.made = threading.Event()
        self.release = threading.Event()

    def arm(self, *, before: bool = False, interrupt: bool = False) -> HeldAnswer:
        self.made.clear()
        self.release.clear()
        self.armed, self.before, self.interrupt = True, before, interrupt
        return self

    def disarm(self) -> None:
        self.armed = False
        self.release.set()

    def hold_before(self) -> None:
        """Where a create begins: wait for the release if armed with ``before``."""
        if self.armed and self.before:
            self.release.wait(HOLD_LIMIT_S)

    def hold_after(self) -> None:
        """Where a create has made its sandbox: hold its answer if armed."""
        if not self.armed:
            return
        self.made.set()
        if self.interrupt:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        if not self.before:
            self.release.wait(HOLD_LIMIT_S)

    async def hold_before_async(self) -> None:
        if self.armed and self.before:
            await asyncio.get_running_loop().run_in_executor(None, self.hold_before)

    async def hold_after_async(self) -> None:
        if self.armed:
            await asyncio.get_running_loop().run_in_executor(None, self.hold_after)


@contextlib.contextmanager
def keyboard_interrupts() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread while inside (whatever handler the
    test runner installed); the handler before is restored after."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
