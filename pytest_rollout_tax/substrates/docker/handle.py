"""One container as its transports reach it, and who owns the files written into it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.sandbox import Handle
from ...core.transport import RawResult
from ...errors import SandboxError


class FileOwner:
    """The uid and gid files are written with: the sandbox user's, resolved once per substrate."""

    def __init__(self, user: str | None, substrate: str) -> None:
        self._user = user
        self._substrate = substrate
        self._lock = threading.Lock()
        self._ids = _numeric_ids(user)

    def ids(self, run: Callable[[list[str]], RawResult]) -> tuple[int, int]:
        """The ids; asks the sandbox through ``run`` (an argv to a result) if ``user`` is a name."""
        with self._lock:
            if self._ids is None:
                result = run(["sh", "-c", "id -u; id -g"])
                try:
                    uid, gid = (int(line) for line in result.stdout.split())
                except ValueError:
                    raise SandboxError(
                        f"{self._substrate}.user={self._user!r}: cannot resolve its uid and gid "
                        f"in the image: {result.stderr.decode('utf-8', 'replace').strip()}"
                    ) from None
                self._ids = (uid, gid)
            return self._ids


@dataclass
class DockerHandle(Handle):
    """A running container (``id`` is its full id) and what its transports need to reach it."""

    #: The docker SDK's low-level client of the substrate's engine.
    api: Any
    #: The substrate's name, for messages.
    substrate: str
    #: The image the container runs, for messages.
    image: str
    #: Who owns the files written through the archive API.
    owner: FileOwner
    #: Where a reset finds the container on this host (``reset.py``; {}: not from here;
    #: None: not looked up yet).
    host: dict[str, Any] | None = None
    #: The exec of its session's shell, if one was opened: a reset from the host spares it.
    session_exec: str | None = None


def _numeric_ids(user: str | None) -> tuple[int, int] | None:
    """``None`` (root) -> (0, 0); ``"1000:1000"`` -> (1000, 1000); a name -> None (ask)."""
    if user is None:
        return (0, 0)
    uid, _, gid = user.partition(":")
    return (int(uid), int(gid)) if uid.isdigit() and gid.isdigit() else None
