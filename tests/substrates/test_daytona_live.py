"""The daytona-specific tests of test_daytona.py against the real Daytona service; the generic
contract runs there too, as tests/contract/'s ``daytona-live`` variant.

Runs only when ``DAYTONA_API_KEY`` is set (and spends sandbox-seconds on that account); the
SDK's own ``DAYTONA_API_URL`` and ``DAYTONA_TARGET`` apply. The options come from
tests/support/live.py (``live.daytona_options()``): ``DAYTONA_LIVE_SNAPSHOT`` picks another
snapshot than the organisation's default. Reap here only ever touches this run's own sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support import live
from test_daytona import DaytonaBehaviour

from pytest_rollout_tax.substrates.daytona import DaytonaSubstrate

OPTIONS = live.daytona_options()
pytestmark = [pytest.mark.skip(reason=OPTIONS)] if isinstance(OPTIONS, str) else []


@pytest.fixture
def daytona_factory() -> Callable[..., DaytonaSubstrate]:
    """Make a daytona substrate on the real service (options as keywords)."""

    def make(**options: object) -> DaytonaSubstrate:
        return DaytonaSubstrate(**{**OPTIONS, **options})

    return make


@pytest.fixture
def daytona_substrate(
    daytona_factory: Callable[..., DaytonaSubstrate],
) -> Iterator[DaytonaSubstrate]:
    substrate = daytona_factory()
    yield substrate
    substrate.reap(substrate.session_id)


class TestLive(DaytonaBehaviour):
    """Every daytona-specific test of the stand-in, against the real service."""
