"""core/bounded.py: work awaited within a budget, abandoned to ``late`` past it."""

from __future__ import annotations

import threading

import pytest
from support.late_answer import keyboard_interrupts

from pytest_rollout_tax.core.bounded import Overrun, bounded


def test_work_that_ends_in_time_returns_its_value_and_never_reaches_late():
    lates: list[object] = []
    assert bounded(lambda: 42, 10, late=lates.append) == 42
    assert lates == []


def test_work_that_raises_in_time_raises_its_own_error():
    def work() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        bounded(work, 10, late=lambda _: pytest.fail("not abandoned"))


def test_work_past_its_budget_is_abandoned_and_its_late_value_handed_to_late():
    release, lated = threading.Event(), threading.Event()
    lates: list[object] = []

    def work() -> str:
        release.wait(30)
        return "handle"

    def late(value: object) -> None:
        lates.append(value)
        lated.set()

    with pytest.raises(Overrun, match=r"0\.05 s"):
        bounded(work, 0.05, late=late)
    assert lates == []  # not yet: the work still runs
    release.set()
    assert lated.wait(30)
    assert lates == ["handle"]


def test_abandoned_work_that_then_fails_hands_late_none():
    release, lated = threading.Event(), threading.Event()
    lates: list[object] = []

    def work() -> str:
        release.wait(30)
        raise OSError("connection reset")

    with pytest.raises(Overrun):
        bounded(work, 0.05, late=lambda value: (lates.append(value), lated.set()))
    release.set()
    assert lated.wait(30)
    assert lates == [None]


def test_an_interrupted_wait_abandons_the_work_and_raises_the_interrupt():
    started, release, lated = threading.Event(), threading.Event(), threading.Event()
    lates: list[object] = []
    abandoned: list[bool] = []

    def work() -> str:
        started.set()
        signal_main()
        release.wait(30)
        return "late handle"

    def signal_main() -> None:
        import signal

        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    with keyboard_interrupts(), pytest.raises(KeyboardInterrupt):
        bounded(
            work,
            None,
            late=lambda value: (lates.append(value), lated.set()),
            abandoning=lambda: abandoned.append(True),
        )
    assert abandoned == [True]
    release.set()
    assert lated.wait(30)
    assert lates == ["late handle"]


def test_the_work_sees_the_callers_context_variables():
    import contextvars

    flag = contextvars.ContextVar("flag", default="unset")
    flag.set("caller's")
    assert bounded(flag.get, 10, late=lambda _: None) == "caller's"
