"""Late creates on the k8s stand-ins: a pod, or an agent-sandbox claim, whose create is
answered only after its budget, or cancelled between its request and its answer, is deleted
by its labels; nothing of the session is left."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.agent_sandbox_api import on_loop
from support.k8s_api import KubeAPIStandIn
from support.late_answer import keyboard_interrupts

from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.substrate import SESSION_LABEL, new_id
from pytest_rollout_tax.errors import CreateTimeout
from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate

#: What a session may leave on the stand-in: pods, and claims with their sandboxes.
KINDS = ("pods", "sandboxclaims", "sandboxes")


def session_objects(server: KubeAPIStandIn, session: str) -> dict[str, list[str]]:
    """The objects of ``session`` the stand-in holds, by plural (empty ones left out)."""

    def labelled(obj: dict) -> bool:
        return (obj["metadata"].get("labels") or {}).get(SESSION_LABEL) == session

    def names(plural: str) -> list[str]:
        return [o["metadata"]["name"] for o in server.store.list(plural, "default", labelled)]

    kinds = [plural for plural in KINDS if plural in server.store.objects]  # claims: if installed
    found = {plural: on_loop(server, lambda p=plural: names(p)) for plural in kinds}
    return {plural: names for plural, names in found.items() if names}


@pytest.fixture(params=["pod", "claim"])
def late_k8s(request) -> Iterator[tuple[KubeAPIStandIn, KubernetesSubstrate]]:
    """A k8s substrate of a session of its own on a stand-in (pods, or claims) whose create
    answers are held on demand, with a create budget of 1 s."""
    server: KubeAPIStandIn
    options: dict[str, Any]
    if request.param == "pod":
        server = request.getfixturevalue("k8s_api")
        options = {"kubeconfig": str(request.getfixturevalue("k8s_kubeconfig"))}
    else:
        server = request.getfixturevalue("claims_api")
        options = {"kubeconfig": str(request.getfixturevalue("claims_kubeconfig")), "api": "claim"}
    substrate = KubernetesSubstrate(session_id=f"t{new_id()}", create_timeout=1, **options)
    substrate._ensure_prepared()  # a claim's template and pool, before any create is held
    yield server, substrate
    server.held_creates.disarm()
    substrate.reap(substrate.session_id)
    substrate.close()


def test_a_create_answered_after_its_budget_leaves_nothing(late_k8s):
    server, substrate = late_k8s
    rollout = Rollout(substrate="k8s")
    server.held_creates.arm()
    with pytest.raises(CreateTimeout, match=r"create ran past its 1 s budget"):
        substrate.start(rollout)
    assert rollout.budget_exceeded == "create"
    server.held_creates.release.set()
    assert substrate.late_creates.settle(120)
    assert server.held_creates.made.is_set()
    assert session_objects(server, substrate.session_id) == {}
    assert substrate.late_creates.reaped >= 1


def test_a_create_cancelled_before_its_answer_leaves_nothing(late_k8s):
    server, substrate = late_k8s
    substrate.options.create_timeout = None
    server.held_creates.arm(interrupt=True)
    with keyboard_interrupts(), pytest.raises(KeyboardInterrupt):
        substrate.start(Rollout(substrate="k8s"))
    assert server.held_creates.made.is_set()
    server.held_creates.release.set()
    assert substrate.late_creates.settle(120)
    assert session_objects(server, substrate.session_id) == {}
    assert substrate.late_creates.reaped >= 1
