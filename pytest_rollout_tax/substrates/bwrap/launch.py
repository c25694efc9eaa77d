"""One sandbox as processes: the launch, the way into it, and its end.

A sandbox is ``unshare`` making a user and mount namespace (this user mapped to root), where
an overlay of the exported root and the sandbox's own layer is mounted, then ``bwrap`` making
the user, PID, IPC, UTS, cgroup and network namespaces around a keepalive that reads a pipe
this process holds. Deleting the sandbox kills the init of its PID namespace, and the kernel
kills every process inside; if this process dies instead (even by SIGKILL) the pipe closes and
the keepalive kills every process of the namespace (``kill -9 -1``), whereupon its init ends.
The mount namespace, and the overlay with it, goes with the last process. Steps enter the
namespaces with ``nsenter``. Nothing needs root.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...core.sandbox import Handle
from ...errors import SandboxStartError, SubstrateUnavailable
from ..docker.options import memory_bytes

#: The sandbox's PATH, as the image's.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Mounts the overlay (``$1`` the lower root, ``$2`` the layer), then runs the rest.
MOUNT = (
    'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/work" "$2/root" '
    '|| exit 125; shift 2; exec "$@"'
)
#: The sandbox's first process: waits for the end of the pipe, then kills every other process
#: of its PID namespace (but the init, which then ends).
KEEPALIVE = ("sh", "-c", "cat >/dev/null; kill -9 -1")
#: How long a launch may take to say where its sandbox runs.
LAUNCH_TIMEOUT_S = 30.0
#: How long a sandbox may take to end once its pipe closed, before it is killed.
END_TIMEOUT_S = 5.0
#: What to do where user namespaces cannot be made.
NO_USERNS = (
    "user namespaces are not available to this user here; allow them "
    "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, or the AppArmor "
    "profile for bwrap on Ubuntu) or use the docker substrate"
)
NO_OVERLAY = (
    "overlayfs cannot be mounted in a user namespace here (Linux 5.11 or later mounts it); "
    "use a newer kernel or the docker substrate"
)


@dataclass
class BwrapHandle(Handle):
    """A running sandbox: its directory, the launch holding it, and its PID for ``nsenter``."""

    #: The sandbox's directory: ``upper`` and ``work`` (its layer), ``root`` (the mount point).
    layer: Path
    launch: subprocess.Popen[bytes]
    #: The keepalive's PID on this host: steps enter its namespaces.
    pid: int
    #: The PID namespace's init on this host: killing it ends the sandbox.
    init: int
    #: The variables every command starts with.
    env: dict[str, str]
    #: ``prlimit`` before every command (empty: no limit).
    limits: list[str]
    substrate: str


def limits_of(memory: str | None) -> list[str]:
    """``prlimit`` arguments for the limits asked for (only what needs no root)."""
    return [host_tool("prlimit"), f"--as={memory_bytes(memory)}", "--"] if memory else []


@functools.cache
def host_tool(name: str) -> str:
    """The path of ``name`` on this host (steps run with the sandbox's PATH, not this one)."""
    return shutil.which(name) or name


def launch(
    *,
    name: str,
    root: Path,
    layer: Path,
    workdir: str,
    network: str,
    binds: Sequence[str],
    env: dict[str, str],
    limits: list[str],
) -> BwrapHandle:
    """Start a sandbox on ``root`` with ``layer`` (made empty here) as its writable layer."""
    for part in ("upper", "work", "root"):
        (layer / part).mkdir(parents=True, exist_ok=True)
    info_read, info_write = os.pipe()
    bwrap = [
        "bwrap",
        "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts",
        "--unshare-cgroup-try",
        *(["--unshare-net"] if network == "none" else []),
        "--bind", str(layer / "root"), "/",
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        *[arg for path in binds for arg in ("--ro-bind", path, path)],
        "--hostname", "rollout-tax", "--chdir", workdir, "--clearenv",
        "--info-fd", str(info_write),
        "--", *limits, *KEEPALIVE,
    ]  # fmt: skip
    argv = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
    argv += ["--", "sh", "-c", MOUNT, "sh", str(root), str(layer), *bwrap]
    with open(layer / "launch.log", "wb") as log:
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=(info_write,),
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            os.close(info_read)
            raise SubstrateUnavailable(
                f"{name}: {exc.filename} is not installed: run scripts/ensure-bwrap "
                "(apt-get install bubblewrap util-linux)"
            ) from None
        finally:
            os.close(info_write)
    try:
        init, pid = _sandbox_pids(info_read, process)
    except BaseException:
        end(process, None)
        raise SandboxStartError(f"{name}: the sandbox did not start: {why_not(layer)}") from None
    (layer / "pid").write_text(f"{init} {start_tick(init)}\n")
    return BwrapHandle(
        id=layer.name,
        workdir=workdir,
        layer=layer,
        launch=process,
        pid=pid,
        init=init,
        env={"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8"} | env,
        limits=limits,
        substrate=name,
    )


def _sandbox_pids(info: int, process: subprocess.Popen[bytes]) -> tuple[int, int]:
    """The PIDs of the namespace's init (bwrap names it) and of the keepalive, its child."""
    data = b""
    with os.fdopen(info, "rb") as stream:
        data = stream.read()
    init = int(json.loads(data)["child-pid"])
    deadline = time.monotonic() + LAUNCH_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
            if children:
                return init, int(children[0])
        if process.poll() is not None:
            break
        time.sleep(0.0005)
    raise SandboxStartError("no keepalive in the sandbox")


def why_not(layer: Path) -> str:
    """What the launch of the sandbox at ``layer`` said, on one line."""
    with contextlib.suppress(OSError):
        said = (layer / "launch.log").read_text(errors="replace").split()
        if said:
            return " ".join(said)[:300]
    return "no reason given"


def enter(handle: BwrapHandle, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside the sandbox, in all its namespaces and its root (run it with
    ``env=handle.env`` alone: ``nsenter`` hands its environment on)."""
    return [
        *handle.limits,
        host_tool("nsenter"), "-t", str(handle.pid),
        "-U", "-m", "-i", "-u", "-n", "-p", "-C", "-r", "-w", "--preserve-credentials", "--", *argv,
    ]  # fmt: skip


def end(process: subprocess.Popen[bytes], init: int | None) -> None:
    """End a sandbox: kill the init of its PID namespace (the kernel kills every process
    inside), close its pipe, and wait for the launch to end (killed if it does not soon)."""
    if init is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(init, signal.SIGKILL)
    with contextlib.suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()
    try:
        process.wait(END_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def start_tick(pid: int) -> int:
    """When process ``pid`` started, in clock ticks since boot (0: it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rpartition(b")")[2].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def kill_recorded(layer: Path) -> None:
    """Kill the sandbox whose init ``layer/pid`` records, if that process still runs (a reap,
    after its session died: the pipe's end should have ended it already)."""
    with contextlib.suppress(OSError, ValueError):
        pid, tick = (int(field) for field in (layer / "pid").read_text().split())
        if start_tick(pid) == tick:
            os.kill(pid, signal.SIGKILL)
