"""The docker substrate's lifecycle: check the engine, create and start a container, remove it.

Built on the docker SDK's low-level ``APIClient``: a cold start is one create and one start.
Containers run with an init process and ``no-new-privileges`` and carry the ownership labels,
so whatever a crashed or interrupted session leaves behind can be reaped.
"""

from __future__ import annotations

import contextlib
import contextvars
import getpass
import os
import re
import socket
import threading
from collections.abc import Mapping
from typing import Any

from ...core.price import GIB, Resources
from ...core.processes import process_alive
from ...core.record import PhaseClock
from ...core.sandbox import Sandbox
from ...core.shell import ShellTransport
from ...core.substrate import ROLLOUT_LABEL, SESSION_LABEL, Prepare, Substrate
from ...core.transport import Transport
from ...errors import (
    ConfigError,
    RolloutTaxError,
    RuntimeMissing,
    SandboxError,
    SandboxStartError,
    SubstrateUnavailable,
)
from . import gvisor, reset, snapshot, spawner
from .engine import (
    DEFAULT_HOST,
    ENGINE_ERRORS,
    connect,
    docker_errors,
    engine_errors,
    explain,
    requests,
    root_cause,
)
from .exec import DockerExec
from .handle import DockerHandle, FileOwner
from .options import DEFAULT_IMAGE, DockerOptions, memory_bytes
from .shell import DockerShell

#: Which process created a container (``HOST:PID``): reaping spares a live session's sandboxes.
OWNER_LABEL = "rollout-tax.io/owner"
#: The user whose session made a container: ``docker.reap=mine`` reaps only theirs.
USER_LABEL = "rollout-tax.io/user"
#: PID 1's child in every sandbox: keeps the container alive whatever the image's CMD is.
KEEPALIVE = ["sleep", "infinity"]
_BUILTIN_NETWORKS = ("none", "bridge", "host", "default")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")  # not allowed in a container name
#: How to register gVisor in an engine this project did not start.
REGISTER_RUNSC = (
    "scripts/ensure-docker registers it in the engine it starts; elsewhere add "
    '"runtimes": {"runsc": {"path": "/usr/local/lib/rollout-tax/gvisor/runsc", "runtimeArgs": '
    '["--network=none", "--overlay2=none", "--file-access=shared"]}} to the engine\'s daemon.json '
    "(a runsc of release 20240729 or later, e.g. Debian trixie's runsc package) and restart it"
)


class DockerSubstrate(Substrate):
    """Containers on the engine at ``DOCKER_HOST`` (default: the local socket)."""

    kind = "docker"
    Options = DockerOptions
    transports = ("exec", "session")
    resets = True

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)  # checks the options
        #: This process, as the owner label names it (``HOST:PID``).
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        #: This process's user, as the user label names it.
        self.user = current_user()
        self._lock = threading.Lock()
        self._file_owner = FileOwner(self.options.user, self.name)
        self._pull_needed = False
        self._data_root = ""
        #: Set while this context starts and prepares a snapshot's template (a context
        #: variable: the template's create runs in a thread of its own, in a copy of it).
        self._template = contextvars.ContextVar(f"rollout-tax-template-{id(self)}", default=False)
        self.client = connect(self.name)
        self.api = self.client.api
        self._host_config = self.api.create_host_config(
            init=True,
            security_opt=["no-new-privileges"],
            network_mode=self.options.network,
            nano_cpus=int(self.options.cpus * 1e9) if self.options.cpus else None,
            mem_limit=memory_bytes(self.options.memory) if self.options.memory else None,
            pids_limit=self.options.pids_limit,
            runtime=self.options.runtime,
        )

    # -- the substrate interface -------------------------------------------------------------

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> DockerHandle:
        if self._pull_needed:
            self._pull()
            clock.mark("pull", cold_start=False)
        entrypoint = spawner.ENTRYPOINT if self._in_template else KEEPALIVE
        return self._launch(labels, clock, self.options.image, self.api.start, "start", entrypoint)

    @property
    def snapshots(self) -> bool:
        return bool(self.options.snapshot)

    def _snapshot_of(self, prepare: Prepare, timeout: float | None, clock: PhaseClock) -> Any:
        """The template of a snapshot runs its prepare as children of the container's init
        (:mod:`.spawner`): gVisor restores no process that ``docker exec`` started."""
        token = self._template.set(True)
        try:
            return super()._snapshot_of(prepare, timeout, clock)
        finally:
            self._template.reset(token)

    @property
    def _in_template(self) -> bool:
        return self._template.get()

    def _checkpoint(self, sandbox: Sandbox) -> snapshot.Snapshot:
        return snapshot.checkpoint(self.api, sandbox, self._data_root)

    def _restore(
        self, prepared: snapshot.Snapshot, *, labels: dict[str, str], clock: PhaseClock
    ) -> DockerHandle:
        def restore(container_id: str) -> None:
            snapshot.restore(self.api, prepared, container_id, self._data_root)

        return self._launch(labels, clock, prepared.image_id, restore, "restore", KEEPALIVE)

    def _launch(
        self,
        labels: dict[str, str],
        clock: PhaseClock,
        image: str,
        start: Any,
        phase: str,
        entrypoint: list[str],
    ) -> DockerHandle:
        """Create a container of ``image`` (phase ``create``) and ``start`` it (``phase``)."""
        # Unique to this rollout: a container whose create response was lost is removed by it.
        name = _UNSAFE.sub("-", f"rollout-tax-{labels[SESSION_LABEL]}-{labels[ROLLOUT_LABEL]}")
        container_id = None
        try:
            container_id = self.api.create_container(
                image,
                entrypoint=entrypoint,
                working_dir=self.options.workdir,
                user=self.options.user,
                environment=self.options.env or None,
                labels=labels | {OWNER_LABEL: self.owner, USER_LABEL: self.user},
                name=name,
                host_config=self._host_config,
                detach=True,
            )["Id"]
            clock.mark("create")
            start(container_id)
            clock.mark(phase)
        except BaseException as exc:
            # Without an id the create may still have happened (response lost to a timeout or
            # a reset, or interrupted): remove by name, unless the engine refused it (4xx).
            refused = isinstance(exc, docker_errors.APIError) and exc.is_client_error()
            if container_id is not None or not refused:
                with contextlib.suppress(Exception):
                    self._remove(container_id or name)
            raise self._start_error(exc) from None
        return DockerHandle(
            id=container_id,
            workdir=self.options.workdir,
            api=self.api,
            substrate=self.name,
            image=self.options.image,
            owner=self._file_owner,
        )

    def _transport(self, handle: DockerHandle) -> Transport:
        if self._in_template:
            return spawner.SpawnerExec(handle)
        if self.options.transport == "session":
            return ShellTransport(lambda: DockerShell(handle), substrate=self.name)
        return DockerExec(handle)

    def _reset(self, handle: DockerHandle, clock: PhaseClock) -> None:
        reset.reset(self.api, handle)

    def keeps_session(self, handle: DockerHandle) -> bool:
        """A reset from the host spares the session's shell (the helper serving it)."""
        return self.options.transport == "session" and reset.from_host(self.api, handle)

    def destroy(self, handle: DockerHandle) -> None:
        with engine_errors(self.name, f"removing container {handle.id[:12]}"):
            self._remove(handle.id)

    def reap(self, session_id: str | None = None) -> int:
        """Force-remove containers (a snapshot's template with its checkpoint among them) and
        committed snapshot images of ``session_id`` (any session if None) that no live process
        of another session on this host still owns, and with ``reap=mine`` (the default) only
        this user's; return how many were removed."""
        label = f"{SESSION_LABEL}={session_id}" if session_id else SESSION_LABEL
        try:
            found = self.api.containers(all=True, filters={"label": label})
        except ENGINE_ERRORS as exc:
            raise SubstrateUnavailable(
                f"{self.name}: cannot list containers: {root_cause(exc)}"
            ) from None
        removed = 0
        for container in found:
            if self._spares(container.get("Labels") or {}):
                continue
            with contextlib.suppress(RolloutTaxError):
                removed += self._remove(container["Id"])
        with contextlib.suppress(*ENGINE_ERRORS):  # prepared disks (their checkpoints went)
            removed += snapshot.reap_images(self.api, label, self._spares)
        return removed

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Force-remove the containers carrying ``labels`` (one create's: a late create),
        whatever their state; no owner is spared, the tag is this process's own."""
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        try:
            found = self.api.containers(all=True, filters=filters)
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"{self.name}: cannot list containers: {root_cause(exc)}") from None
        removed = 0
        for container in found:
            removed += self._remove(container["Id"])
        return removed

    def _spares(self, labels: dict[str, str]) -> bool:
        """Whether a reap leaves the object labelled ``labels`` alone: another user's (with
        ``reap=mine``), or a live session's of this host. Images committed from a container
        carry its labels, so one rule scopes containers, checkpoints and images alike."""
        if self.options.reap == "mine" and labels.get(USER_LABEL) != self.user:
            return True  # another user's, on a shared engine
        return self._owned_by_live_process(labels.get(OWNER_LABEL))

    @property
    def resources(self) -> Resources:
        memory = self.options.memory
        return Resources(
            vcpus=self.options.cpus, gib=memory_bytes(memory) / GIB if memory else None
        )

    @property
    def endpoint(self) -> str:
        return os.environ.get("DOCKER_HOST") or DEFAULT_HOST

    def ping(self) -> None:
        self.api.ping()

    def close(self) -> None:
        """Remove the prepared snapshots this process made, then release the client."""
        for made in self._snapshots.values():
            if isinstance(made, snapshot.Snapshot):
                with contextlib.suppress(*ENGINE_ERRORS):
                    snapshot.remove(self.api, made)
        self._snapshots.clear()
        self.client.close()

    def _prepare(self) -> None:
        """Before the first start: the image exists (or may be pulled), the network and the
        runtime too. Reaping needs none of them."""
        options = self.options
        try:
            try:
                self.api.inspect_image(options.image)
            except docker_errors.ImageNotFound:
                if options.pull == "never":
                    raise SubstrateUnavailable(self._image_missing()) from None
                self._pull_needed = True
            except docker_errors.APIError as exc:
                if not exc.is_client_error():
                    raise
                raise ConfigError(f"{self.name}.image={options.image!r}: {explain(exc)}") from None
            if options.network not in _BUILTIN_NETWORKS and ":" not in options.network:
                try:
                    self.api.inspect_network(options.network)
                except docker_errors.NotFound:
                    raise ConfigError(
                        f"{self.name}.network={options.network!r}: no such network on this "
                        "engine (docker network ls)"
                    ) from None
            self._check_engine_resources()
        except ENGINE_ERRORS as exc:
            raise SubstrateUnavailable(
                f"{self.name}: the Docker engine failed: {root_cause(exc)}"
            ) from None

    # -- helpers -------------------------------------------------------------------------------

    def _check_engine_resources(self) -> None:
        """The runtime asked for is registered (gVisor's absence skips, with how to register
        it), snapshots have what they need, and the engine has the CPUs asked for."""
        options = self.options
        info = self.api.info()
        runtime = engine_runtime(self.name, options, info)
        self.runtime, self.runtime_release = runtime.name, runtime.release
        self.runtime_platform = runtime.platform
        self._host_config["Runtime"] = runtime.name
        self._data_root = info.get("DockerRootDir") or ""
        ncpu = info.get("NCPU") or 0
        if options.cpus is not None and ncpu and options.cpus > ncpu:
            raise ConfigError(f"{self.name}.cpus={options.cpus:g}: the engine has only {ncpu} CPUs")

    @classmethod
    def check_usage(cls, options: DockerOptions, *, owner: str) -> None:
        """A runtime the engine lacks (but gVisor, whose absence skips) and a snapshot the engine
        cannot take are usage errors, when the engine answers now."""
        if options.runtime is None and not options.snapshot:
            return
        try:
            client = connect(owner)
        except SubstrateUnavailable:  # its rollouts will say so
            return
        try:
            engine_runtime(owner, options, client.api.info())
        except (RuntimeMissing, *ENGINE_ERRORS):
            pass  # a skip, or an engine failing: its rollouts will say so
        finally:
            client.close()

    def _start_error(self, exc: BaseException) -> BaseException:
        """What a failed create or start raises: one line, or the interrupt itself."""
        if isinstance(exc, docker_errors.ImageNotFound):
            return SandboxStartError(self._image_missing())
        if isinstance(exc, docker_errors.APIError):
            return SandboxStartError(
                f"{self.name}: the engine refused the container: {explain(exc)}"
            )
        if isinstance(exc, requests.exceptions.ConnectionError | docker_errors.DockerException):
            return SandboxStartError(
                f"{self.name}: lost the Docker engine while creating a container: {root_cause(exc)}"
            )
        return exc

    def _remove(self, container_id: str) -> int:
        """Force-remove one container with its anonymous volumes; 0 if it was already gone."""
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except docker_errors.NotFound:
            return 0
        except docker_errors.APIError as exc:
            if exc.status_code == 409 and "already in progress" in str(exc.explanation):
                return 0  # another process (the reaper) is removing it right now
            raise SandboxError(
                f"{self.name}: could not remove container {container_id[:12]}: {explain(exc)}"
            ) from None
        return 1

    def _image_missing(self) -> str:
        image = self.options.image
        how = (
            "build it with scripts/ensure-docker"
            if image == DEFAULT_IMAGE
            else f"build it (docker build -t {image} .) or load it"
        )
        return (
            f"{self.name}: image {image} is missing and {self.name}.pull=never; "
            f"{how}, or set {self.name}.pull=missing"
        )

    def _pull(self) -> None:
        """Pull the image once per process (the first rollout records it as phase ``pull``)."""
        with self._lock:
            if not self._pull_needed:
                return
            image = self.options.image
            try:
                for event in self.api.pull(image, stream=True, decode=True):
                    if isinstance(event, dict) and event.get("error"):
                        raise SandboxStartError(
                            f"{self.name}: pulling image {image} failed: {event['error']}"
                        )
                self.api.inspect_image(image)
            except docker_errors.DockerException as exc:
                raise SandboxStartError(
                    f"{self.name}: pulling image {image} failed: {explain(exc)}"
                ) from None
            self._pull_needed = False

    def _owned_by_live_process(self, owner: str | None) -> bool:
        """Whether ``owner`` (HOST:PID) is another process of this host that is still running."""
        host, _, pid_text = (owner or "").rpartition(":")
        if host != socket.gethostname() or not pid_text.isdigit():
            return False
        pid = int(pid_text)
        return pid != os.getpid() and process_alive(pid)


def engine_runtime(name: str, options: DockerOptions, info: dict[str, Any]) -> gvisor.Runtime:
    """The runtime ``options`` run under on the engine ``info`` describes (for gVisor, the one
    of its platform), checked: registered (a missing ``runsc`` is RuntimeMissing, saying how to
    register it), with the network it needs, and able to take snapshots if they are asked for."""
    registered = info.get("Runtimes") or {}
    asked = options.runtime or info.get("DefaultRuntime") or "runc"
    runtime = gvisor.pick(asked, options.platform, registered)
    if runtime not in registered:
        names = ", ".join(sorted(registered)) or "none"
        if runtime != asked:
            raise ConfigError(
                f"{name}.platform={options.platform!r}: no runtime {runtime!r} in this engine "
                f"({names}), and {asked} runs another platform; scripts/ensure-docker registers "
                "runsc-systrap and runsc-ptrace"
            )
        message = f"{name}.runtime={runtime!r}: not registered in this engine ({names})"
        if runtime == "runsc":
            raise RuntimeMissing(f"{message}; {REGISTER_RUNSC}")
        raise ConfigError(message)
    arguments = (registered[runtime] or {}).get("runtimeArgs") or ()
    if "--network=none" in arguments and options.network != "none":
        raise ConfigError(
            f"{name}.network={options.network!r}: this engine runs {runtime} with "
            "--network=none; use network=none"
        )
    if options.snapshot:
        snapshot.check_engine(name, info)
    return gvisor.describe(runtime, registered[runtime])


def current_user() -> str:
    """This process's user name (its uid where the name cannot be found)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
