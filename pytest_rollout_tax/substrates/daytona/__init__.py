"""``daytona``: hosted sandboxes on Daytona (https://daytona.io), through the official SDK.

Cold start is making the SDK's client (phase ``client``; one per rollout unless
``reuse_connection``), then ``Daytona.create`` up to the service accepting the sandbox (phase
``create``: ``POST /sandbox`` answered), then until the SDK sees it ``started`` (phase
``started``: the SDK polls its state every 0.1 s, so this phase is quantised to 100 ms; from
an ``image`` it includes the service building a snapshot of it), then the first no-op command
(phase ``first_exec``); making the empty workdir in between is phase ``workdir``, not counted.
On ``transport=session`` the session is opened before the first no-op (phase ``session``). A
create held back by pacing (``max_creates_per_s``) records phase ``paced``, not counted.

Commands run through ``process.exec`` (``exec``) or a Daytona session, a shell the service
holds, through ``process.execute_session_command`` (``session``); files go through
``fs.upload_file`` and ``fs.download_file``; teardown is ``delete`` until the sandbox is
destroyed. The key comes from ``DAYTONA_API_KEY`` only; ``DAYTONA_API_URL`` and
``DAYTONA_TARGET`` apply as in the SDK. Every sandbox carries the ownership labels.

Install with ``pip install 'pytest-rollout-tax[daytona]'``.
"""

from .lifecycle import DaytonaSubstrate
from .options import API_KEY_VARIABLE, PUBLISHED_CREATES_PER_S, DaytonaOptions
from .steps import DaytonaExec, DaytonaSession

__all__ = [
    "API_KEY_VARIABLE",
    "PUBLISHED_CREATES_PER_S",
    "DaytonaExec",
    "DaytonaOptions",
    "DaytonaSession",
    "DaytonaSubstrate",
]
