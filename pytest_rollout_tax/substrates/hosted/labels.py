"""Ownership labels on hosted sandboxes, and which ones a reap takes.

Every hosted sandbox carries, from its create request on, the session's label, the rollout's
(unique to the create: a create that never answered is found by it) and its owner's
(``HOST:PID``). A reap by session takes that session's sandboxes; a reap of every session
(``session_id=None``) takes those labelled by any, sparing the ones a live process of this host
other than this one owns (a session still running beside this one).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...core.processes import process_alive
from ...core.substrate import SESSION_LABEL

OWNER_LABEL = "rollout-tax.io/owner"


@dataclass(frozen=True)
class Listed:
    """A sandbox as the provider's list call returned it: its id, labels and the SDK's object."""

    id: str
    labels: Mapping[str, str]
    sdk: Any = None


def this_owner() -> str:
    """This process, as the owner label names it (``HOST:PID``)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def carries(listed: Listed, labels: Mapping[str, str]) -> bool:
    """Whether ``listed`` carries every one of ``labels`` (a provider's filter is not trusted)."""
    return all(listed.labels.get(key) == value for key, value in labels.items())


def reaped(listed: Listed, session_id: str | None) -> bool:
    """Whether a reap of ``session_id`` (every session if None) takes ``listed``."""
    label = listed.labels.get(SESSION_LABEL)
    if label is None:
        return False  # not ours
    if session_id is not None:
        return label == session_id
    return not _live_elsewhere(listed.labels.get(OWNER_LABEL))


def _live_elsewhere(owner: str | None) -> bool:
    """Whether ``owner`` (HOST:PID) is another process of this host that is still running."""
    host, _, pid_text = (owner or "").rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    return pid != os.getpid() and process_alive(pid)
