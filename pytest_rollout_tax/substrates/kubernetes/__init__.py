"""``k8s`` (alias ``kubernetes``): one pod per sandbox, through the official kubernetes client.

Cold start is the pod's create request, then one watch that follows the pod's condition
transitions (``created``, ``scheduled``, ``initialized``, ``containers_ready``, ``ready``; with
the ``session`` transport, ``session``; the core adds ``first_exec``). After it, untimed, one
read of the pod's events gives the image pull time (``image_pull``: reported, not counted).
Steps reach the pod over the exec websocket: one exec per step (``exec``), or one ``sh`` held
open for the pod's life (``session``). Teardown deletes the pod and watches until it is gone.

Modules: :mod:`.config` (options, kubeconfig), :mod:`.manifest` (the pod), :mod:`.api` (REST,
watches, errors), :mod:`.events`, :mod:`.exec_ws` (the websocket), :mod:`.exec_transport`,
:mod:`.lifecycle` (the Substrate).
"""

from __future__ import annotations

from .api import ApiError
from .config import KubernetesOptions, toleration
from .events import go_duration_seconds
from .exec_transport import PodExec, PodHandle
from .exec_ws import ExecStream
from .lifecycle import KubernetesSubstrate

__all__ = [
    "ApiError",
    "ExecStream",
    "KubernetesOptions",
    "KubernetesSubstrate",
    "PodExec",
    "PodHandle",
    "go_duration_seconds",
    "toleration",
]
