"""The e2b-specific tests of test_e2b.py against the real E2B service; the generic contract
runs there too, as tests/contract/'s ``e2b-live`` variant.

Runs only when ``E2B_API_KEY`` is set (and spends sandbox-seconds on that account); the SDK's
own ``E2B_DOMAIN`` applies. The options come from tests/support/live.py
(``live.e2b_options()``): ``E2B_LIVE_TEMPLATE`` picks another template than ``base``.
Reap here only ever touches this run's own sessions, never the account's other sandboxes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support import live
from test_e2b import E2BBehaviour

from pytest_rollout_tax.substrates.e2b import E2BSubstrate

OPTIONS = live.e2b_options()
pytestmark = [pytest.mark.skip(reason=OPTIONS)] if isinstance(OPTIONS, str) else []


@pytest.fixture
def e2b_factory() -> Callable[..., E2BSubstrate]:
    """Make an e2b substrate on the real service (options as keywords)."""

    def make(**options: object) -> E2BSubstrate:
        return E2BSubstrate(**{**OPTIONS, **options})

    return make


@pytest.fixture
def e2b_substrate(e2b_factory: Callable[..., E2BSubstrate]) -> E2BSubstrate:
    return e2b_factory()


class TestLive(E2BBehaviour):
    """Every e2b-specific test of the stand-in, against the real service."""
