"""The e2b substrate against the real E2B service: the contract of test_e2b.py, live.

Runs only when ``E2B_API_KEY`` is set (and spends sandbox-seconds on that account); the SDK's
own ``E2B_DOMAIN`` applies. ``E2B_LIVE_TEMPLATE`` picks another template than ``base``.
Reap here only ever touches this run's own sessions, never the account's other sandboxes.
"""

from __future__ import annotations

import os

import pytest
from test_e2b import TestSandboxContract as SandboxContract

from pytest_rollout_tax.substrates.e2b import E2BSubstrate

pytestmark = pytest.mark.skipif(
    not os.environ.get("E2B_API_KEY", "").strip(),
    reason="E2B_API_KEY is not set: the live E2B tests need a real account's API key",
)


@pytest.fixture
def e2b_factory():
    """Make an e2b substrate on the real service (options as keywords)."""
    template = os.environ.get("E2B_LIVE_TEMPLATE", "base")

    def make(**options) -> E2BSubstrate:
        return E2BSubstrate(**{"template": template, "timeout": 120, **options})

    return make


@pytest.fixture
def e2b_substrate(e2b_factory) -> E2BSubstrate:
    return e2b_factory()


class TestLiveSandboxContract(SandboxContract):
    """Every contract test of the stand-in, against the real service."""
