"""core/late_create.py: the one policy over a backend's destroy and reap_tagged."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import pytest

from pytest_rollout_tax.core.late_create import LateCreates
from pytest_rollout_tax.errors import CreateTimeout, RateLimited, SandboxStartError

LABELS = {"rollout-tax.io/session": "s1", "rollout-tax.io/rollout": "r1"}


class Provider:
    """An in-memory provider: sandboxes by their labels; a create may be held."""

    name = "fake"

    def __init__(self) -> None:
        self.sandboxes: dict[str, dict[str, str]] = {}
        self.release = threading.Event()
        self.held = False
        self.looked_up: list[dict[str, str]] = []

    def create(self) -> str:
        """Make the sandbox at once; answer when released if held."""
        sandbox_id = f"sb-{len(self.sandboxes)}"
        self.sandboxes[sandbox_id] = dict(LABELS)
        if self.held:
            self.release.wait(30)
        return sandbox_id

    def destroy(self, handle: str) -> None:
        self.sandboxes.pop(handle, None)

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        self.looked_up.append(dict(labels))
        tagged = [i for i, have in self.sandboxes.items() if have.items() >= labels.items()]
        for sandbox_id in tagged:
            del self.sandboxes[sandbox_id]
        return len(tagged)


def test_a_create_in_time_is_returned_and_nothing_is_looked_up():
    provider, late = Provider(), LateCreates()
    assert late.create(provider, provider.create, LABELS, 10) == "sb-0"
    assert provider.sandboxes == {"sb-0": LABELS}
    assert provider.looked_up == []
    assert late.pending == 0


def test_a_create_past_its_budget_is_reaped_by_its_tag_at_once_and_again_at_its_answer():
    provider, late = Provider(), LateCreates()
    provider.held = True
    with pytest.raises(CreateTimeout, match=r"fake: create ran past its 0.1 s budget"):
        late.create(provider, provider.create, LABELS, 0.1)
    assert provider.sandboxes == {}  # made, and deleted by its tag before its answer came
    assert provider.looked_up == [LABELS]
    assert late.pending == 1
    provider.release.set()
    assert late.settle(30)
    assert late.pending == 0
    assert provider.looked_up == [LABELS, LABELS]  # looked up again once it answered
    assert late.reaped >= 1


def test_a_failed_create_is_looked_up_by_its_tag():
    provider, late = Provider(), LateCreates()

    def lost() -> str:
        provider.create()
        raise SandboxStartError("fake: connection reset before the answer")

    with pytest.raises(SandboxStartError, match="connection reset"):
        late.create(provider, lost, LABELS, 10)
    assert provider.sandboxes == {}
    assert late.reaped == 1


def test_a_create_the_provider_refused_looks_nothing_up():
    provider, late = Provider(), LateCreates()

    def refused() -> str:
        raise RateLimited("fake: 429", "slow down")

    with pytest.raises(RateLimited):
        late.create(provider, refused, LABELS, 10)
    assert provider.looked_up == []


def test_a_failing_lookup_is_logged_and_the_creates_own_error_raised(caplog):
    provider, late = Provider(), LateCreates()
    provider.held = True

    def broken(labels: Mapping[str, str]) -> int:
        raise OSError("API unreachable")

    provider.reap_tagged = broken  # type: ignore[method-assign]
    with pytest.raises(CreateTimeout):
        late.create(provider, provider.create, LABELS, 0.05)
    provider.release.set()
    assert late.settle(30)
    assert "removing a late create failed: API unreachable" in caplog.text
    assert provider.sandboxes == {}  # the late handle itself was destroyed
