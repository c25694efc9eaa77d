"""The k8s substrate's contract tests against a real cluster: the one ``KUBECONFIG`` points at.

Skipped unless KUBECONFIG is set. Optional knobs: ``ROLLOUT_TAX_K8S_CONTEXT``,
``ROLLOUT_TAX_K8S_NAMESPACE``, ``ROLLOUT_TAX_K8S_IMAGE`` (an image the cluster can pull, with
``sh`` and coreutils; the default ``rollout-tax/sandbox:bookworm`` exists only where it was
built), ``ROLLOUT_TAX_K8S_RUNTIME_CLASS``. The RBAC these tests need is the README's Role.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from test_kubernetes import KubernetesContract

pytestmark = pytest.mark.skipif(
    not os.environ.get("KUBECONFIG"),
    reason="KUBECONFIG is not set: the live Kubernetes tests need a real cluster",
)

KNOBS = {
    "context": "ROLLOUT_TAX_K8S_CONTEXT",
    "namespace": "ROLLOUT_TAX_K8S_NAMESPACE",
    "image": "ROLLOUT_TAX_K8S_IMAGE",
    "runtime_class": "ROLLOUT_TAX_K8S_RUNTIME_CLASS",
}


class TestLiveCluster(KubernetesContract):
    @pytest.fixture(scope="class")
    @classmethod
    def k8s_options(cls) -> dict[str, Any]:
        return {key: os.environ[env] for key, env in KNOBS.items() if os.environ.get(env)}
