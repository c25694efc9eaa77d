"""``k8s.api = "claim"`` against a real cluster with agent-sandbox installed: the one
``KUBECONFIG`` points at (options from tests/support/live.py, as test_kubernetes_live.py).

Skipped, saying which is missing, unless KUBECONFIG is set and the cluster has agent-sandbox's
CRDs (v1beta1, agent-sandbox v0.5.6 or later). The tool makes its own SandboxTemplate and a
SandboxWarmPool of 1, and removes them; the RBAC is the claim mode's Role in
docs/substrates/k8s.md.
"""

from __future__ import annotations

import pytest
from support import live

from pytest_rollout_tax.errors import RolloutTaxError
from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate

OPTIONS = live.k8s_options()


@pytest.fixture(scope="module")
def claim_substrate():
    if isinstance(OPTIONS, str):
        pytest.skip(OPTIONS)
    try:
        substrate = KubernetesSubstrate("k8s-claim", api="claim", warm_pool=1, **OPTIONS)
    except RolloutTaxError as exc:  # no agent-sandbox CRDs (or no cluster): say which
        pytest.skip(str(exc))
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


def test_a_live_claim_runs_steps_and_reports_its_launch_type(claim_substrate):
    with claim_substrate.start(timeout=120) as box:
        assert list(box.rollout.phases) == ["claimed", "bound", "ready", "first_exec"]
        assert box.exec("echo hi").stdout == "hi\n"
        box.write_file("f.txt", b"x")
        assert box.read_file("f.txt") == b"x"
    assert box.rollout.launch_type in ("warm", "cold")
