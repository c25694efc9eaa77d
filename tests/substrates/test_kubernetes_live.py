"""The k8s-specific tests of test_kubernetes.py against a real cluster: the one ``KUBECONFIG``
points at. The generic contract runs there too, as tests/contract/'s ``k8s-live`` variant.

Skipped unless KUBECONFIG is set. The options come from tests/support/live.py
(``live.k8s_options()``), whose optional knobs are ``ROLLOUT_TAX_K8S_CONTEXT``,
``ROLLOUT_TAX_K8S_NAMESPACE``, ``ROLLOUT_TAX_K8S_IMAGE`` (an image the cluster can pull, with
``sh`` and coreutils; the default ``rollout-tax/sandbox:bookworm`` exists only where it was
built), ``ROLLOUT_TAX_K8S_RUNTIME_CLASS``. The RBAC these tests need is the Role in
docs/substrates/k8s.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import live
from test_kubernetes import KubernetesContract

OPTIONS = live.k8s_options()
pytestmark = [pytest.mark.skip(reason=OPTIONS)] if isinstance(OPTIONS, str) else []


class TestLiveCluster(KubernetesContract):
    @pytest.fixture(scope="class")
    @classmethod
    def k8s_options(cls) -> dict[str, Any]:
        return OPTIONS
