"""A local stand-in for Modal, for the modal substrate's tests (test infrastructure).

It speaks gRPC (grpclib) to the unmodified ``modal`` SDK, reached through the SDK's own knob
``MODAL_SERVER_URL``, and is built on the servicer bases the wheel ships (``modal_proto``):

- the control plane, ``modal.client.ModalClient``: ``EnvironmentGetOrCreate``,
  ``AppGetOrCreate``, ``ImageGetOrCreate``, ``AuthTokenGet``, and the V2 sandbox calls the SDK
  makes by default: ``SandboxCreateV2`` (which hands out the command router's address),
  ``SandboxGetTaskIdV2``, ``SandboxGetCommandRouterAccess``, ``SandboxTerminateV2``,
  ``SandboxWaitV2``, ``SandboxListV2`` (small pages), ``SandboxTagsGetV2``; every request must
  carry the token (``x-modal-token-id`` / ``x-modal-token-secret``), the V2 calls the auth
  token ``AuthTokenGet`` gave too;
- each sandbox's command router, ``modal.task_command_router.TaskCommandRouter``, on the same
  port: ``TaskExecStart``, ``TaskExecStdioRead``, ``TaskExecWait``, ``TaskExecPoll``,
  ``TaskExecStdinWriteStream``, ``TaskExecStdinStatus``; every request must carry the
  sandbox's JWT.

Every other call of either service fails with UNIMPLEMENTED and a message naming it (and is
counted in :attr:`StandInModal.unknown_calls`): a new SDK version that speaks a call this
stand-in does not know fails the tests loudly.

Every sandbox is a real docker container (``init``, no network, labelled for cleanup), run as
root in ``/`` as Modal's are; each exec is a ``docker exec``. Modal's file API runs its
``modal-sandbox-fs-tools`` binary in the sandbox: the stand-in runs an equivalent shell line
for its ``ReadFile`` and ``WriteFile`` commands, with the same JSON error payloads. Registry
images map to local docker images (:attr:`StandInModal.images`); the setup layer Modal adds
to a registry image is taken as built. Its timings are docker's on this machine, never Modal's.

Faults on request: a token other than the server's gets UNAUTHENTICATED;
:attr:`StandInModal.creates_per_second` refuses creates beyond it with RESOURCE_EXHAUSTED, as
Modal's rate limit does; :meth:`StandInModal.expire` ends a sandbox's life.

Standalone (for ``pytest example_suite --substrate=modal`` by hand)::

    PYTHONPATH=tests python -m support.modal_server --port 4999  # prints the variables to export
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import secrets
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import pytest
from grpclib import GRPCError
from grpclib.const import Status
from grpclib.server import Server
from modal_proto import api_grpc, api_pb2, task_command_router_grpc
from modal_proto import task_command_router_pb2 as sr_pb2

# Imported with the conftest, before pytester's in-process runs, which unload what they import:
# a second copy of the SDK's modules would not recognise the first one's objects.
import pytest_rollout_tax.substrates.modal  # noqa: F401
from pytest_rollout_tax.errors import SandboxError
from pytest_rollout_tax.substrates import SANDBOX_IMAGE as DEFAULT_IMAGE
from support.docker_exec import exit_code, frames

#: The registry image the modal substrate asks for by default, and what it maps to here.
DEFAULT_REGISTRY_IMAGE = "python:3.12-slim-bookworm"
IMAGE_BUILDER_VERSION = "2025.06"
FS_TOOLS = "/__modal/.bin/modal-sandbox-fs-tools"
CONTAINER_LABEL = "rollout-tax.modal-standin"
_OK = api_pb2.GenericResult.GENERIC_STATUS_SUCCESS
_FAILED = api_pb2.GenericResult.GENERIC_STATUS_FAILURE
_TERMINATED = api_pb2.GenericResult.GENERIC_STATUS_TERMINATED

#: ``modal-sandbox-fs-tools`` as shell: ``fail KIND MESSAGE`` is its JSON error payload.
_FAIL = 'fail() { printf \'{"error_kind":"%s","message":"%s"}\' "$1" "$2" >&2; exit 1; }; '
_READ = _FAIL + (
    'p="$1"; [ -d "$p" ] && fail IsDirectory "Is a directory"; '
    '[ -e "$p" ] || fail NotFound "No such file or directory"; '
    '[ -f "$p" ] || fail Other "Not a regular file"; '
    '[ -r "$p" ] || fail PermissionDenied "Permission denied"; exec cat -- "$p"'
)
_WRITE = _FAIL + (
    'p="$1"; [ -d "$p" ] && { cat >/dev/null; fail IsDirectory "Is a directory"; }; '
    'mkdir -p -- "$(dirname -- "$p")" 2>/dev/null '
    '|| { cat >/dev/null; fail NotDirectory "Not a directory"; }; '
    'cat > "$p" 2>/dev/null || fail Other "cannot write"'
)


def _jwt(sandbox_id: str) -> str:
    """An unsigned JWT (the SDK reads its expiry, the stand-in compares it whole)."""

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    claims = {"sub": sandbox_id, "exp": int(time.time()) + 3600, "n": secrets.token_hex(8)}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


@dataclass
class Exec:
    """One command started by ``TaskExecStart``: its output as it came, and its exit."""

    output: dict[int, bytearray] = field(default_factory=lambda: {1: bytearray(), 2: bytearray()})
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    exit_code: int | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    stdin: Any = None  #: the exec's socket, while its stdin is open
    stdin_written: int = 0
    stdin_closed: bool = True


@dataclass
class StandInSandbox:
    sandbox_id: str
    task_id: str
    app_id: str
    container: Any
    tags: dict[str, str]
    jwt: str
    created_at: float
    timeout_s: int
    env: dict[str, str]
    resources: api_pb2.Resources
    execs: dict[str, Exec] = field(default_factory=dict)
    result: api_pb2.GenericResult | None = None
    gone: asyncio.Event = field(default_factory=asyncio.Event)


class StandInModal:
    """The stand-in: control plane and command router on one loopback port, in a thread."""

    def __init__(
        self, *, image: str = DEFAULT_IMAGE, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.token_id = f"ak-standin{secrets.token_hex(8)}"
        self.token_secret = f"as-standin{secrets.token_hex(16)}"
        self.host, self.port = host, port
        #: Registry image name -> the local docker image that plays it.
        self.images = {DEFAULT_REGISTRY_IMAGE: image}
        self.instance_id = secrets.token_hex(6)
        #: Calls served, by method name, e.g. ``SandboxCreate``.
        self.requests: Counter[str] = Counter()
        #: Calls of either service this stand-in does not implement, by name.
        self.unknown_calls: Counter[str] = Counter()
        #: Sandbox creations accepted per second (a bucket of as many, refilled at that
        #: rate); beyond it a create gets RESOURCE_EXHAUSTED, as Modal's limit answers.
        self.creates_per_second: int | None = None
        self.create_burst = 0
        self.rate_limited = 0
        #: Seconds a create's answer is held back once its sandbox exists (a late create).
        self.create_answer_delay_s = 0.0
        self._tokens, self._refilled = 0.0, 0.0
        self.apps: dict[str, str] = {}
        #: What ``AuthTokenGet`` hands out: V2 sandbox calls must carry it.
        self.auth_token = _jwt("auth")
        self._image_ids: dict[str, str] = {}
        self._sandboxes: dict[str, StandInSandbox] = {}
        self._ids = itertools.count(1)
        self._docker: docker.DockerClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Server | None = None

    # -- life cycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables that point the unmodified SDK (and the modal substrate) here."""
        return {
            "MODAL_SERVER_URL": self.url,
            "MODAL_TOKEN_ID": self.token_id,
            "MODAL_TOKEN_SECRET": self.token_secret,
        }

    def start(self) -> StandInModal:
        self._docker = docker.from_env(max_pool_size=32)
        started, failure = threading.Event(), []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                self._server = Server([_ControlPlane(self), _Router(self)])
                loop.run_until_complete(self._server.start(self.host, self.port))
                self.port = self._server._server.sockets[0].getsockname()[1]
            except BaseException as exc:
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            self._server.close()
            loop.run_until_complete(self._server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=serve, name="modal-standin", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop serving and remove every container this stand-in ran."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(60)
        if self._docker is not None:
            label = f"{CONTAINER_LABEL}={self.instance_id}"
            for container in self._docker.containers.list(
                all=True, sparse=True, filters={"label": label}
            ):
                with contextlib.suppress(docker.errors.APIError):
                    container.remove(force=True)
            self._docker.close()

    def __enter__(self) -> StandInModal:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- test helpers (thread-safe) ------------------------------------------------------------

    def limit_creates(self, per_second: int | None, burst: int | None = None) -> None:
        """Refuse creates beyond ``per_second`` (None: no limit) past a burst of ``burst``
        (default: as many), starting with a full bucket."""
        self.creates_per_second = per_second
        self.create_burst = burst or per_second or 0
        self._tokens, self._refilled = float(self.create_burst), time.monotonic()
        self.rate_limited = 0

    def sandboxes(self) -> list[StandInSandbox]:
        """The running sandboxes, oldest first."""
        running = [s for s in list(self._sandboxes.values()) if s.result is None]
        return sorted(running, key=lambda s: s.created_at)

    def expire(self, sandbox_id: str) -> None:
        """End a sandbox's life now, as its lifetime running out would."""
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self.finish(sandbox_id), self._loop)
        future.result(60)

    # -- shared by both services (on the loop) -------------------------------------------------

    def count(self, name: str) -> None:
        self.requests[name] += 1

    def authorize(self, stream: Any, name: str, *, v2: bool = False) -> None:
        """Count the call; refuse it without the token (and, for a V2 sandbox call, without
        the auth token ``AuthTokenGet`` gave)."""
        self.count(name)
        metadata = stream.metadata
        if (metadata.get("x-modal-token-id"), metadata.get("x-modal-token-secret")) != (
            self.token_id,
            self.token_secret,
        ):
            raise GRPCError(Status.UNAUTHENTICATED, "Token ID and/or secret is invalid")
        if v2 and metadata.get("x-modal-auth-token") != self.auth_token:
            raise GRPCError(Status.UNAUTHENTICATED, "missing or invalid auth token")

    def unknown(self, service: str, name: str) -> GRPCError:
        self.unknown_calls[name] += 1
        return GRPCError(
            Status.UNIMPLEMENTED, f"the Modal stand-in does not implement {service}/{name}"
        )

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{secrets.token_hex(6)}{next(self._ids)}"

    def over_rate_limit(self) -> bool:
        """Whether a create now is beyond :attr:`creates_per_second`: a token bucket that
        refills at that rate and holds :attr:`create_burst` (Modal's limit: a rate, plus a
        burst)."""
        if self.creates_per_second is None:
            return False
        now = time.monotonic()
        rate = self.creates_per_second
        self._tokens = min(self.create_burst, self._tokens + (now - self._refilled) * rate)
        self._refilled = now
        if self._tokens < 1:
            self.rate_limited += 1
            return True
        self._tokens -= 1
        return False

    def sandbox(self, sandbox_id: str) -> StandInSandbox:
        found = self._sandboxes.get(sandbox_id)
        if found is None:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found")
        return found

    def by_task(self, task_id: str, stream: Any) -> StandInSandbox:
        found = next((s for s in self._sandboxes.values() if s.task_id == task_id), None)
        if found is None or found.result is not None:
            raise GRPCError(Status.NOT_FOUND, f"Task {task_id} not found")
        if stream.metadata.get("authorization") != f"Bearer {found.jwt}":
            raise GRPCError(Status.UNAUTHENTICATED, "invalid or missing JWT")
        return found

    async def finish(self, sandbox_id: str) -> None:
        """Terminate a sandbox: its container removed, its result TERMINATED."""
        sandbox = self.sandbox(sandbox_id)
        if sandbox.result is None:
            sandbox.result = api_pb2.GenericResult(status=_TERMINATED, exception="terminated")
            with contextlib.suppress(docker.errors.APIError):
                await asyncio.to_thread(sandbox.container.remove, force=True)
            for process in sandbox.execs.values():
                process.done.set()
                process.changed.set()
        sandbox.gone.set()

    async def run_container(self, image: str, name: str, env: dict[str, str]) -> Any:
        assert self._docker is not None
        return await asyncio.to_thread(
            self._docker.containers.run,
            image,
            ["sleep", "infinity"],
            detach=True,
            init=True,
            network_mode="none",
            user="root",
            working_dir="/",
            environment=env,
            name=f"modal-standin-{name}",
            labels={CONTAINER_LABEL: self.instance_id, "modal.sandbox_id": name},
        )

    async def start_exec(self, sandbox: StandInSandbox, request: Any) -> Exec:
        """``docker exec`` the request's command; a pump thread relays its output."""
        assert self._docker is not None
        api = self._docker.api
        argv = list(request.command_args)
        stdin = False
        if argv[:1] == [FS_TOOLS]:
            (command, spec), *_ = json.loads(argv[1]).items()
            if command not in ("ReadFile", "WriteFile"):
                self.unknown_calls[f"fs-tools {command}"] += 1
                raise GRPCError(
                    Status.UNIMPLEMENTED,
                    f"the Modal stand-in does not implement fs-tools command {command}",
                )
            stdin = command == "WriteFile"
            argv = ["sh", "-c", _WRITE if stdin else _READ, "fs-tools", spec["path"]]
        exec_id = (
            await asyncio.to_thread(
                api.exec_create,
                sandbox.container.id,
                argv,
                stdin=stdin,
                stdout=True,
                stderr=True,
                workdir=request.workdir or None,
                environment=[f"{k}={v}" for k, v in _exec_env(request).items()] or None,
            )
        )["Id"]
        sock = await asyncio.to_thread(api.exec_start, exec_id, socket=True)
        process = Exec(stdin=sock if stdin else None, stdin_closed=not stdin)
        loop = asyncio.get_running_loop()

        def relay(fd: int, data: bytes) -> None:
            process.output[fd] += data
            process.changed.set()

        def ended(code: int | None) -> None:
            process.exit_code = code
            process.done.set()
            process.changed.set()

        def pump() -> None:
            code = None
            try:
                for fd, data in frames(sock):
                    loop.call_soon_threadsafe(relay, fd, data)
                code = exit_code(api, exec_id)
            except (docker.errors.APIError, OSError, ValueError, SandboxError):
                pass  # the container went away under the command
            finally:
                loop.call_soon_threadsafe(ended, code)

        threading.Thread(target=pump, name=f"modal-exec-{exec_id[:8]}", daemon=True).start()
        return process


def _exec_env(request: Any) -> dict[str, str]:
    """The variables of an exec: its ``env`` and its inline secret sources."""
    env = dict(request.env)
    for source in request.secret_sources:
        env.update(source.env.contents)
    return env


def _raw_socket(sock: Any) -> socket.socket:
    return getattr(sock, "_sock", sock)


def _with_unknown_calls(base: type, service: str) -> type:
    """``base`` (a generated servicer base) with every abstract call answering UNIMPLEMENTED
    with a message that names it."""

    def make(name: str) -> Any:
        async def unknown(self: Any, stream: Any) -> None:
            raise self.server.unknown(service, name)

        unknown.__name__ = name
        return unknown

    names = sorted(getattr(base, "__abstractmethods__", ()))
    return type(f"Unknown{base.__name__}", (base,), {name: make(name) for name in names})


class _ControlPlane(_with_unknown_calls(api_grpc.ModalClientBase, "modal.client.ModalClient")):
    def __init__(self, server: StandInModal) -> None:
        self.server = server

    async def AppGetOrCreate(self, stream: Any) -> None:
        self.server.authorize(stream, "AppGetOrCreate")
        request = await stream.recv_message()
        app_id = self.server.apps.setdefault(request.app_name, self.server.new_id("ap"))
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app_id))

    async def EnvironmentGetOrCreate(self, stream: Any) -> None:
        self.server.authorize(stream, "EnvironmentGetOrCreate")
        request = await stream.recv_message()
        settings = api_pb2.EnvironmentSettings(image_builder_version=IMAGE_BUILDER_VERSION)
        metadata = api_pb2.EnvironmentMetadata(
            name=request.deployment_name or "main", settings=settings
        )
        await stream.send_message(
            api_pb2.EnvironmentGetOrCreateResponse(environment_id="en-standin", metadata=metadata)
        )

    async def ImageGetOrCreate(self, stream: Any) -> None:
        self.server.authorize(stream, "ImageGetOrCreate")
        request = await stream.recv_message()
        commands = list(request.image.dockerfile_commands)
        base = commands[0].removeprefix("FROM ").strip() if commands else ""
        if base == "base" and request.image.base_images:
            local = self.server._image_ids.get(request.image.base_images[0].image_id)
        else:
            local = self.server.images.get(base)
        image_id = self.server.new_id("im")
        if local is None:
            result = api_pb2.GenericResult(
                status=_FAILED, exception=f"pull access denied for {base}: image not found"
            )
        else:
            self.server._image_ids[image_id] = local
            result = api_pb2.GenericResult(status=_OK)
        await stream.send_message(
            api_pb2.ImageGetOrCreateResponse(image_id=image_id, result=result)
        )

    async def AuthTokenGet(self, stream: Any) -> None:
        self.server.authorize(stream, "AuthTokenGet")
        await stream.recv_message()
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=self.server.auth_token))

    async def SandboxCreateV2(self, stream: Any) -> None:
        server = self.server
        server.authorize(stream, "SandboxCreateV2", v2=True)
        request = await stream.recv_message()
        if server.over_rate_limit():
            raise GRPCError(
                Status.RESOURCE_EXHAUSTED,
                f"Rate limit exceeded: {server.creates_per_second} sandbox creations per second",
            )
        definition = request.definition
        image = server._image_ids.get(definition.image_id)
        if image is None:
            raise GRPCError(Status.NOT_FOUND, f"Image {definition.image_id} not found")
        env: dict[str, str] = {}
        for source in request.secret_sources:
            if source.secret_id:
                raise GRPCError(Status.UNIMPLEMENTED, "the Modal stand-in has no named secrets")
            env.update(source.env.contents)
        sandbox_id = server.new_id("sb")
        container = await server.run_container(image, sandbox_id, env)
        sandbox = server._sandboxes[sandbox_id] = StandInSandbox(
            sandbox_id=sandbox_id,
            task_id=server.new_id("ta"),
            app_id=request.app_id,
            container=container,
            tags={t.tag_name: t.tag_value for t in request.tags},
            jwt=_jwt(sandbox_id),
            created_at=time.time(),
            timeout_s=definition.timeout_secs,
            env=env,
            resources=definition.resources,
        )
        if server.create_answer_delay_s:  # the sandbox is listed, its create not yet answered
            await asyncio.sleep(server.create_answer_delay_s)
        access = api_pb2.CommandRouterAccess(jwt=sandbox.jwt, url=server.url)
        await stream.send_message(
            api_pb2.SandboxCreateV2Response(
                sandbox_id=sandbox_id, task_id=sandbox.task_id, command_router_access=access
            )
        )

    async def SandboxGetTaskIdV2(self, stream: Any) -> None:
        self.server.authorize(stream, "SandboxGetTaskIdV2", v2=True)
        request = await stream.recv_message()
        sandbox = self.server.sandbox(request.sandbox_id)
        response = api_pb2.SandboxGetTaskIdResponse(task_id=sandbox.task_id)
        if sandbox.result is not None:
            response.task_result.CopyFrom(sandbox.result)
        await stream.send_message(response)

    async def SandboxGetCommandRouterAccess(self, stream: Any) -> None:
        self.server.authorize(stream, "SandboxGetCommandRouterAccess", v2=True)
        request = await stream.recv_message()
        sandbox = next(
            (
                s
                for s in self.server._sandboxes.values()
                if request.sandbox_id in ("", s.sandbox_id) and request.task_id in ("", s.task_id)
            ),
            None,
        )
        if sandbox is None or sandbox.result is not None:
            raise GRPCError(
                Status.NOT_FOUND, f"Sandbox {request.sandbox_id or request.task_id} not found"
            )
        await stream.send_message(
            api_pb2.SandboxGetCommandRouterAccessResponse(jwt=sandbox.jwt, url=self.server.url)
        )

    async def SandboxTerminateV2(self, stream: Any) -> None:
        self.server.authorize(stream, "SandboxTerminateV2", v2=True)
        request = await stream.recv_message()
        await self.server.finish(request.sandbox_id)
        await stream.send_message(api_pb2.SandboxTerminateResponse())

    async def SandboxWaitV2(self, stream: Any) -> None:
        self.server.authorize(stream, "SandboxWaitV2", v2=True)
        request = await stream.recv_message()
        sandbox = self.server.sandbox(request.sandbox_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sandbox.gone.wait(), request.timeout or 0.001)
        response = api_pb2.SandboxWaitResponse()
        if sandbox.result is not None:
            response.result.CopyFrom(sandbox.result)
        await stream.send_message(response)

    async def SandboxListV2(self, stream: Any) -> None:
        self.server.authorize(stream, "SandboxListV2", v2=True)
        request = await stream.recv_message()
        wanted = {t.tag_name: t.tag_value for t in request.tags}
        before = request.before_timestamp or float("inf")
        found = [
            s
            for s in self.server.sandboxes()
            if (not request.app_id or s.app_id == request.app_id)
            and wanted.items() <= s.tags.items()
            and s.created_at < before
        ]
        found.sort(key=lambda s: s.created_at, reverse=True)  # newest first, as Modal pages
        infos = [
            api_pb2.SandboxInfo(
                id=s.sandbox_id,
                created_at=s.created_at,
                app_id=s.app_id,
                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in s.tags.items()],
                task_info=api_pb2.TaskInfo(id=s.task_id, sandbox_id=s.sandbox_id),
            )
            for s in found[:2]  # small pages, so the SDK's paging is exercised
        ]
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=infos))

    async def SandboxTagsGetV2(self, stream: Any) -> None:
        self.server.authorize(stream, "SandboxTagsGetV2", v2=True)
        request = await stream.recv_message()
        tags = self.server.sandbox(request.sandbox_id).tags
        await stream.send_message(
            api_pb2.SandboxTagsGetResponse(
                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in tags.items()]
            )
        )


class _Router(
    _with_unknown_calls(
        task_command_router_grpc.TaskCommandRouterBase,
        "modal.task_command_router.TaskCommandRouter",
    )
):
    def __init__(self, server: StandInModal) -> None:
        self.server = server

    def _exec(self, sandbox: StandInSandbox, exec_id: str) -> Exec:
        process = sandbox.execs.get(exec_id)
        if process is None:
            raise GRPCError(Status.NOT_FOUND, f"Exec {exec_id} not found")
        return process

    async def TaskExecStart(self, stream: Any) -> None:
        self.server.count("TaskExecStart")
        request = await stream.recv_message()
        sandbox = self.server.by_task(request.task_id, stream)
        if request.exec_id not in sandbox.execs:  # the exec id is the idempotency key
            try:
                process = await self.server.start_exec(sandbox, request)
            except docker.errors.APIError as exc:
                raise GRPCError(Status.NOT_FOUND, f"Task {request.task_id}: {exc}") from None
            sandbox.execs[request.exec_id] = process
        await stream.send_message(sr_pb2.TaskExecStartResponse())

    async def TaskExecStdioRead(self, stream: Any) -> None:
        self.server.count("TaskExecStdioRead")
        request = await stream.recv_message()
        sandbox = self.server.by_task(request.task_id, stream)
        process = self._exec(sandbox, request.exec_id)
        fd = 2 if request.file_descriptor == sr_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR else 1
        offset = request.offset
        while True:
            process.changed.clear()
            data = bytes(process.output[fd][offset:])
            if data:
                offset += len(data)
                await stream.send_message(sr_pb2.TaskExecStdioReadResponse(data=data))
                continue
            if process.done.is_set():
                return
            await process.changed.wait()

    async def _exit(self, stream: Any, name: str, response_type: Any, wait: bool) -> None:
        self.server.count(name)
        request = await stream.recv_message()
        sandbox = self.server.by_task(request.task_id, stream)
        process = self._exec(sandbox, request.exec_id)
        if wait:
            await process.done.wait()
        response = response_type()
        if process.done.is_set():
            if process.exit_code is None:
                raise GRPCError(Status.NOT_FOUND, f"Task {request.task_id} has ended")
            response.code = process.exit_code
        await stream.send_message(response)

    async def TaskExecWait(self, stream: Any) -> None:
        await self._exit(stream, "TaskExecWait", sr_pb2.TaskExecWaitResponse, wait=True)

    async def TaskExecPoll(self, stream: Any) -> None:
        await self._exit(stream, "TaskExecPoll", sr_pb2.TaskExecPollResponse, wait=False)

    async def TaskExecStdinWriteStream(self, stream: Any) -> None:
        self.server.count("TaskExecStdinWriteStream")
        first = await stream.recv_message()
        sandbox = self.server.by_task(first.start.task_id, stream)
        process = self._exec(sandbox, first.start.exec_id)
        if process.stdin is None:
            raise GRPCError(Status.FAILED_PRECONDITION, "stdin of this exec is closed")
        raw = _raw_socket(process.stdin)
        async for message in stream:
            if message.HasField("data"):
                with contextlib.suppress(OSError):  # the command may have exited early
                    await asyncio.to_thread(raw.sendall, message.data)
                process.stdin_written += len(message.data)
            if message.HasField("end"):
                with contextlib.suppress(OSError):
                    raw.shutdown(socket.SHUT_WR)
                process.stdin, process.stdin_closed = None, True
        await stream.send_message(sr_pb2.TaskExecStdinWriteStreamResponse())

    async def TaskExecStdinStatus(self, stream: Any) -> None:
        self.server.count("TaskExecStdinStatus")
        request = await stream.recv_message()
        process = self._exec(self.server.by_task(request.task_id, stream), request.exec_id)
        await stream.send_message(
            sr_pb2.TaskExecStdinStatusResponse(
                num_bytes_written=process.stdin_written, closed=process.stdin_closed
            )
        )


# -- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def modal_server(docker_client, sandbox_image) -> Iterator[StandInModal]:
    """The stand-in Modal service for this test process (one per xdist worker)."""
    with StandInModal(image=sandbox_image) as server:
        yield server


@pytest.fixture
def modal_env(modal_server: StandInModal, monkeypatch: pytest.MonkeyPatch) -> StandInModal:
    """Point the Modal SDK at the stand-in through its own environment variables."""
    for name in ("MODAL_PROFILE", "MODAL_ENVIRONMENT", "MODAL_CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in modal_server.env().items():
        monkeypatch.setenv(name, value)
    modal_server.limit_creates(None)
    return modal_server


# -- standalone ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted, after printing the variables that point the SDK here."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4999)
    parser.add_argument(
        "--image", default=DEFAULT_IMAGE, help=f"docker image for {DEFAULT_REGISTRY_IMAGE}"
    )
    args = parser.parse_args(argv)
    server = StandInModal(image=args.image, host=args.host, port=args.port)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with server:
        for name, value in server.env().items():
            print(f"export {name}={value}")
        print(
            f"# modal stand-in on {server.url} (docker-backed; not Modal's timings). Ctrl-C stops."
        )
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
