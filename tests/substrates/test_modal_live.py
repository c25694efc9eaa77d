"""The modal-specific tests of test_modal.py against the real Modal service; the generic
contract runs there too, as tests/contract/'s ``modal-live`` variant.

Runs only when ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` are set (and spends sandbox-seconds
on that workspace). The options come from tests/support/live.py (``live.modal_options()``):
``MODAL_LIVE_IMAGE`` picks another registry image. Reap here only ever touches this run's own
sessions, never the workspace's other sandboxes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support import live
from test_modal import ModalBehaviour

from pytest_rollout_tax.substrates.modal import ModalSubstrate

OPTIONS = live.modal_options()
pytestmark = [pytest.mark.skip(reason=OPTIONS)] if isinstance(OPTIONS, str) else []


@pytest.fixture
def modal_factory() -> Iterator[Callable[..., ModalSubstrate]]:
    """Make a modal substrate on the real service (options as keywords); reaped after."""
    made: list[ModalSubstrate] = []

    def make(**options: object) -> ModalSubstrate:
        made.append(ModalSubstrate(**{**OPTIONS, **options}))
        return made[-1]

    yield make
    for substrate in made:
        substrate.reap(substrate.session_id)
        substrate.close()


@pytest.fixture
def modal_substrate(modal_factory: Callable[..., ModalSubstrate]) -> ModalSubstrate:
    return modal_factory()


class TestLive(ModalBehaviour):
    """Every modal-specific test of the stand-in, against the real service."""
