"""Whether a process on this machine still runs: reaping spares a live session's sandboxes."""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a zombie counts as dead).

    Reaping uses it to spare the sandboxes of a session that is still running here.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):  # no procfs: trust kill()
        return True
