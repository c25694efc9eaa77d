"""``docker.reuse = "reset"``: a used container reset to its image without the engine.

On an engine of this host with the ``overlay2`` driver, readable by this user (root), the
reset is done from the host: every process of the container's PID namespace but its init and
the keepalive is killed (through /proc), then each change its writable layer (the overlay's
upper directory) holds is undone through the container's own root (``/proc/PID/root``): what
was added is removed, what was changed or deleted is copied back from the image's layers
(the layer is walked once the processes are dead: nothing writes to it meanwhile).
Anywhere else (another driver, a remote engine, gVisor, no access to the engine's data) it
is the same through the engine: one exec kills and removes, the engine's diff lists changes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import time
from pathlib import Path
from typing import Any

from ...errors import SandboxError
from .engine import engine_errors
from .handle import DockerHandle

#: What the engine itself mounts over a container's root: never part of its layer.
ENGINE_PATHS = ("/proc", "/sys", "/dev", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf")
#: The engine's diff kinds.
MODIFIED, ADDED, DELETED = 0, 1, 2
#: A directory of the layer that hides the image's (deleted, then made again).
OPAQUE = 3
#: Kills every process of the container but PID 1 (its init), its first child (the
#: keepalive) and itself; then removes its arguments (paths), then leaves the workdir ($1).
KILL_AND_REMOVE = (
    'w=$1; shift; k=$(cut -d" " -f1 /proc/1/task/1/children); '
    "for n in 1 2; do for p in /proc/[0-9]*; do p=${p#/proc/}; "
    '[ "$p" = 1 ] || [ "$p" = "$k" ] || [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null; done; done; '
    'rm -rf -- "$@"; mkdir -p -- "$w"'
)
#: How long killed processes may take to be gone.
GONE_S = 10.0


def reset(api: Any, handle: DockerHandle) -> None:
    """Reset the container of ``handle`` to its image (see the module's docstring)."""
    with engine_errors(handle.substrate, f"resetting container {handle.id[:12]}"):
        if from_host(api, handle):
            spared = set()
            if handle.session_exec:  # the session's shell (the helper serving it), kept open
                spared.add(api.exec_inspect(handle.session_exec).get("Pid") or 0)
            _reset_on_host(handle, spared)
        else:
            _reset_through_engine(api, handle)


def from_host(api: Any, handle: DockerHandle) -> bool:
    """Whether the container of ``handle`` is reset from this host (looked up once)."""
    if handle.host is None:
        with engine_errors(handle.substrate, f"inspecting container {handle.id[:12]}"):
            handle.host = _host_view(api, handle.id)
    return bool(handle.host)


def _host_view(api: Any, container: str) -> dict[str, Any]:
    """Where the container's init and layers are on this host ({}: not reachable from here)."""
    info = api.inspect_container(container)
    data = (info.get("GraphDriver") or {}).get("Data") or {}
    pid = (info.get("State") or {}).get("Pid") or 0
    upper, lower = data.get("UpperDir"), data.get("LowerDir") or ""
    if info.get("HostConfig", {}).get("Runtime", "runc") != "runc" or not upper or not pid:
        return {}
    if not os.access(upper, os.R_OK | os.X_OK) or not os.access(f"/proc/{pid}/root", os.R_OK):
        return {}
    return {"pid": pid, "upper": upper, "lower": [p for p in lower.split(":") if p]}


def _reset_on_host(handle: DockerHandle, spared: set[int]) -> None:
    host = handle.host
    assert host is not None  # from_host() found it
    pid = host["pid"]
    _kill_all_but_keepalive(pid, spared)
    root = f"/proc/{pid}/root"
    for path, kind in _changes(Path(host["upper"])):
        _undo(root, path, kind, host["lower"])
    os.makedirs(root + handle.workdir, exist_ok=True)


def _kill_all_but_keepalive(init: int, spared: set[int]) -> None:
    """SIGKILL every process in the PID namespace of ``init`` but it, its first child and
    ``spared``, and wait until they are gone (a zombie holds no file, socket or port)."""
    namespace = os.stat(f"/proc/{init}/ns/pid").st_ino
    keep = {init, *spared}
    with contextlib.suppress(OSError, IndexError):
        keep.add(int(Path(f"/proc/{init}/task/{init}/children").read_text().split()[0]))
    killed = []
    for _ in range(2):  # what forked during the first pass
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in keep:
                continue
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry.name}/ns/pid").st_ino == namespace:
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed.append(int(entry.name))
    deadline = time.monotonic() + GONE_S
    for pid in killed:
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.0005)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            return stat_file.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


def _changes(upper: Path) -> list[tuple[str, int]]:
    """The changes an overlay's upper directory holds, outermost first: (path, kind); a
    directory added is one change (its contents go with it)."""
    found: list[tuple[str, int]] = []

    def walk(directory: Path, inside: str) -> None:
        with os.scandir(directory) as entries:
            for entry in entries:
                path = f"{inside}/{entry.name}"
                if path in ENGINE_PATHS:
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                    found.append((path, DELETED))  # a whiteout
                elif entry.is_dir(follow_symlinks=False):
                    found.append(
                        (path, OPAQUE if _opaque(entry.path) else MODIFIED)
                    )  # kept, or added: decided by the image
                    walk(Path(entry.path), path)
                else:
                    found.append((path, MODIFIED))

    walk(upper, "")
    return found


def _opaque(directory: str) -> bool:
    with contextlib.suppress(OSError):
        return os.getxattr(directory, "trusted.overlay.opaque", follow_symlinks=False) == b"y"
    return False


def _undo(root: str, path: str, kind: int, lower: list[str]) -> None:
    """Undo one change through the container's root: remove what the image lacks, copy back
    a file the image has (a directory the image has is kept, its contents undone apart)."""
    target = root + path
    original = next((layer + path for layer in lower if os.path.lexists(layer + path)), None)
    if original is None:  # added: gone, with whatever is below it
        _remove(target)
        return
    if os.path.isdir(original) and not os.path.islink(original):
        if kind == OPAQUE or (os.path.lexists(target) and not os.path.isdir(target)):
            _remove(target)
        if not os.path.lexists(target):
            shutil.copytree(original, target, symlinks=True)
        return
    _remove(target)
    if os.path.islink(original):
        os.symlink(os.readlink(original), target)
    else:
        shutil.copy2(original, target)
    info = os.lstat(original)
    os.lchown(target, info.st_uid, info.st_gid)


def _remove(target: str) -> None:
    if os.path.isdir(target) and not os.path.islink(target):
        shutil.rmtree(target, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)


def _reset_through_engine(api: Any, handle: DockerHandle) -> None:
    """Kill and remove through one exec: the engine's diff lists what was added (what was
    changed or deleted in the image is not restored on this path: the note says so)."""
    changes = api.diff(handle.id) or []
    added = [c["Path"] for c in changes if c.get("Kind") == ADDED]
    added = [p for p in added if not any(p.startswith(f"{q}/") for q in added)]
    added = [p for p in added if not p.startswith(ENGINE_PATHS)]
    argv = ["sh", "-c", KILL_AND_REMOVE, "sh", handle.workdir, *added]
    exec_id = api.exec_create(handle.id, argv)["Id"]
    api.exec_start(exec_id)
    code = api.exec_inspect(exec_id).get("ExitCode")
    if code not in (0, None):
        raise SandboxError(f"{handle.substrate}: the reset exited {code}")
