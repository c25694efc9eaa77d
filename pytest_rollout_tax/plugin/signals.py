"""SIGTERM during a measured session: a KeyboardInterrupt, so fixtures tear their sandboxes
down and the summary still prints. Installed only while the plugin is active, chained to the
handler it found (which runs first, and is restored after), and passed on as if it were not
there in a forked child, which inherits Python's handlers.

A child forked by ``os.fork`` (multiprocessing) gets the handler found back before it runs any
Python. SIGTERM is blocked across the fork and unblocked after: Python drops a signal that
reaches a child before its interpreter has reset after the fork, so a child terminated at once
(``Process.start(); Process.terminate()``) would otherwise live on."""

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
        #: The signal mask before a fork blocked SIGTERM (None: no fork under way).
        self._mask: set[int | signal.Signals] | None = None
        self._fork_hooks = False

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
        if not self._fork_hooks:
            os.register_at_fork(
                before=self._before_fork,
                after_in_parent=self._after_fork_in_parent,
                after_in_child=self._after_fork_in_child,
            )
            self._fork_hooks = True

    def restore(self) -> None:
        """Put back the handler found at :meth:`install` (unless another replaced ours)."""
        if not self.active:
            return
        self.active = False
        if signal.getsignal(signal.SIGTERM) == self.handle:
            signal.signal(signal.SIGTERM, _settable(self.previous))

    def _before_fork(self) -> None:
        if self.active and os.getpid() == self.pid:
            self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def _after_fork_in_parent(self) -> None:
        if self._mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
            self._mask = None

    def _after_fork_in_child(self) -> None:
        """The handler found at install, then the mask: a pending SIGTERM meets that handler."""
        if self._mask is None:
            return
        self.active = False
        if signal.getsignal(signal.SIGTERM) == self.handle:
            signal.signal(signal.SIGTERM, _settable(self.previous))
        signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
        self._mask = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The previous handler first; then, unless SIGTERM was ignored, an interrupt."""
        __tracebackhide__ = True
        previous = self.previous
        if os.getpid() != self.pid:  # a child forked outside os.fork: as if we were not there
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
