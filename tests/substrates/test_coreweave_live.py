"""The coreweave-specific tests of test_coreweave.py against the real CoreWeave Sandboxes
service; the generic contract runs there too, as tests/contract/'s ``coreweave-live`` variant.

Runs only when ``CWSANDBOX_API_KEY`` is set (and spends sandbox-seconds on that organization).
The options come from tests/support/live.py (``live.coreweave_options()``):
``CWSANDBOX_LIVE_IMAGE`` picks another registry image. Reap here only ever touches this run's
own sessions, never the organization's other sandboxes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support import live
from test_coreweave import CoreWeaveBehaviour

from pytest_rollout_tax.substrates.coreweave import CoreWeaveSubstrate

OPTIONS = live.coreweave_options()
pytestmark = [pytest.mark.skip(reason=OPTIONS)] if isinstance(OPTIONS, str) else []


@pytest.fixture
def coreweave_factory() -> Iterator[Callable[..., CoreWeaveSubstrate]]:
    """Make a coreweave substrate on the real service (options as keywords); reaped after."""
    made: list[CoreWeaveSubstrate] = []

    def make(**options: object) -> CoreWeaveSubstrate:
        made.append(CoreWeaveSubstrate(**{**OPTIONS, **options}))
        return made[-1]

    yield make
    for substrate in made:
        substrate.reap(substrate.session_id)
        substrate.close()


@pytest.fixture
def coreweave_substrate(
    coreweave_factory: Callable[..., CoreWeaveSubstrate],
) -> CoreWeaveSubstrate:
    return coreweave_factory()


class TestLive(CoreWeaveBehaviour):
    """Every coreweave-specific test of the stand-in, against the real service."""
