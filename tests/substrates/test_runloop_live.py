"""The runloop-specific tests of test_runloop.py against the real Runloop service; the generic
contract runs there too, as tests/contract/'s ``runloop-live`` variant.

Runs only when ``RUNLOOP_API_KEY`` is set (and spends devbox-seconds on that account); the
SDK's own ``RUNLOOP_BASE_URL`` applies. The options come from tests/support/live.py
(``live.runloop_options()``): ``RUNLOOP_LIVE_BLUEPRINT`` picks a blueprint by name. Reap here
only ever touches this run's own sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support import live
from test_runloop import RunloopBehaviour

from pytest_rollout_tax.substrates.runloop import RunloopSubstrate

OPTIONS = live.runloop_options()
pytestmark = [pytest.mark.skip(reason=OPTIONS)] if isinstance(OPTIONS, str) else []


@pytest.fixture
def runloop_factory() -> Callable[..., RunloopSubstrate]:
    """Make a runloop substrate on the real service (options as keywords)."""

    def make(**options: object) -> RunloopSubstrate:
        return RunloopSubstrate(**{**OPTIONS, **options})

    return make


@pytest.fixture
def runloop_substrate(
    runloop_factory: Callable[..., RunloopSubstrate],
) -> Iterator[RunloopSubstrate]:
    substrate = runloop_factory()
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


class TestLive(RunloopBehaviour):
    """Every runloop-specific test of the stand-in, against the real service."""
