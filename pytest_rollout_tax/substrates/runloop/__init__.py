"""``runloop``: hosted devboxes on Runloop (https://runloop.ai), through the official
``runloop-api-client`` SDK.

Cold start is making the SDK's client (phase ``client``; one per rollout unless
``reuse_connection``), then ``devboxes.create`` until the service accepts the devbox (phase
``create``), then each state the devbox passes through on its way to ``running``, a phase
named after it (``provisioning``: Runloop allocates and boots the machine; ``initializing``:
its boot scripts run; ``queued`` first on a FLEX devbox), followed by long polls of
``wait_for_status``, then the first no-op command (phase ``first_exec``); making the empty
workdir in between is phase ``workdir``, not counted. On ``transport=session`` the shell is
opened before the first no-op (phase ``session``). A create held back by pacing
(``max_creates_per_s``) records phase ``paced``, not counted.

Commands run as Runloop executions (``execute``, then the ``wait_for_command`` long poll:
``exec``), or in one ``sh`` held in an execution with its stdin attached (``session``); files
go through ``upload_file`` and ``download_file``; teardown is ``shutdown``. The key comes from
``RUNLOOP_API_KEY`` only; ``RUNLOOP_BASE_URL`` points the SDK at another control plane. Every
devbox carries the ownership labels as metadata; a create that timed out or was cancelled is
looked up by its rollout's label and shut down.

Install with ``pip install 'pytest-rollout-tax[runloop]'``.
"""

from .lifecycle import RunloopSubstrate
from .options import API_KEY_VARIABLE, PUBLISHED_CREATES_PER_S, RunloopOptions
from .steps import RunloopExec, RunloopSession

__all__ = [
    "API_KEY_VARIABLE",
    "PUBLISHED_CREATES_PER_S",
    "RunloopExec",
    "RunloopOptions",
    "RunloopSession",
    "RunloopSubstrate",
]
