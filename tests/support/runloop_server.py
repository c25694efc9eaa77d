"""A local stand-in for Runloop (https://runloop.ai), for the runloop substrate's tests.

It speaks the REST protocol of the ``runloop-api-client`` SDK to the unmodified SDK, reached
through the SDK's own ``RUNLOOP_BASE_URL``, every request authenticated by
``Authorization: Bearer <key>``; answers are the SDK's own models (``DevboxView``,
``DevboxListView``, ``DevboxAsyncExecutionDetailView``, ``ExecutionUpdateChunk``):

- devboxes: ``POST /v1/devboxes`` (the devbox is ``provisioning``, then ``initializing``
  while its boot script makes the default user, then ``running``), ``GET /v1/devboxes``
  (cursor pages of two, ``status`` filter), ``GET /v1/devboxes/{id}``,
  ``POST /v1/devboxes/{id}/wait_for_status`` (a long poll: 408 when it runs out, as
  Runloop's does), ``POST /v1/devboxes/{id}/shutdown``;
- commands, each in a fresh login shell of the default user from its home, as Runloop runs
  them: ``POST /v1/devboxes/{id}/execute`` (waits up to ``optimistic_timeout``),
  ``execute_async`` (with ``attach_stdin``), ``GET .../executions/{eid}``,
  ``POST .../executions/{eid}/wait_for_status`` (408 when it runs out),
  ``POST .../executions/{eid}/send_std_in``, and the server-sent events
  ``GET .../executions/{eid}/stream_stdout_updates`` and ``stream_stderr_updates``; an answer
  carries the last ``last_n`` lines of each stream (100 by default) and says whether it cut;
- files: ``POST /v1/devboxes/{id}/upload_file`` (multipart) and ``download_file``, paths
  relative to the user's home.

Any other call is answered 501 with a body naming it, and counted in
:attr:`StandInRunloop.unknown`: the fixture fails the test that made it, so a new SDK whose
protocol drifted fails loudly. Every devbox is a real docker container (``init``, no network,
labelled for cleanup); every command a ``docker exec``. Its timings are docker's on this
machine, never Runloop's.

Faults on request: any key but the server's gets 401; a blueprint name not configured gets
404; :meth:`StandInRunloop.limit_creates` answers 429 to creates beyond a rate;
:attr:`StandInRunloop.create_delay` holds a create's answer (the devbox exists meanwhile), as
a slow control plane would past a client's timeout.

Standalone (for ``pytest example_suite --substrate=runloop`` by hand)::

    PYTHONPATH=tests python -m support.runloop_server --port 3997  # prints the variables to export
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import io
import itertools
import posixpath
import secrets
import signal
import socket
import sys
import tarfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import pytest
from aiohttp import web
from runloop_api_client.types import (
    DevboxAsyncExecutionDetailView,
    DevboxListView,
    DevboxView,
)
from runloop_api_client.types.devboxes import ExecutionUpdateChunk
from runloop_api_client.types.shared import LaunchParameters

from pytest_rollout_tax.errors import SandboxError
from pytest_rollout_tax.substrates import SANDBOX_IMAGE as DEFAULT_IMAGE
from support.docker_exec import exit_code, frames, run

#: Docker label on every container the stand-in runs (value: the server's instance id).
CONTAINER_LABEL = "rollout-tax.runloop-standin"
#: The blueprint a create without one gets (Runloop's default devbox image).
DEFAULT_BLUEPRINT = "runloop-default"
#: Runloop's default user, whose login shell runs every command from its home.
USER, HOME = "user", "/home/user"
#: What the devbox's boot runs while it is ``initializing``.
BOOT_SCRIPT = f"id -u {USER} >/dev/null 2>&1 || useradd -m -d {HOME} -s /bin/bash {USER}"
#: Lines of each stream an execution's answer carries by default (``last_n``).
LAST_N = 100
#: The longest a long poll is held (Runloop's server-side clamp, as the SDK mirrors it).
LONG_POLL_MAX_S = 30.0
#: Create fields the stand-in honours; any other one set is refused with a 400 naming it.
CREATE_FIELDS = {"blueprint_name", "environment_variables", "launch_parameters", "metadata", "name"}
#: What a devbox's status may become from each status, for the long polls.
BOOTING = ("provisioning", "initializing")


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"message": message, "status": status}, status=status)


@dataclass
class Execution:
    """One command: its output as it came (decoded as it arrived), its exit."""

    id: str
    devbox_id: str
    text: dict[int, list[str]] = field(default_factory=lambda: {1: [], 2: []})
    decoders: dict[int, Any] = field(
        default_factory=lambda: {
            fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in (1, 2)
        }
    )
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    exit_status: int | None = None
    stdin: Any = None  #: the exec's socket, while its stdin is open

    def add(self, fd: int, data: bytes, final: bool = False) -> None:
        text = self.decoders[fd].decode(data, final)
        if text:
            self.text[fd].append(text)
        self.changed.set()

    def output(self, fd: int) -> str:
        return "".join(self.text[fd])

    def view(self, last_n: int = LAST_N) -> DevboxAsyncExecutionDetailView:
        status = "completed" if self.done.is_set() else "running"
        answer = DevboxAsyncExecutionDetailView(
            devbox_id=self.devbox_id, execution_id=self.id, status=status
        )
        if self.done.is_set():
            answer.exit_status = self.exit_status
            answer.stdout, answer.stdout_truncated = _tail(self.output(1), last_n)
            answer.stderr, answer.stderr_truncated = _tail(self.output(2), last_n)
        return answer


def _tail(text: str, lines: int) -> tuple[str, bool]:
    """The last ``lines`` lines of ``text``, and whether any were left out."""
    kept = text.splitlines(keepends=True)[-lines:] if lines > 0 else []
    tail = "".join(kept)
    return tail, len(tail) < len(text)


@dataclass
class StandInDevbox:
    id: str
    image: str
    blueprint: str
    metadata: dict[str, str]
    env: dict[str, str]
    launch: dict[str, Any]
    name: str | None
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    status: str = "provisioning"
    transitions: list[dict[str, Any]] = field(default_factory=list)
    container: Any = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    executions: dict[str, Execution] = field(default_factory=dict)
    shutdown_reason: str | None = None

    def move(self, status: str) -> None:
        self.status = status
        self.transitions.append({"status": status, "transition_time_ms": int(time.time() * 1000)})
        self.changed.set()


class StandInRunloop:
    """The stand-in server: the whole API on one loopback port, in a thread."""

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.api_key = api_key or f"ak_standin_{secrets.token_hex(16)}"
        self.host, self.port = host, port
        #: Blueprint name -> the docker image its devboxes run.
        self.blueprints = {DEFAULT_BLUEPRINT: image}
        self.instance_id = secrets.token_hex(6)
        #: Requests served, by ``METHOD route``, e.g. ``POST /v1/devboxes``.
        self.requests: Counter[str] = Counter()
        #: Calls the stand-in does not know, as ``METHOD path``: a protocol drift.
        self.unknown: list[str] = []
        #: Seconds a create's answer is held after the devbox exists (a slow control plane).
        self.create_delay = 0.0
        self.creates_per_second: float | None = None
        self.creates_burst: float | None = None
        self._bucket: tuple[float, float] | None = None
        self.rate_limited = 0
        self._devboxes: dict[str, StandInDevbox] = {}
        self._ids = itertools.count(1)
        self._docker: docker.DockerClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables that point the unmodified SDK (and the runloop substrate) here."""
        return {"RUNLOOP_BASE_URL": self.url, "RUNLOOP_API_KEY": self.api_key}

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> StandInRunloop:
        """Serve in a background thread; return once the port is bound."""
        self._docker = docker.from_env(max_pool_size=32)
        for image in self.blueprints.values():
            self._docker.images.get(image)  # never pull: a missing image is an error
        ready: dict[str, BaseException] = {}
        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loop.set_default_executor(ThreadPoolExecutor(32, thread_name_prefix="runloop-standin"))
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:
                ready["error"] = exc
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=serve, name="runloop-standin", daemon=True)
        self._thread.start()
        started.wait()
        if "error" in ready:
            raise ready["error"]
        return self

    def stop(self) -> None:
        """Close the port, join the thread and remove every container."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(60)
        if self._docker is not None:
            for container in self._docker.containers.list(
                all=True, sparse=True, filters={"label": f"{CONTAINER_LABEL}={self.instance_id}"}
            ):
                with contextlib.suppress(docker.errors.APIError):
                    container.remove(force=True)
            self._docker.close()

    def __enter__(self) -> StandInRunloop:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- test helpers --------------------------------------------------------------------------

    def limit_creates(self, per_second: float | None, burst: float | None = None) -> None:
        """Answer 429 to creates beyond ``per_second`` (None: no limit), from now on, with a
        bucket of ``burst`` creates (default: a second's worth)."""
        self.creates_per_second, self._bucket, self.rate_limited = per_second, None, 0
        self.creates_burst = burst

    def devboxes(self, *, live: bool = True) -> list[StandInDevbox]:
        """The devboxes (only those not shut down, unless ``live`` is false), oldest first."""
        found = [d for d in list(self._devboxes.values()) if not live or d.status != "shutdown"]
        return sorted(found, key=lambda d: d.created_ms)

    # -- the service ---------------------------------------------------------------------------

    async def _listen(self) -> None:
        app = web.Application(client_max_size=1 << 30, middlewares=[self._count])
        add = app.router.add_route
        box, run_ = "/v1/devboxes/{devbox_id}", "/v1/devboxes/{devbox_id}/executions/{execution_id}"
        add("POST", "/v1/devboxes", self._create)
        add("GET", "/v1/devboxes", self._list)
        add("GET", box, self._get)
        add("POST", f"{box}/wait_for_status", self._wait)
        add("POST", f"{box}/shutdown", self._shutdown)
        add("POST", f"{box}/execute", self._execute)
        add("POST", f"{box}/execute_async", self._execute_async)
        add("POST", f"{box}/upload_file", self._upload)
        add("POST", f"{box}/download_file", self._download)
        add("GET", run_, self._execution)
        add("POST", f"{run_}/wait_for_status", self._wait_execution)
        add("POST", f"{run_}/send_std_in", self._send_std_in)
        add("GET", f"{run_}/stream_stdout_updates", self._stream)
        add("GET", f"{run_}/stream_stderr_updates", self._stream)
        add("*", "/{tail:.*}", self._unknown)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    @web.middleware
    async def _count(self, request: web.Request, handler: Any) -> web.StreamResponse:
        route = request.match_info.route.resource
        canonical = route.canonical if route is not None else request.path
        self.requests[f"{request.method} {canonical}"] += 1
        authorized = request.headers.get("Authorization", "") == f"Bearer {self.api_key}"
        if handler is not self._unknown and not authorized:
            return _error(401, "Unauthorized: invalid API key")
        return await handler(request)

    async def _unknown(self, request: web.Request) -> web.Response:
        call = f"{request.method} {request.path}"
        self.unknown.append(call)
        answer = _error(501, f"the Runloop stand-in does not know the call {call}")
        answer.headers["x-should-retry"] = "false"  # the SDK retries a 5xx otherwise
        return answer

    def _over_rate_limit(self) -> bool:
        """Whether a create now exceeds :attr:`creates_per_second`: a token bucket of that
        rate holding :attr:`creates_burst` (else a token is taken)."""
        rate = self.creates_per_second
        if rate is None:
            return False
        now = time.monotonic()
        size = float(rate if self.creates_burst is None else self.creates_burst)
        tokens, then = self._bucket or (size, now)
        tokens = min(size, tokens + (now - then) * rate)
        if tokens < 1.0:
            self._bucket = (tokens, now)
            self.rate_limited += 1
            return True
        self._bucket = (tokens - 1.0, now)
        return False

    def _view(self, devbox: StandInDevbox) -> dict[str, Any]:
        view = DevboxView(
            id=devbox.id,
            capabilities=[],
            create_time_ms=devbox.created_ms,
            launch_parameters=LaunchParameters(**devbox.launch),
            metadata=devbox.metadata,
            state_transitions=devbox.transitions,
            status=devbox.status,
            blueprint_id=f"bpt_{devbox.blueprint}",
            name=devbox.name,
            shutdown_reason=devbox.shutdown_reason,
            initiator_type="api",
        )
        return view.model_dump(mode="json", exclude_none=True)

    def _devbox(self, request: web.Request) -> StandInDevbox | web.Response:
        devbox = self._devboxes.get(request.match_info["devbox_id"])
        if devbox is None:
            return _error(404, f"Devbox {request.match_info['devbox_id']} not found")
        return devbox

    def _running(self, request: web.Request) -> StandInDevbox | web.Response:
        devbox = self._devbox(request)
        if isinstance(devbox, StandInDevbox) and devbox.status != "running":
            return _error(400, f"Devbox {devbox.id} is not running (status {devbox.status})")
        return devbox

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        unsupported = sorted(k for k, v in body.items() if v is not None and k not in CREATE_FIELDS)
        if unsupported:
            return _error(400, f"the Runloop stand-in does not support {', '.join(unsupported)}")
        if self._over_rate_limit():
            return _error(429, "Too many requests: devbox creation rate limit exceeded")
        blueprint = body.get("blueprint_name") or DEFAULT_BLUEPRINT
        if blueprint not in self.blueprints:
            return _error(404, f"Blueprint with name {blueprint} not found")
        devbox = StandInDevbox(
            id=f"dbx_{secrets.token_hex(8)}{next(self._ids)}",
            image=self.blueprints[blueprint],
            blueprint=blueprint,
            metadata=dict(body.get("metadata") or {}),
            env=dict(body.get("environment_variables") or {}),
            launch=dict(body.get("launch_parameters") or {}),
            name=body.get("name"),
        )
        devbox.move("provisioning")
        self._devboxes[devbox.id] = devbox
        asyncio.get_running_loop().create_task(self._boot(devbox))
        if self.create_delay:
            await asyncio.sleep(self.create_delay)
        return web.json_response(self._view(devbox))

    async def _boot(self, devbox: StandInDevbox) -> None:
        """Run the devbox's container (``provisioning``), its boot script (``initializing``);
        then it is ``running``, or ``failure``."""
        assert self._docker is not None
        try:
            devbox.container = await asyncio.to_thread(
                self._docker.containers.run,
                devbox.image,
                ["sleep", "infinity"],
                detach=True,
                init=True,
                network_disabled=True,
                environment=devbox.env,
                labels={CONTAINER_LABEL: self.instance_id, "runloop.devbox_id": devbox.id},
            )
            if devbox.status == "shutdown":  # shut down while it was provisioned
                await asyncio.to_thread(devbox.container.remove, force=True)
                return
            devbox.move("initializing")
            booted = await asyncio.to_thread(run, devbox.container, ["sh", "-c", BOOT_SCRIPT])
        except docker.errors.APIError:
            booted = None
        if devbox.status == "shutdown":
            return
        devbox.move("running" if booted is not None and booted.exit_code == 0 else "failure")

    async def _list(self, request: web.Request) -> web.Response:
        wanted = request.query.get("status")
        limit = min(int(request.query.get("limit") or 20), 2)  # small pages: paging is exercised
        after = request.query.get("starting_after")
        found = [d for d in self.devboxes(live=False) if wanted in (None, d.status)]
        if after is not None:
            ids = [d.id for d in found]
            found = found[ids.index(after) + 1 :] if after in ids else []
        page = found[:limit]
        view = DevboxListView(
            devboxes=[self._view(d) for d in page],  # type: ignore[misc]
            has_more=len(found) > limit,
            total_count=len(found),
        )
        return web.json_response(view.model_dump(mode="json", exclude_none=True))

    async def _get(self, request: web.Request) -> web.Response:
        devbox = self._devbox(request)
        return devbox if isinstance(devbox, web.Response) else web.json_response(self._view(devbox))

    async def _wait(self, request: web.Request) -> web.Response:
        devbox = self._devbox(request)
        if isinstance(devbox, web.Response):
            return devbox
        body = await request.json()
        statuses = body.get("statuses") or []
        deadline = time.monotonic() + min(float(body.get("timeout_seconds") or 0), LONG_POLL_MAX_S)
        while devbox.status not in statuses:
            devbox.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(devbox.changed.wait(), max(deadline - time.monotonic(), 0))
            if time.monotonic() >= deadline and devbox.status not in statuses:
                return _error(408, f"Devbox {devbox.id} did not reach {statuses} in time")
        return web.json_response(self._view(devbox))

    async def _shutdown(self, request: web.Request) -> web.Response:
        devbox = self._devbox(request)
        if isinstance(devbox, web.Response):
            return devbox
        if devbox.status != "shutdown":
            devbox.shutdown_reason = "api_shutdown"
            devbox.move("shutdown")
            if devbox.container is not None:
                with contextlib.suppress(docker.errors.APIError):
                    await asyncio.to_thread(devbox.container.remove, force=True)
            for execution in devbox.executions.values():
                execution.done.set()
                execution.changed.set()
        return web.json_response(self._view(devbox))

    # -- commands ------------------------------------------------------------------------------

    async def _start(self, devbox: StandInDevbox, command: str, stdin: bool) -> Execution:
        """``docker exec`` the command in a login shell of the user, from its home; a pump
        thread relays its output."""
        assert self._docker is not None
        api = self._docker.api
        exec_id = (
            await asyncio.to_thread(
                api.exec_create,
                devbox.container.id,
                ["bash", "-lc", command],
                stdin=stdin,
                stdout=True,
                stderr=True,
                user=USER,
                workdir=HOME,
            )
        )["Id"]
        sock = await asyncio.to_thread(api.exec_start, exec_id, socket=True)
        execution = Execution(id=f"exe_{secrets.token_hex(8)}", devbox_id=devbox.id)
        execution.stdin = sock if stdin else None
        devbox.executions[execution.id] = execution
        loop = asyncio.get_running_loop()

        def ended(code: int | None) -> None:
            execution.add(1, b"", final=True)
            execution.add(2, b"", final=True)
            execution.exit_status = code
            execution.stdin = None
            execution.done.set()

        def pump() -> None:
            code = None
            try:
                for fd, data in frames(sock):
                    loop.call_soon_threadsafe(execution.add, fd, data)
                code = exit_code(api, exec_id)
            except (docker.errors.APIError, OSError, ValueError, SandboxError):
                pass  # the container went away under the command
            finally:
                loop.call_soon_threadsafe(ended, code)

        threading.Thread(target=pump, name=f"runloop-exec-{exec_id[:8]}", daemon=True).start()
        return execution

    def _execution_of(self, request: web.Request) -> Execution | web.Response:
        devbox = self._devbox(request)
        if isinstance(devbox, web.Response):
            return devbox
        execution = devbox.executions.get(request.match_info["execution_id"])
        if execution is None:
            return _error(404, f"Execution {request.match_info['execution_id']} not found")
        return execution

    async def _execute(self, request: web.Request) -> web.Response:
        devbox = self._running(request)
        if isinstance(devbox, web.Response):
            return devbox
        body = await request.json()
        execution = await self._start(devbox, body["command"], stdin=False)
        hold = min(float(body.get("optimistic_timeout") or 25), 25.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(execution.done.wait(), hold)
        last_n = int(request.query.get("last_n") or LAST_N)
        return web.json_response(execution.view(last_n).model_dump(mode="json", exclude_none=True))

    async def _execute_async(self, request: web.Request) -> web.Response:
        devbox = self._running(request)
        if isinstance(devbox, web.Response):
            return devbox
        body = await request.json()
        execution = await self._start(devbox, body["command"], stdin=bool(body.get("attach_stdin")))
        return web.json_response(execution.view().model_dump(mode="json", exclude_none=True))

    async def _execution(self, request: web.Request) -> web.Response:
        execution = self._execution_of(request)
        if isinstance(execution, web.Response):
            return execution
        return web.json_response(execution.view().model_dump(mode="json", exclude_none=True))

    async def _wait_execution(self, request: web.Request) -> web.Response:
        execution = self._execution_of(request)
        if isinstance(execution, web.Response):
            return execution
        body = await request.json()
        hold = min(float(body.get("timeout_seconds") or 0), LONG_POLL_MAX_S)
        if "completed" in (body.get("statuses") or []):
            try:
                await asyncio.wait_for(execution.done.wait(), hold)
            except TimeoutError:
                return _error(408, f"Execution {execution.id} did not complete in time")
        return web.json_response(execution.view().model_dump(mode="json", exclude_none=True))

    async def _send_std_in(self, request: web.Request) -> web.Response:
        execution = self._execution_of(request)
        if isinstance(execution, web.Response):
            return execution
        body = await request.json()
        sock = execution.stdin
        if sock is None:
            return _error(400, f"Execution {execution.id} has no stdin attached")
        raw = getattr(sock, "_sock", sock)
        with contextlib.suppress(OSError):  # the command may have exited
            if body.get("text"):
                await asyncio.to_thread(raw.sendall, body["text"].encode())
            if body.get("signal") == "EOF":
                raw.shutdown(socket.SHUT_WR)
                execution.stdin = None
        answer = {"devbox_id": execution.devbox_id, "execution_id": execution.id, "success": True}
        return web.json_response(answer)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events of one stream from ``offset`` (characters), until it ends."""
        execution = self._execution_of(request)
        if isinstance(execution, web.Response):
            return execution
        fd = 1 if request.path.endswith("stdout_updates") else 2
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        offset = int(request.query.get("offset") or 0)
        while True:
            execution.changed.clear()
            text = execution.output(fd)
            if len(text) > offset:
                # its offset is where the stream resumes (the SDK reconnects with the last one)
                chunk = ExecutionUpdateChunk(output=text[offset:], offset=len(text))
                offset = len(text)
                await response.write(f"data: {chunk.model_dump_json()}\n\n".encode())
                continue
            if execution.done.is_set():
                break
            await execution.changed.wait()
        await response.write_eof()
        return response

    # -- files ---------------------------------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.Response:
        devbox = self._running(request)
        if isinstance(devbox, web.Response):
            return devbox
        fields: dict[str, Any] = {}
        async for part in await request.multipart():
            fields[part.name or ""] = await part.read() if part.filename else await part.text()
        if "path" not in fields or "file" not in fields:
            return _error(400, "upload_file needs a path and a file")
        path = posixpath.join(HOME, fields["path"])
        error = await asyncio.to_thread(_put, devbox.container, path, bytes(fields["file"]))
        return _error(400, error) if error else web.json_response({})

    async def _download(self, request: web.Request) -> web.Response:
        devbox = self._running(request)
        if isinstance(devbox, web.Response):
            return devbox
        path = posixpath.join(HOME, (await request.json())["path"])
        ran = await asyncio.to_thread(run, devbox.container, ["sh", "-c", _READ, "sh", path])
        if ran.exit_code == 3:
            return _error(404, f"File not found: {path}")
        if ran.exit_code != 0:
            why = "not a regular file" if ran.exit_code == 4 else "cannot be read"
            return _error(400, f"File {path}: {why}")
        return web.Response(body=ran.stdout, content_type="application/octet-stream")


#: Writes the upload staged at "$2" to "$1" as the user (parents made), then removes the
#: staging directory "$3".
_WRITE = 'mkdir -p -- "$(dirname -- "$1")" && cat -- "$2" > "$1"; c=$?; rm -rf -- "$3"; exit $c'
#: Prints regular file "$1" (through links); 3: missing, 4: not a regular file.
_READ = 'test -e "$1" || exit 3; test -f "$1" || exit 4; exec cat -- "$1"'


def _put(container: Any, path: str, data: bytes) -> str | None:
    """Write ``data`` to ``path`` in ``container`` as the user; an error message or None."""
    staging = f"/tmp/.runloop-standin-{secrets.token_hex(8)}"
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo(posixpath.basename(staging))
        info.type, info.mode = tarfile.DIRTYPE, 0o777
        tar.addfile(info)
        info = tarfile.TarInfo(f"{posixpath.basename(staging)}/data")
        info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    container.put_archive("/tmp", archive.getvalue())
    argv = ["sh", "-c", _WRITE, "sh", path, f"{staging}/data", staging]
    ran = run(container, argv, user=USER)
    return None if ran.exit_code == 0 else ran.output.decode("utf-8", "replace").strip() or "failed"


# -- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def runloop_server(docker_client: Any, sandbox_image: str) -> Iterator[StandInRunloop]:
    """The stand-in Runloop service for this test process (one per xdist worker)."""
    with StandInRunloop(image=sandbox_image) as server:
        yield server


@pytest.fixture
def runloop_env(
    runloop_server: StandInRunloop, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StandInRunloop]:
    """Point the Runloop SDK at the stand-in through its own variables; fail the test that
    made a call the stand-in does not know (a protocol drift)."""
    monkeypatch.delenv("RUNLOOP_CUSTOM_HEADERS", raising=False)
    for name, value in runloop_server.env().items():
        monkeypatch.setenv(name, value)
    seen = len(runloop_server.unknown)
    yield runloop_server
    runloop_server.limit_creates(None)
    runloop_server.create_delay = 0.0
    drift = runloop_server.unknown[seen:]
    assert not drift, f"the runloop SDK made calls the stand-in does not know: {drift}"


# -- standalone ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted, after printing the variables that point the SDK here."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3997)
    parser.add_argument(
        "--image", default=DEFAULT_IMAGE, help="docker image of the default blueprint"
    )
    parser.add_argument("--api-key", help="the key to accept (default: a random one)")
    args = parser.parse_args(argv)
    server = StandInRunloop(image=args.image, api_key=args.api_key, host=args.host, port=args.port)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with server:
        for name, value in server.env().items():
            print(f"export {name}={value}")
        print(f"# runloop stand-in on {server.url} (docker-backed, not Runloop's timings)")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
