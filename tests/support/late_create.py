"""A create cancelled between its request and its answer, for the late-create tests: the
stand-in holds the answer back once its sandbox exists, and a cancel is raised into the
waiting (main) thread then, as Ctrl-C or a cancelled task would."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType


class Cancelled(BaseException):
    """The cancel raised into the thread waiting for a create's answer."""


@contextlib.contextmanager
def cancelled_once(made: Callable[[], bool], *, within_s: float = 30.0) -> Iterator[None]:
    """Raise :class:`Cancelled` in the main thread as soon as ``made()`` holds (the provider
    made the sandbox; its create is not answered yet)."""

    def cancel(signum: int, frame: FrameType | None) -> None:
        raise Cancelled("cancelled between the create's request and its answer")

    stop = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + within_s
        while not stop.wait(0.05) and time.monotonic() < deadline:
            if made():
                os.kill(os.getpid(), signal.SIGUSR1)
                return

    previous = signal.signal(signal.SIGUSR1, cancel)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        signal.signal(signal.SIGUSR1, previous)
