"""The bwrap substrate's lifecycle: check the kernel once, launch sandboxes, end them, reap.

Each sandbox is a directory ``CACHE/sandboxes/rollout-tax-SESSION-PID-ROLLOUT`` (its labels:
the session, the process that made it, the rollout) holding its writable layer, the PID of
its keepalive and ``labels.json`` (the docker substrate's labels, with the owner and user).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core import stepper
from ...core.processes import process_alive
from ...core.record import PhaseClock
from ...core.shell import ShellTransport
from ...core.substrate import ROLLOUT_LABEL, SESSION_LABEL, Substrate
from ...core.transport import Transport
from ...errors import SandboxStartError, SubstrateUnavailable
from ..docker.lifecycle import OWNER_LABEL, USER_LABEL, current_user
from . import launch, rootfs
from .options import BwrapOptions
from .steps import BwrapExec, BwrapShell

PREFIX = "rollout-tax-"
_SANDBOX = re.compile(re.escape(PREFIX) + r"(?P<session>[0-9a-f]+)-(?P<pid>\d+)-(?P<rollout>\w+)")
#: The check of the kernel, run once: a user namespace, an overlay in it, bwrap's namespaces.
CHECK = (
    'mkdir -p "$1/l" "$1/u" "$1/w" "$1/m" && '
    'mount -t overlay overlay -o "lowerdir=$1/l,upperdir=$1/u,workdir=$1/w" "$1/m" || exit 125; '
    "exec bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev true"
)


#: What it runs on this host: bubblewrap's, and util-linux's.
TOOLS = ("bwrap", "unshare", "nsenter", "prlimit")


class BwrapSubstrate(Substrate):
    """Sandboxes made by bubblewrap on this host, rooted in a Docker image's filesystem."""

    kind = "bwrap"
    Options = BwrapOptions
    transports = ("exec", "session")
    resets = True

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.user = current_user()
        self.cache = rootfs.cache_root(self.options.cache)
        self._root: Path | None = None
        self._binds: list[str] = []
        self._limits = launch.limits_of(self.options.memory)

    @property
    def sandboxes(self) -> Path:
        return self.cache / "sandboxes"

    def _prepare(self) -> None:
        """Once: bwrap runs with the namespaces and the overlay it needs, and the image's root
        is exported. Either missing is one line saying which, and the substrate is unusable."""
        check_kernel(self.name, self.sandboxes)
        self._root = rootfs.exported(
            self.name, self.options.image, self.cache, self.options.workdir
        )
        if self.options.transport == "session":  # the step helper, where the session runs it
            helper = stepper.for_machine(stepper.host_machine())
            self._binds = [str(helper.path.parent)] if helper.path is not None else []

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> launch.BwrapHandle:
        name = f"{PREFIX}{labels[SESSION_LABEL]}-{os.getpid()}-{labels[ROLLOUT_LABEL]}"
        layer = self.sandboxes / name
        layer.mkdir(parents=True)
        (layer / "labels.json").write_text(
            json.dumps(labels | {OWNER_LABEL: self.owner, USER_LABEL: self.user})
        )
        clock.mark("create")
        handle = self._launch(layer)
        clock.mark("start")
        return handle

    def _launch(self, layer: Path) -> launch.BwrapHandle:
        """A sandbox on ``layer`` (its directory is removed if it cannot start)."""
        try:
            if self._root is None:  # a sandbox is started only after _prepare
                raise SandboxStartError(f"{self.name}: the image's root is not exported")
            return launch.launch(
                name=self.name,
                root=self._root,
                layer=layer,
                workdir=self.options.workdir,
                network=self.options.network,
                binds=self._binds,
                env=self.options.env,
                limits=self._limits,
            )
        except BaseException:
            rootfs.remove_tree(layer)
            raise

    def _reset(self, handle: launch.BwrapHandle, clock: PhaseClock) -> None:
        """End the sandbox (every process in it), drop its layer, start it again on the same
        directory: /tmp is a tmpfs of each start, the workdir the image's."""
        launch.end(handle.launch, handle.init)
        for part in ("upper", "work"):
            rootfs.remove_tree(handle.layer / part)
        fresh = self._launch(handle.layer)
        handle.launch, handle.pid, handle.init = fresh.launch, fresh.pid, fresh.init

    def _transport(self, handle: launch.BwrapHandle) -> Transport:
        if self.options.transport == "session":
            return ShellTransport(lambda: BwrapShell(handle), substrate=self.name, on_host=True)
        return BwrapExec(handle)

    def destroy(self, handle: launch.BwrapHandle) -> None:
        launch.end(handle.launch, handle.init)
        rootfs.remove_tree(handle.layer)

    def reap(self, session_id: str | None = None) -> int:
        """Remove the sandboxes of ``session_id`` (with None, those whose process is gone):
        their processes, if any still run, then their directories."""
        return self._remove(f"{PREFIX}{session_id or '*'}-*", spare_live=not session_id)

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Remove the sandbox of one create's ``labels``: its processes, then its directory."""
        session, rollout = labels[SESSION_LABEL], labels[ROLLOUT_LABEL]
        return self._remove(f"{PREFIX}{session}-*-{rollout}", spare_live=False)

    def _remove(self, pattern: str, *, spare_live: bool) -> int:
        """Remove the sandboxes ``pattern`` matches, sparing those of a live process if
        ``spare_live``; how many."""
        removed = 0
        for path in self.sandboxes.glob(pattern):
            labels = _SANDBOX.fullmatch(path.name)
            if not labels or not path.is_dir():
                continue
            if spare_live and process_alive(int(labels["pid"])):
                continue  # a running session's sandbox
            launch.kill_recorded(path)
            rootfs.remove_tree(path)
            removed += 1
        return removed


def check_kernel(name: str, where: Path) -> None:
    """SubstrateUnavailable in one line, saying which and what to do, unless this user can make
    a user namespace, mount an overlay in it and run bwrap's namespaces."""
    missing = next((t for t in TOOLS if shutil.which(t) is None), None)
    if missing is not None:
        raise SubstrateUnavailable(
            f"{name}: {missing} is not installed: run scripts/ensure-bwrap "
            "(apt-get install bubblewrap util-linux)"
        )
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".check-", dir=where) as scratch:
        argv = ["unshare", "--user", "--map-root-user", "--mount", "--", "sh", "-c", CHECK]
        done = subprocess.run([*argv, "sh", scratch], capture_output=True, timeout=60, check=False)
    said = " ".join(done.stderr.decode("utf-8", "replace").split())[:200]
    if done.returncode == 125:
        raise SubstrateUnavailable(f"{name}: {launch.NO_OVERLAY} ({said})")
    if done.returncode != 0 and "unshare" in said:
        raise SubstrateUnavailable(f"{name}: {launch.NO_USERNS} ({said})")
    if done.returncode != 0:
        raise SubstrateUnavailable(f"{name}: bwrap cannot make its namespaces here: {said}")
