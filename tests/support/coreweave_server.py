"""A local stand-in for CoreWeave Sandboxes, for the coreweave substrate's tests (test
infrastructure).

It speaks gRPC (grpcio, as the SDK does) to the unmodified ``cwsandbox`` SDK, reached through
the SDK's own knob ``CWSANDBOX_BASE_URL``, and is built on the servicer base the wheel ships
(``cwsandbox._proto.sandbox_pb2_grpc.SandboxServiceServicer``) and its messages. It serves
``coreweave.sandbox.v1.SandboxService``: ``CreateSandbox``, ``GetSandbox``, ``ListSandboxes``
(small pages), ``DeleteSandbox``, ``StreamExec`` (the SDK's exec: init, a ready frame, stdin,
output frames, the exit), ``ReadFile`` and ``WriteFile`` (file errors as AIP-193 ``ErrorInfo``
details with the SDK's ``CWSANDBOX_FILE_*`` reasons), and ``ConnectSandbox``, which it answers
FAILED_PRECONDITION: it offers no direct mTLS data plane, so the SDK's ``auto`` data plane
falls back to the gateway, as it does where the service offers none. Every request must carry
the API key (``authorization: Bearer KEY``).

Every other call, of this service or any other (``DiscoveryService``, ``VolumeService``...),
fails UNIMPLEMENTED with a message naming it, and is counted in
:attr:`StandInCoreWeave.unknown_calls`: a new SDK version that speaks a call this stand-in
does not know fails the tests loudly.

A sandbox goes through the service's states: PENDING (accepted, waiting for placement:
:attr:`StandInCoreWeave.placement_s`), CREATING (its docker container starting), RUNNING;
DeleteSandbox makes it TERMINATING, then COMPLETED once its container is gone; an image with
no local stand-in is FAILED (``ErrImagePull``). Each sandbox is a real docker container
(``init``, no network, labelled for cleanup) running the request's command, as root in ``/``;
each exec is a ``docker exec``. Registry images map to local docker images
(:attr:`StandInCoreWeave.images`). Its timings are docker's on this machine, never CoreWeave's.

Faults on request: a key other than the server's gets UNAUTHENTICATED;
:meth:`StandInCoreWeave.limit_creates` refuses creates beyond a rate, and
:attr:`StandInCoreWeave.max_sandboxes` beyond a concurrent quota, with RESOURCE_EXHAUSTED;
:attr:`StandInCoreWeave.create_answer_delay_s` answers a create that late (the sandbox exists
from the moment the request arrived, as a create the client gave up on does);
:meth:`StandInCoreWeave.expire` ends a sandbox's life.

Standalone (for ``pytest example_suite --substrate=coreweave`` by hand)::

    PYTHONPATH=tests python -m support.coreweave_server --port 4998  # prints what to export
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import secrets
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import grpc
import grpc.aio
import pytest
from cwsandbox._proto import sandbox_pb2, sandbox_pb2_grpc
from google.protobuf import any_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2, status_pb2

# Imported with the conftest, before pytester's in-process runs, which unload what they import:
# a second copy of the SDK would start a second event-loop thread of its own.
import pytest_rollout_tax.substrates.coreweave  # noqa: F401
from pytest_rollout_tax.errors import SandboxError
from pytest_rollout_tax.substrates import SANDBOX_IMAGE as DEFAULT_IMAGE
from support.docker_exec import exit_code, frames

#: The registry image the coreweave substrate asks for by default (the SDK's default).
DEFAULT_REGISTRY_IMAGE = "python:3.11"
CONTAINER_LABEL = "rollout-tax.coreweave-standin"
SERVICE = "coreweave.sandbox.v1.SandboxService"
DOMAIN = "cwsandbox.com"
S = sandbox_pb2
STDOUT, STDERR = S.ExecStreamOutput.STREAM_STDOUT, S.ExecStreamOutput.STREAM_STDERR
ACTIVE = (S.STATE_PENDING, S.STATE_CREATING, S.STATE_RUNNING, S.STATE_TERMINATING)

#: The file calls as shell lines: ``$1`` the path; exit 80-83 name the error.
_READ = (
    'p="$1"; [ -d "$p" ] && exit 81; [ -e "$p" ] || exit 80; [ -f "$p" ] || exit 84; '
    '[ -r "$p" ] || exit 83; exec cat -- "$p"'
)
_WRITE = (
    'p="$1"; [ -d "$p" ] && { cat >/dev/null; exit 81; }; '
    'mkdir -p -- "$(dirname -- "$p")" 2>/dev/null || { cat >/dev/null; exit 82; }; '
    'cat > "$p" 2>/dev/null || exit 83'
)
_FILE_REASONS = {
    80: (grpc.StatusCode.NOT_FOUND, "CWSANDBOX_FILE_NOT_FOUND", "No such file or directory"),
    81: (grpc.StatusCode.FAILED_PRECONDITION, "CWSANDBOX_FILE_IS_DIRECTORY", "Is a directory"),
    82: (grpc.StatusCode.FAILED_PRECONDITION, "CWSANDBOX_FILE_IO_FAILED", "Not a directory"),
    83: (
        grpc.StatusCode.PERMISSION_DENIED,
        "CWSANDBOX_FILE_PERMISSION_DENIED",
        "Permission denied",
    ),
}


@dataclass
class StandInSandbox:
    sandbox_id: str
    spec: Any  #: the request's ``SandboxSpec``
    created_at: float
    state: int = S.STATE_PENDING
    reason: str = ""
    container: Any = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def message(self) -> Any:
        status = S.SandboxStatus(state=self.state, state_reason=self.reason)
        status.create_time.CopyFrom(_stamp(self.created_at))
        if self.started_at is not None:
            status.start_time.CopyFrom(_stamp(self.started_at))
        if self.ended_at is not None:
            status.end_time.CopyFrom(_stamp(self.ended_at))
        if self.exit_code is not None:
            status.exit_code = self.exit_code
        return S.Sandbox(sandbox_id=self.sandbox_id, spec=self.spec, status=status)


def _stamp(when: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(when * 1e9))
    return stamp


class StandInCoreWeave:
    """The stand-in: the sandbox gateway on one loopback port, in a thread of its own."""

    def __init__(
        self, *, image: str = DEFAULT_IMAGE, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.api_key = f"cwsb-standin-{secrets.token_hex(16)}"
        self.host, self.port = host, port
        #: Registry image name -> the local docker image that plays it.
        self.images = {DEFAULT_REGISTRY_IMAGE: image}
        self.instance_id = secrets.token_hex(6)
        #: Calls served, by method name, e.g. ``CreateSandbox``.
        self.requests: Counter[str] = Counter()
        #: Calls this stand-in does not implement, by full method name.
        self.unknown_calls: Counter[str] = Counter()
        #: How long a new sandbox stays PENDING before its container is made (placement).
        self.placement_s = 0.05
        #: Answer CreateSandbox this many seconds late (the sandbox is made at once).
        self.create_answer_delay_s = 0.0
        #: The organization's concurrent-sandbox quota (None: none): a create beyond it gets
        #: RESOURCE_EXHAUSTED, as the service's quota check answers.
        self.max_sandboxes: int | None = None
        self.creates_per_second: float | None = None
        self.create_burst = 0
        self.rate_limited = 0
        self._tokens, self._refilled = 0.0, 0.0
        self._sandboxes: dict[str, StandInSandbox] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Future[None]] = set()
        self._docker: docker.DockerClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables that point the unmodified SDK (and the coreweave substrate) here."""
        return {"CWSANDBOX_BASE_URL": self.url, "CWSANDBOX_API_KEY": self.api_key}

    def start(self) -> StandInCoreWeave:
        self._docker = docker.from_env(max_pool_size=32)
        started, failure = threading.Event(), []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            server = grpc.aio.server()
            try:
                sandbox_pb2_grpc.add_SandboxServiceServicer_to_server(_Gateway(self), server)
                server.add_generic_rpc_handlers((_Unknown(self),))
                self.port = server.add_insecure_port(f"{self.host}:{self.port}")
                loop.run_until_complete(server.start())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(server.stop(None))
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=serve, name="coreweave-standin", daemon=True)
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

    def __enter__(self) -> StandInCoreWeave:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- test helpers (thread-safe) ------------------------------------------------------------

    def limit_creates(self, per_second: float | None, burst: int | None = None) -> None:
        """Refuse creates beyond ``per_second`` (None: no limit) past a burst of ``burst``
        (default: one second's worth), starting with a full bucket."""
        self.creates_per_second = per_second
        self.create_burst = burst or int(per_second or 0) or 1
        self._tokens, self._refilled = float(self.create_burst), time.monotonic()
        self.rate_limited = 0

    def sandboxes(self) -> list[StandInSandbox]:
        """The sandboxes alive and not asked to end (pending, creating, running), oldest
        first."""
        alive = [s for s in self.active() if s.state != S.STATE_TERMINATING]
        return sorted(alive, key=lambda s: s.created_at)

    def active(self) -> list[StandInSandbox]:
        """The sandboxes the quota counts: not yet ended (terminating ones included)."""
        return [s for s in list(self._sandboxes.values()) if s.state in ACTIVE]

    def expire(self, sandbox_id: str) -> None:
        """End a sandbox's life now, as its lifetime running out would."""
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self.finish(sandbox_id), self._loop)
        future.result(60)

    # -- the service (on the loop) -------------------------------------------------------------

    async def authorize(self, context: Any, name: str) -> None:
        self.requests[name] += 1
        metadata = dict(context.invocation_metadata() or ())
        if metadata.get("authorization") != f"Bearer {self.api_key}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid or missing API key")

    def over_quota(self) -> bool:
        """Whether a create now is beyond :attr:`max_sandboxes` (counted as rate limited)."""
        if self.max_sandboxes is None or len(self.active()) < self.max_sandboxes:
            return False
        self.rate_limited += 1
        return True

    def over_rate_limit(self) -> bool:
        """Whether a create now is beyond the limit: a token bucket that refills at
        :attr:`creates_per_second` and holds :attr:`create_burst`."""
        if self.creates_per_second is None:
            return False
        now = time.monotonic()
        self._tokens = min(
            self.create_burst, self._tokens + (now - self._refilled) * self.creates_per_second
        )
        self._refilled = now
        if self._tokens < 1:
            self.rate_limited += 1
            return True
        self._tokens -= 1
        return False

    async def sandbox(self, sandbox_id: str, context: Any) -> StandInSandbox:
        found = self._sandboxes.get(sandbox_id)
        if found is None:
            await _abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"sandbox {sandbox_id} not found",
                "CWSANDBOX_SANDBOX_NOT_FOUND",
            )
        assert found is not None
        return found

    async def running(self, sandbox_id: str, context: Any) -> StandInSandbox:
        found = await self.sandbox(sandbox_id, context)
        name = S.State.Name(found.state)
        if found.state in (S.STATE_PENDING, S.STATE_CREATING):
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, f"sandbox {sandbox_id} is {name}"
            )
        if found.state != S.STATE_RUNNING:  # it ended: its data plane is gone
            await _abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"sandbox {sandbox_id} is not running ({name})",
                "CWSANDBOX_SANDBOX_NOT_FOUND",
            )
        return found

    def spawn(self, work: Any) -> None:
        """Run ``work`` on the loop, held until it ends."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def new_id(self) -> str:
        return f"sb-{secrets.token_hex(6)}{next(self._ids)}"

    async def place(self, sandbox: StandInSandbox) -> None:
        """PENDING for the placement delay, CREATING while its container starts, RUNNING."""
        await asyncio.sleep(self.placement_s)
        if sandbox.state != S.STATE_PENDING:
            return
        self._set(sandbox, S.STATE_CREATING)
        container = sandbox.spec.containers[0] if sandbox.spec.containers else S.Container()
        local = self.images.get(container.image)
        if local is None:
            self._set(sandbox, S.STATE_FAILED, f"ErrImagePull: image {container.image!r} not found")
            sandbox.ended_at = time.time()
            return
        try:
            sandbox.container = await asyncio.to_thread(
                self._run, sandbox.sandbox_id, local, container
            )
        except docker.errors.APIError as exc:
            self._set(sandbox, S.STATE_FAILED, f"container failed to start: {exc}")
            sandbox.ended_at = time.time()
            return
        if sandbox.state != S.STATE_CREATING:  # deleted while it started
            with contextlib.suppress(docker.errors.APIError):
                await asyncio.to_thread(sandbox.container.remove, force=True)
            return
        sandbox.started_at = time.time()
        self._set(sandbox, S.STATE_RUNNING)
        lifetime = sandbox.spec.max_lifetime_seconds
        if lifetime > 0:
            asyncio.get_running_loop().call_later(
                lifetime, lambda: self.spawn(self.finish(sandbox.sandbox_id))
            )

    def _run(self, name: str, image: str, container: Any) -> Any:
        assert self._docker is not None
        command = [container.command] if container.command else []
        return self._docker.containers.run(
            image,
            [*command, *container.args] or ["sleep", "infinity"],
            detach=True,
            init=True,
            network_mode="none",
            user="root",
            working_dir=container.working_dir or "/",
            environment=dict(container.environment_variables),
            name=f"coreweave-standin-{name}",
            labels={CONTAINER_LABEL: self.instance_id, "coreweave.sandbox_id": name},
        )

    @staticmethod
    def _set(sandbox: StandInSandbox, state: int, reason: str = "") -> None:
        sandbox.state, sandbox.reason = state, reason
        sandbox.changed.set()

    async def finish(self, sandbox_id: str) -> None:
        """TERMINATING, then COMPLETED once its container is removed."""
        sandbox = self._sandboxes[sandbox_id]
        if sandbox.state not in ACTIVE:
            return
        self._set(sandbox, S.STATE_TERMINATING)
        if sandbox.container is not None:  # else place() removes the one it is starting
            with contextlib.suppress(docker.errors.APIError):
                await asyncio.to_thread(sandbox.container.remove, force=True)
        sandbox.exit_code, sandbox.ended_at = 0, time.time()
        self._set(sandbox, S.STATE_COMPLETED)

    async def exec_socket(self, sandbox: StandInSandbox, argv: list[str], env: dict[str, str]):
        """``docker exec`` ``argv`` with stdin open: (the exec's id, its socket)."""
        assert self._docker is not None
        api = self._docker.api
        exec_id = (
            await asyncio.to_thread(
                api.exec_create,
                sandbox.container.id,
                argv,
                stdin=True,
                stdout=True,
                stderr=True,
                environment=[f"{k}={v}" for k, v in env.items()] or None,
            )
        )["Id"]
        sock = await asyncio.to_thread(api.exec_start, exec_id, socket=True)
        return exec_id, sock

    def pump(
        self,
        exec_id: str,
        sock: Any,
        on_output: Callable[[int, bytes], None],
        on_exit: Callable[[int | None], None],
    ) -> None:
        """Relay an exec's output in a thread of its own; then its exit code (None: lost)."""
        assert self._docker is not None
        api = self._docker.api

        def run() -> None:
            code = None
            try:
                for fd, data in frames(sock):
                    on_output(fd, data)
                code = exit_code(api, exec_id)
            except (docker.errors.APIError, OSError, ValueError, SandboxError):
                pass  # the container went away under the command
            finally:
                on_exit(code)

        threading.Thread(target=run, name=f"cw-exec-{exec_id[:8]}", daemon=True).start()


async def _abort(context: Any, code: grpc.StatusCode, message: str, reason: str) -> None:
    """Abort with an AIP-193 ``ErrorInfo`` in the status details, as the service does."""
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN))
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    await context.abort(
        code, message, trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),)
    )


def _settle(future: asyncio.Future[int | None], value: int | None) -> None:
    if not future.done():  # the call may have been cancelled meanwhile
        future.set_result(value)


def _raw_socket(sock: Any) -> socket.socket:
    return getattr(sock, "_sock", sock)


class _Gateway(sandbox_pb2_grpc.SandboxServiceServicer):
    """The calls the SDK makes for create, wait, exec, files, list and stop; every other one
    of the servicer base's calls is refused by name (see :func:`_refuse_the_rest`)."""

    def __init__(self, server: StandInCoreWeave) -> None:
        self.server = server

    async def CreateSandbox(self, request: Any, context: Any) -> Any:
        server = self.server
        await server.authorize(context, "CreateSandbox")
        if server.over_rate_limit():
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"rate limit exceeded: {server.creates_per_second:g} sandbox creates per second",
            )
        if server.over_quota():
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"concurrent sandbox quota exceeded: {server.max_sandboxes} active sandboxes",
            )
        spec = request.sandbox.spec
        if not spec.containers:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "spec.containers is empty")
        sandbox = StandInSandbox(server.new_id(), spec=spec, created_at=time.time())
        server._sandboxes[sandbox.sandbox_id] = sandbox
        server.spawn(server.place(sandbox))
        if server.create_answer_delay_s:
            await asyncio.sleep(server.create_answer_delay_s)
        return sandbox.message()

    async def GetSandbox(self, request: Any, context: Any) -> Any:
        await self.server.authorize(context, "GetSandbox")
        return (await self.server.sandbox(request.sandbox_id, context)).message()

    async def ListSandboxes(self, request: Any, context: Any) -> Any:
        await self.server.authorize(context, "ListSandboxes")
        wanted = set(request.tags)
        found = [
            s
            for s in sorted(self.server._sandboxes.values(), key=lambda s: s.created_at)
            if wanted <= set(s.spec.tags)
            and (request.show_terminated or s.state in ACTIVE)
            and (not request.state or s.state == request.state)
        ]
        start = int(request.page_token or 0)
        page = found[start : start + 2]  # small pages, so the SDK's paging is exercised
        more = start + 2 < len(found)
        return S.ListSandboxesResponse(
            sandboxes=[s.message() for s in page], next_page_token=str(start + 2) if more else ""
        )

    async def DeleteSandbox(self, request: Any, context: Any) -> Any:
        await self.server.authorize(context, "DeleteSandbox")
        sandbox = self.server._sandboxes.get(request.sandbox_id)
        if sandbox is None:
            if request.allow_missing:
                return S.DeleteSandboxResponse()
            await self.server.sandbox(request.sandbox_id, context)
        assert sandbox is not None
        if sandbox.state in ACTIVE:  # terminating from the answer on; gone once removed
            self.server._set(sandbox, S.STATE_TERMINATING)
        self.server.spawn(self.server.finish(sandbox.sandbox_id))
        return S.DeleteSandboxResponse(sandbox=sandbox.message())

    async def ConnectSandbox(self, request: Any, context: Any) -> Any:
        await self.server.authorize(context, "ConnectSandbox")
        await context.abort(
            grpc.StatusCode.FAILED_PRECONDITION,
            "the CoreWeave stand-in offers no direct data plane; use the gateway",
        )

    async def StreamExec(self, request_iterator: AsyncIterator[Any], context: Any) -> Any:
        server = self.server
        await server.authorize(context, "StreamExec")
        first = await anext(aiter(request_iterator), None)
        if first is None or not first.HasField("init"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message is not init")
        init = first.init
        sandbox = await server.running(init.sandbox_id, context)
        try:
            exec_id, sock = await server.exec_socket(sandbox, list(init.command), dict(init.env))
        except docker.errors.APIError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"exec failed: {exc}")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, bytes] | int | None] = asyncio.Queue()
        server.pump(
            exec_id,
            sock,
            lambda fd, data: loop.call_soon_threadsafe(queue.put_nowait, (fd, data)),
            lambda code: loop.call_soon_threadsafe(queue.put_nowait, code),
        )
        raw = _raw_socket(sock)

        async def feed_stdin() -> None:
            with contextlib.suppress(OSError, grpc.aio.AioRpcError, asyncio.CancelledError):
                async for message in request_iterator:
                    if message.HasField("stdin"):
                        await asyncio.to_thread(raw.sendall, message.stdin)
                    elif message.HasField("close"):
                        break
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_WR)  # EOF: the request side ended or said close

        stdin = asyncio.ensure_future(feed_stdin())
        ready = S.ExecStreamReady()
        ready.ready_time.GetCurrentTime()
        await context.write(S.ExecStreamResponse(ready=ready))
        try:
            while True:
                item = await queue.get()
                if isinstance(item, tuple):
                    fd, data = item
                    stream = STDERR if fd == 2 else STDOUT
                    output = S.ExecStreamOutput(stream=stream, data=data)
                    await context.write(S.ExecStreamResponse(output=output))
                    continue
                if item is None:
                    error = S.ExecStreamError(message="the sandbox went away", code="UNAVAILABLE")
                    await context.write(S.ExecStreamResponse(error=error))
                else:
                    ended = S.ExecStreamExit(exit_code=item)
                    ended.completed_time.GetCurrentTime()
                    await context.write(S.ExecStreamResponse(exit=ended))
                return
        finally:
            stdin.cancel()

    async def _file(self, context: Any, name: str, sandbox_id: str, argv: list[str], data: bytes):
        server = self.server
        await server.authorize(context, name)
        sandbox = await server.running(sandbox_id, context)
        exec_id, sock = await server.exec_socket(sandbox, argv, {})
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int | None] = loop.create_future()
        out = bytearray()

        def output(fd: int, chunk: bytes) -> None:
            if fd == 1:
                loop.call_soon_threadsafe(out.extend, chunk)

        server.pump(exec_id, sock, output, lambda c: loop.call_soon_threadsafe(_settle, done, c))
        raw = _raw_socket(sock)
        with contextlib.suppress(OSError):
            await asyncio.to_thread(raw.sendall, data)
            raw.shutdown(socket.SHUT_WR)
        code = await done
        await asyncio.sleep(0)  # the last output chunk was scheduled before the exit
        if code in _FILE_REASONS:
            status, reason, message = _FILE_REASONS[code]
            await _abort(context, status, f"{message}: {argv[-1]}", reason)
        if code != 0:
            await _abort(
                context,
                grpc.StatusCode.INTERNAL,
                f"file operation failed (exit {code})",
                "CWSANDBOX_FILE_IO_FAILED",
            )
        return bytes(out)

    async def ReadFile(self, request: Any, context: Any) -> Any:
        argv = ["sh", "-c", _READ, "read", request.path]
        content = await self._file(context, "ReadFile", request.sandbox_id, argv, b"")
        return S.ReadFileResponse(content=content)

    async def WriteFile(self, request: Any, context: Any) -> Any:
        argv = ["sh", "-c", _WRITE, "write", request.path]
        await self._file(context, "WriteFile", request.sandbox_id, argv, request.content)
        return S.WriteFileResponse()


def _refuse_the_rest(servicer: type) -> None:
    """Every call of the servicer base that ``servicer`` does not define answers UNIMPLEMENTED
    naming it (the generated base's own answer names nothing)."""
    base = sandbox_pb2_grpc.SandboxServiceServicer
    for name in [n for n in vars(base) if not n.startswith("_")]:
        if name in vars(servicer):
            continue

        def make(call: str) -> Any:
            async def refuse(self: Any, request: Any, context: Any) -> None:
                await self.server.refuse(f"{SERVICE}/{call}", context)

            refuse.__name__ = call
            return refuse

        setattr(servicer, name, make(name))


async def _refuse(server: StandInCoreWeave, call: str, context: Any) -> None:
    server.unknown_calls[call] += 1
    await context.abort(
        grpc.StatusCode.UNIMPLEMENTED, f"the CoreWeave stand-in does not implement {call}"
    )


StandInCoreWeave.refuse = _refuse  # type: ignore[attr-defined]
_refuse_the_rest(_Gateway)


class _Unknown(grpc.GenericRpcHandler):
    """Any method of any other service: UNIMPLEMENTED, naming it."""

    def __init__(self, server: StandInCoreWeave) -> None:
        self.server = server

    def service(self, handler_call_details: Any) -> Any:
        call = handler_call_details.method.lstrip("/")

        async def refuse(request_iterator: Any, context: Any) -> None:
            await _refuse(self.server, call, context)

        return grpc.stream_stream_rpc_method_handler(refuse)


# -- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def coreweave_server(docker_client, sandbox_image) -> Iterator[StandInCoreWeave]:
    """The stand-in CoreWeave gateway for this test process (one per xdist worker)."""
    with StandInCoreWeave(image=sandbox_image) as server:
        yield server


@pytest.fixture
def coreweave_env(
    coreweave_server: StandInCoreWeave, monkeypatch: pytest.MonkeyPatch
) -> StandInCoreWeave:
    """Point the cwsandbox SDK at the stand-in through its own environment variables."""
    for name, value in coreweave_server.env().items():
        monkeypatch.setenv(name, value)
    coreweave_server.limit_creates(None)
    coreweave_server.max_sandboxes = None
    coreweave_server.create_answer_delay_s = 0.0
    return coreweave_server


# -- standalone ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted, after printing the variables that point the SDK here."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4998)
    parser.add_argument(
        "--image", default=DEFAULT_IMAGE, help=f"docker image for {DEFAULT_REGISTRY_IMAGE}"
    )
    args = parser.parse_args(argv)
    server = StandInCoreWeave(image=args.image, host=args.host, port=args.port)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with server:
        for name, value in server.env().items():
            print(f"export {name}={value}")
        print(
            f"# coreweave stand-in on {server.url} (docker-backed; not CoreWeave's timings). "
            "Ctrl-C stops."
        )
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
