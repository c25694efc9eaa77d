"""The hosted base (pytest_rollout_tax/substrates/hosted/) where no single provider's tests
show it, driven through the e2b substrate and its stand-in (tests/support/e2b_server.py)."""

from __future__ import annotations

import pytest
from support.e2b_server import FAULT_KEY, StandInE2B

from pytest_rollout_tax.core.substrate import SESSION_LABEL
from pytest_rollout_tax.errors import RateLimited, SandboxStartError
from pytest_rollout_tax.substrates.e2b import E2BSubstrate
from pytest_rollout_tax.substrates.hosted import HostedSubstrate


def _mine(e2b_env: StandInE2B, substrate: E2BSubstrate) -> list[str]:
    return [
        s.sandbox_id
        for s in e2b_env.sandboxes()
        if s.metadata.get(SESSION_LABEL) == substrate.session_id
    ]


def test_a_start_error_the_provider_code_raises_after_the_create_is_reaped_by_tag(
    e2b_env: StandInE2B, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider's own code failing once the SDK made the sandbox (a wait for a state, a
    check) leaves nothing: the base looks the create up by its tag."""
    original = E2BSubstrate._request

    def made_then_failed(self: E2BSubstrate, *args: object, **kwargs: object) -> object:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        raise SandboxStartError("e2b: the sandbox never reached RUNNING")

    monkeypatch.setattr(E2BSubstrate, "_request", made_then_failed)
    substrate = E2BSubstrate()
    with pytest.raises(SandboxStartError, match="never reached RUNNING"):
        substrate.start()
    assert _mine(e2b_env, substrate) == []


def test_a_create_the_provider_refused_is_not_looked_up(
    e2b_env: StandInE2B, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal (HTTP 429: rate_limited) made nothing: no list call follows it."""
    looked: list[object] = []
    monkeypatch.setattr(HostedSubstrate, "reap_tagged", lambda self, labels: looked.append(labels))
    with pytest.raises(RateLimited):
        E2BSubstrate(metadata={FAULT_KEY: "429"}).start()
    assert looked == []
