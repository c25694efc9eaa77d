"""The prime-specific tests of test_prime.py against the real Prime Intellect service; the
generic contract runs there too, as tests/contract/'s ``prime-live`` variant.

Runs only when ``PRIME_API_KEY`` is set (and spends sandbox-seconds on that account); the SDK's
own ``PRIME_API_BASE_URL`` and ``PRIME_TEAM_ID`` apply. The options come from
tests/support/live.py (``live.prime_options()``): ``PRIME_LIVE_IMAGE`` picks another image than
``python:3.11-slim``. Reap here only ever touches this run's own sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support import live

pytest.importorskip("prime_sandboxes", reason="the prime extra (scripts/ensure-prime)")

from test_prime import PrimeBehaviour

from pytest_rollout_tax.substrates.prime import PrimeSubstrate

OPTIONS = live.prime_options()
pytestmark = [pytest.mark.skip(reason=OPTIONS)] if isinstance(OPTIONS, str) else []


@pytest.fixture
def prime_factory() -> Callable[..., PrimeSubstrate]:
    """Make a prime substrate on the real service (options as keywords)."""

    def make(**options: object) -> PrimeSubstrate:
        assert not isinstance(OPTIONS, str)
        return PrimeSubstrate(**{**OPTIONS, **options})

    return make


@pytest.fixture
def prime_substrate(prime_factory: Callable[..., PrimeSubstrate]) -> Iterator[PrimeSubstrate]:
    substrate = prime_factory()
    yield substrate
    substrate.reap(substrate.session_id)


class TestPrimeLive(PrimeBehaviour):
    """Labels, the empty workdir and reap by session, on the real service."""
