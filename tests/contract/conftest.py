"""The contract suite: one set of cases, run on every substrate (tests/support/substrates.py).

``box`` is one sandbox per substrate shared by a module's tests, each working in its own
directory (``space``); ``fresh_box`` is a sandbox of the test's own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from support.substrates import LIVE, STAND_INS, live_skip_reason, open_substrate, transport_of

from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.substrate import Substrate

#: The default timeout of every step in the suite: nothing here may hang a CI run.
STEP_TIMEOUT = 60.0


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every stand-in and live variant; ``@pytest.mark.transport("session")`` keeps the
    variants of that transport (the live ones use ``exec``)."""
    if "contract_substrate" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("transport")
    if only is not None:
        names = [name for name in STAND_INS if transport_of(name) == only.args[0]]
        metafunc.parametrize("contract_substrate", names, indirect=True, scope="module")
        return
    live = []
    for name in LIVE:
        reason = live_skip_reason(name)
        live.append(pytest.param(name, marks=pytest.mark.skip(reason=reason) if reason else ()))
    metafunc.parametrize("contract_substrate", [*STAND_INS, *live], indirect=True, scope="module")


@pytest.fixture(scope="module")
def contract_substrate(request: pytest.FixtureRequest) -> Iterator[Substrate]:
    with open_substrate(request.param, request) as substrate:
        yield substrate


@pytest.fixture(scope="module")
def box(contract_substrate: Substrate) -> Iterator[Sandbox]:
    with contract_substrate.start(timeout=STEP_TIMEOUT) as sandbox:
        yield sandbox


@pytest.fixture
def fresh_box(contract_substrate: Substrate) -> Iterator[Sandbox]:
    with contract_substrate.start(timeout=STEP_TIMEOUT) as sandbox:
        yield sandbox


@pytest.fixture
def space(box: Sandbox) -> str:
    """A directory of this test's own in the shared sandbox (relative to its workdir)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    assert box.exec(["mkdir", name]).ok
    return name
