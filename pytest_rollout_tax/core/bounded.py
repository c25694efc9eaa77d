"""Work awaited within a budget, abandoned (never left to leak) when the budget runs out."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import RolloutTaxError

T = TypeVar("T")


class Overrun(RolloutTaxError):
    """:func:`bounded`'s work did not end within its budget; it goes on, abandoned. Each
    caller turns it into its own budget's error (:class:`~..errors.BudgetExceeded`)."""


class _Call(Generic[T]):
    """One bounded call's result, handed over once between its thread and its caller."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None
        self.finished = False
        self.abandoned = False


def bounded(
    work: Callable[[], T],
    budget: float | None,
    *,
    late: Callable[[T | None], None],
    abandoning: Callable[[], None] = lambda: None,
    name: str = "rollout-tax-bounded",
) -> T:
    """``work()``, run in a thread of its own and awaited at most ``budget`` seconds (None:
    without bound), its result returned or its exception raised.

    When the wait ends first (:class:`Overrun`) or is interrupted (KeyboardInterrupt,
    SystemExit, any exception raised into the waiting thread), the work is abandoned, not
    stopped: ``late`` is called once with whatever it produced (its value, or None if it raised)
    as soon as it ends, whether that is already the case or later, in its thread. A create's
    ``late`` deletes what the create made; nothing an abandoned call makes is ever returned.
    ``abandoning`` is called, in the caller's thread, when the work is abandoned: always
    before ``late``.
    The thread is a daemon: a hung SDK call does not keep the process alive.
    """
    call: _Call[T] = _Call()

    def body() -> None:
        value: T | None = None
        error: BaseException | None = None
        try:
            value = work()
        except BaseException as exc:  # handed to the caller, or to ``late`` if abandoned
            error = exc
        with call.lock:
            call.value, call.error, call.finished = value, error, True
            abandoned = call.abandoned
            call.done.set()
        if abandoned:
            late(value)

    context = contextvars.copy_context()  # the work sees the caller's context variables
    thread = threading.Thread(target=context.run, args=(body,), name=name, daemon=True)
    try:
        thread.start()  # an interrupt may come as soon as the work has begun
        ended = call.done.wait(budget)
    except BaseException:
        if not _abandon(call, abandoning):  # it ended just now: what it made is still no one's
            late(call.value)
        raise
    if not ended and _abandon(call, abandoning):
        raise Overrun(f"{budget:g} s")
    if call.error is not None:
        raise call.error.with_traceback(call.error.__traceback__)
    return call.value  # type: ignore[return-value]  # set whenever no error was


def _abandon(call: _Call[T], abandoning: Callable[[], None]) -> bool:
    """Abandon ``call`` if it is still running (its thread then calls ``late``, after
    ``abandoning`` has run); whether it was. False: it had ended, its result is the caller's."""
    with call.lock:
        call.abandoned = not call.finished
        if call.abandoned:
            abandoning()
        return call.abandoned
