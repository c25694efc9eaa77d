"""SIGTERM during a measured session: a KeyboardInterrupt, so fixtures tear their sandboxes
down and the summary still prints. Installed only while the plugin is active, chained to the
handler it found (which runs first, and is restored after), and passed on as if it were not
there in a forked child (which inherits Python's handlers: one replaced at fork would lose a
SIGTERM that arrived before the replacement)."""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Any


class SigtermChain:
    """Our SIGTERM handler in front of the one already installed."""

    def __init__(self) -> None:
        #: The handler found at :meth:`install` (None: not installed from Python).
        self.previous: Any = None
        self.active = False
        #: The process that installed it: a forked child passes the signal on instead.
        self.pid = os.getpid()

    def install(self) -> None:
        """Handle SIGTERM from now on; nothing outside the main thread (signal's rule)."""
        if self.active:
            return
        try:
            self.previous = signal.signal(signal.SIGTERM, self.handle)
        except ValueError:  # not the main thread
            return
        self.active = True
        self.pid = os.getpid()

    def restore(self) -> None:
        """Put back the handler found at :meth:`install` (unless another replaced ours)."""
        if not self.active:
            return
        self.active = False
        if signal.getsignal(signal.SIGTERM) == self.handle:
            signal.signal(signal.SIGTERM, _settable(self.previous))

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The previous handler first; then, unless SIGTERM was ignored, an interrupt."""
        __tracebackhide__ = True
        previous = self.previous
        if os.getpid() != self.pid:  # a forked child (multiprocessing): as if we were not there
            signal.signal(signal.SIGTERM, _settable(previous))
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                os.kill(os.getpid(), signum)  # the default: end by SIGTERM
            return
        if previous == signal.SIG_IGN:
            return
        if callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt(f"signal {signum}")


def _settable(handler: Any) -> Any:
    """A handler ``signal.signal`` takes: one installed outside Python is the default."""
    return signal.SIG_DFL if handler is None else handler
