"""A local stand-in for the Kubernetes API server, for the tests of the ``k8s`` substrate.

It speaks the real protocol for the subset the substrate uses: pods create/get/list/delete,
``?watch=true`` streams with ``resourceVersion`` (and 410 Gone when it is too old), core/v1
events, ``Status`` errors with the real codes, bearer-token authentication with a minimal RBAC,
and exec over websocket with the ``v5.channel.k8s.io`` / ``v4.channel.k8s.io`` subprotocols.
Every pod is a real docker container started from the pod's image, so commands really run
isolated; a small "scheduler" and "kubelet" move pods through the conditions and events a real
node would produce (PodScheduled, Initialized, ContainersReady, Ready; Scheduled, Pulling,
Pulled, Created, Started).

:attr:`KubeAPIStandIn.held_creates` holds a create's answer on demand (``late_answer``).
Faults are requested per pod with the label or annotation ``rollout-tax.test/simulate``:
``unschedulable`` (the pod stays Pending with an Unschedulable condition),
``image-pull-failure`` (ErrImagePull, then ImagePullBackOff) or ``lost-create-response`` (the
pod is created, but the connection is reset before the answer). The scheduler also refuses pods
that a real one would: a node selector the node does not match, more cpu or memory than it has;
and with :attr:`KubeAPIStandIn.max_pods` set, it binds only that many pods at once and leaves
the rest Pending ("Too many pods") until a bound pod is deleted, as a full node does.

Test infrastructure only: its timings are docker's, never Kubernetes timings.

Standalone: ``python tests/support/k8s_api.py --port 8001 --kubeconfig /tmp/kubeconfig``, then
``KUBECONFIG=/tmp/kubeconfig pytest example_suite --substrate=k8s``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import yaml
from aiohttp import WSCloseCode, WSMsgType, web

from pytest_rollout_tax.core.processes import process_alive

try:
    from support.late_answer import HeldAnswer
except ImportError:  # run standalone: tests/support is the script's own folder
    from late_answer import HeldAnswer  # type: ignore[no-redef]

SIMULATE_KEY = "rollout-tax.test/simulate"
OWNER_LABEL = "rollout-tax.test/k8s-api"
PID_LABEL = "rollout-tax.test/k8s-api-pid"
POD_LABEL = "rollout-tax.test/pod"
NODE_NAME = "rollout-tax-standin-node"
V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
NAMESPACES = ("default", "kube-system", "rollout-tax")
RUNTIME_CLASSES = {"runc": "runc"}
HISTORY = 4096
USER_KEY = web.RequestKey("user", object)
CONTEXT = "rollout-tax-test"
WATCH_DEFAULT_TIMEOUT = 1800.0
GIT_VERSION = "v1.30.0+rollout-tax-standin"

# -- small helpers -----------------------------------------------------------------------------


def now_rfc3339() -> str:
    """A timestamp as the API server writes it (seconds resolution)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(seconds: float) -> str:
    """``seconds`` formatted like Go's ``time.Duration.String`` (``15.2ms``, ``1.5s``)."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3f}".rstrip("0").rstrip(".") + "µs"
    if seconds < 1:
        return f"{seconds * 1e3:.6f}".rstrip("0").rstrip(".") + "ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.9f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei|[eE][+-]?\d+)?$"
)
_SUFFIX = {
    None: 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def parse_quantity(text: Any) -> float:
    """A Kubernetes resource quantity (``500m``, ``1.5``, ``512Mi``, ``1e9``) as a number."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(text)
    number, suffix = match.groups()
    if suffix and suffix[0] in "eE":
        return float(number + suffix)
    return float(number) * _SUFFIX[suffix]


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    """A ``Status`` object with ``status: Failure``."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class StatusError(Exception):
    """Raised inside a handler to answer with a ``Status``."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.body = status_body(code, reason, message, details)

    def response(self) -> web.Response:
        return web.json_response(self.body, status=self.body["code"])


def lookup(obj: dict, dotted: str) -> Any:
    """``obj["a"]["b"]`` for ``"a.b"``; None when missing."""
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


# -- selectors ---------------------------------------------------------------------------------

POD_FIELDS = {
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
}
EVENT_FIELDS = {
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}
FIELDS: dict[str, set[str]] = {"pods": POD_FIELDS, "events": EVENT_FIELDS}

Matcher = Callable[[dict], bool]


def field_selector(text: str, resource: str) -> Matcher:
    """A matcher for a fieldSelector (``a=b``, ``a==b``, ``a!=b``, comma-separated)."""
    tests = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        negate = "!=" in term
        key, _, value = term.partition("!=" if negate else "==" if "==" in term else "=")
        key = key.strip()
        if key not in FIELDS[resource]:
            raise StatusError(
                400,
                "BadRequest",
                f'"{key}" is not a known field selector: '
                f'only "{", ".join(sorted(FIELDS[resource]))}"',
            )
        tests.append((key, value.strip(), negate))

    def match(obj: dict) -> bool:
        for key, value, negate in tests:
            actual = lookup(obj, key)
            actual = "" if actual is None else str(actual)
            if (actual == value) == negate:
                return False
        return True

    return match


def label_selector(text: str) -> Matcher:
    """A matcher for a labelSelector: ``k=v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``."""
    terms, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    tests: list[Callable[[dict[str, str]], bool]] = []
    for term in filter(None, (t.strip() for t in terms)):
        if m := re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", term):
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if op == "in":
                tests.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                tests.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif m := re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)", term):
            key, op, value = m.groups()
            if op == "!=":
                tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif m := re.fullmatch(r"!([\w./-]+)", term):
            absent = m.group(1)
            tests.append(lambda labels, k=absent: k not in labels)
        elif re.fullmatch(r"[\w./-]+", term):
            tests.append(lambda labels, k=term: k in labels)
        else:
            raise StatusError(400, "BadRequest", f"unable to parse requirement: {term!r}")
    return lambda obj: all(t(obj.get("metadata", {}).get("labels") or {}) for t in tests)


# -- the object store with its watch history ---------------------------------------------------


@dataclass
class Entry:
    """One change of one object, as a watch event."""

    rv: int
    resource: str
    type: str
    obj: dict
    line: bytes


@dataclass(eq=False)
class Watcher:
    resource: str
    namespace: str | None
    match: Matcher
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)


class Store:
    """Pods and events by (namespace, name), with a bounded history of changes (like etcd)."""

    def __init__(self) -> None:
        self.revision = 1
        self.objects: dict[str, dict[tuple[str, str], dict]] = {"pods": {}, "events": {}}
        self.history: deque[Entry] = deque(maxlen=HISTORY)
        self.watchers: set[Watcher] = set()
        self.compacted = 0

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        return self.objects[resource].get((namespace, name))

    def list(self, resource: str, namespace: str | None, match: Matcher) -> list[dict]:
        return [
            obj
            for (ns, _), obj in sorted(self.objects[resource].items())
            if (namespace is None or ns == namespace) and match(obj)
        ]

    def write(self, resource: str, obj: dict, kind: str) -> dict:
        """Store ``obj`` (ADDED, MODIFIED or DELETED) under a new resourceVersion; notify."""
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if kind == "DELETED":
            self.objects[resource].pop(key, None)
        else:
            self.objects[resource][key] = obj
        line = json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode()
        entry = Entry(self.revision, resource, kind, json.loads(line)["object"], line)
        self.history.append(entry)
        for watcher in list(self.watchers):
            if self._wants(watcher, entry):
                watcher.queue.put_nowait(entry)
        return obj

    def oldest(self) -> int:
        """The oldest resourceVersion a watch can start from."""
        if len(self.history) == self.history.maxlen:
            return max(self.compacted, self.history[0].rv - 1)
        return self.compacted

    @staticmethod
    def _wants(watcher: Watcher, entry: Entry) -> bool:
        return (
            entry.resource == watcher.resource
            and (
                watcher.namespace is None or entry.obj["metadata"]["namespace"] == watcher.namespace
            )
            and watcher.match(entry.obj)
        )

    def replay(self, watcher: Watcher, since: int) -> list[Entry]:
        return [e for e in self.history if e.rv > since and self._wants(watcher, e)]


# -- users and RBAC ----------------------------------------------------------------------------


@dataclass(frozen=True)
class User:
    """A bearer token and what it may do: ``allow`` (None: everything) minus ``deny``."""

    name: str
    token: str
    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()

    def can(self, verb: str, resource: str) -> bool:
        rule = f"{verb} {resource}"
        return (self.allow is None or rule in self.allow) and rule not in self.deny


def default_users() -> dict[str, User]:
    """admin; readonly (get/list/watch pods and events); no-exec; no-events."""
    read = {f"{v} {r}" for v in ("get", "list", "watch") for r in ("pods", "events")}
    users = [
        User("admin", secrets.token_urlsafe(24)),
        User("readonly", secrets.token_urlsafe(24), allow=frozenset(read)),
        User(
            "no-exec",
            secrets.token_urlsafe(24),
            deny=frozenset({"create pods/exec", "get pods/exec"}),
        ),
        User(
            "no-events",
            secrets.token_urlsafe(24),
            deny=frozenset(f"{v} events" for v in ("get", "list", "watch")),
        ),
    ]
    return {user.token: user for user in users}


# -- the server --------------------------------------------------------------------------------


@dataclass(eq=False)
class PodRuntime:
    """What the "kubelet" keeps for one pod: its docker containers and its start-up task."""

    uid: str
    containers: dict[str, str] = field(default_factory=dict)  # container name -> docker id
    task: asyncio.Task | None = None
    deleted: bool = False
    #: Bound to the node: it holds one of the node's pod slots until deleted.
    bound: bool = False


class KubeAPIStandIn:
    """The stand-in API server; :meth:`start` runs it in a background thread."""

    def __init__(self, *, users: dict[str, User] | None = None, docker_host: str | None = None):
        self.id = uuid.uuid4().hex[:12]
        self.users = users or default_users()
        self.docker = docker.DockerClient(
            base_url=docker_host or os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
            max_pool_size=64,
        )
        self.docker_host = docker_host or os.environ.get(
            "DOCKER_HOST", "unix:///var/run/docker.sock"
        )
        self.store = Store()
        self.pods: dict[tuple[str, str], PodRuntime] = {}
        self.pool = ThreadPoolExecutor(max_workers=48, thread_name_prefix="k8s-standin-docker")
        self.node_cpu = float(os.cpu_count() or 1)
        self.node_memory = _host_memory()
        self.url = ""
        self.kubeconfig_path: Path | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task] = set()
        #: Requests served, by "METHOD route" ("?watch" added for watches), for benchmarks.
        self.requests: Counter[str] = Counter()
        #: The next this many watches from a resourceVersion get 410 Gone (a test's fault).
        self.expire_watches = 0
        #: The exec subprotocols offered, in order (a test can restrict them to v4).
        self.exec_protocols: tuple[str, ...] = (V5, V4)
        #: Pods the node runs at once (its pod capacity); None: no limit. Beyond it the
        #: scheduler leaves new pods Pending ("Too many pods") until a bound pod is deleted.
        self.max_pods: int | None = None
        #: Holds the answer of a create (a pod's, or a claim's) on demand: made, answered late.
        self.held_creates = HeldAnswer()
        #: The exec websockets open now, by pod name (a test may drop them).
        self._exec_sockets: dict[str, set[web.WebSocketResponse]] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._authenticate], client_max_size=1 << 30)
        ns_pods = "/api/v1/namespaces/{namespace}/pods"
        app.router.add_get("/version", self.version)
        app.router.add_get("/api", self.api_versions)
        app.router.add_get(ns_pods, self.list_or_watch("pods"))
        app.router.add_post(ns_pods, self.create_pod)
        app.router.add_get("/api/v1/pods", self.list_or_watch("pods"))
        app.router.add_get(
            "/api/v1/watch/namespaces/{namespace}/pods", self.list_or_watch("pods", True)
        )
        app.router.add_get(ns_pods + "/{name}", self.get_pod)
        app.router.add_delete(ns_pods + "/{name}", self.delete_pod)
        app.router.add_get(ns_pods + "/{name}/exec", self.exec_pod)
        app.router.add_post(ns_pods + "/{name}/exec", self.exec_pod)
        app.router.add_get("/api/v1/namespaces/{namespace}/events", self.list_or_watch("events"))
        app.router.add_get("/api/v1/events", self.list_or_watch("events"))
        return app

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0: a free port) from a background thread; return the URL."""
        self.reap_stale()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        self.url = f"http://{host}:{sock.getsockname()[1]}"
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._serve(sock))
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="k8s-standin", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self.url

    async def _serve(self, sock: socket.socket) -> None:
        self._runner = web.AppRunner(
            self.app(), access_log=None, handle_signals=False, shutdown_timeout=0.5
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    def stop(self) -> None:
        """Stop serving and remove every container this server made."""
        if self._loop is not None and self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(60)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
            self._loop = None
        self.remove_containers(self.id)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.docker.close()

    async def _shutdown(self) -> None:
        for runtime in self.pods.values():
            runtime.deleted = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()

    def remove_containers(self, owner: str) -> int:
        """Remove the docker containers made by the server ``owner``."""
        removed = 0
        for container in self.docker.containers.list(
            all=True, sparse=True, filters={"label": f"{OWNER_LABEL}={owner}"}
        ):
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
                removed += 1
        return removed

    def reap_stale(self) -> int:
        """Remove containers left by stand-ins whose process is gone (a crashed test run)."""
        removed = 0
        listed = self.docker.containers.list(all=True, sparse=True, filters={"label": OWNER_LABEL})
        for container in listed:
            pid = container.attrs["Labels"].get(PID_LABEL, "")
            if pid.isdigit() and not process_alive(int(pid)):
                with contextlib.suppress(docker.errors.APIError):
                    container.remove(force=True)
                    removed += 1
        return removed

    def compact(self) -> int:
        """Forget the watch history, as etcd compaction does: older versions get 410 Gone."""
        assert self._loop is not None

        async def compact() -> int:
            self.store.history.clear()
            self.store.compacted = self.store.revision
            return self.store.revision

        return asyncio.run_coroutine_threadsafe(compact(), self._loop).result(10)

    def drop_execs(self, pod: str) -> int:
        """Close the open exec websockets of ``pod`` from the server's side, as an API server
        that restarts (or a proxy's idle timeout) does; return how many."""
        assert self._loop is not None

        async def drop() -> int:
            sockets = list(self._exec_sockets.get(pod, ()))
            for ws in sockets:  # not awaited: the client answers the close when it reads
                self._spawn(ws.close(code=WSCloseCode.GOING_AWAY, message=b"server going away"))
            return len(sockets)

        return asyncio.run_coroutine_threadsafe(drop(), self._loop).result(10)

    # -- kubeconfig ------------------------------------------------------------------------

    def token(self, user: str) -> str:
        return next(u.token for u in self.users.values() if u.name == user)

    def kubeconfig(self, namespace: str = "default") -> dict:
        """A kubeconfig: context ``rollout-tax-test`` (admin, current) and one per fault."""
        unreachable = f"http://127.0.0.1:{_free_port()}"
        clusters = [
            {"name": CONTEXT, "cluster": {"server": self.url}},
            {"name": f"{CONTEXT}-unreachable", "cluster": {"server": unreachable}},
        ]
        users = [
            {"name": f"{CONTEXT}-{u.name}", "user": {"token": u.token}} for u in self.users.values()
        ]
        users.append({"name": f"{CONTEXT}-bad-token", "user": {"token": secrets.token_urlsafe(24)}})
        contexts = []
        for user in [*(u.name for u in self.users.values()), "bad-token", "unreachable"]:
            name = CONTEXT if user == "admin" else f"{CONTEXT}-{user}"
            cluster = f"{CONTEXT}-unreachable" if user == "unreachable" else CONTEXT
            account = f"{CONTEXT}-admin" if user == "unreachable" else f"{CONTEXT}-{user}"
            contexts.append(
                {
                    "name": name,
                    "context": {"cluster": cluster, "user": account, "namespace": namespace},
                }
            )
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": clusters,
            "users": users,
            "contexts": contexts,
            "current-context": CONTEXT,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        path = Path(path)
        path.write_text(yaml.safe_dump(self.kubeconfig(namespace), sort_keys=False))
        path.chmod(0o600)
        self.kubeconfig_path = path
        return path

    # -- authentication and authorization --------------------------------------------------

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        user = self.users.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            return StatusError(401, "Unauthorized", "Unauthorized").response()
        request[USER_KEY] = user
        route = request.match_info.route.resource
        watch = request.query.get("watch", "") in ("1", "true") or "/watch/" in request.path
        key = f"{request.method} {route.canonical if route else request.path}"
        self.requests[key + ("?watch" if watch else "")] += 1
        try:
            return await handler(request)
        except StatusError as exc:
            return exc.response()

    @staticmethod
    def authorize(request: web.Request, verb: str, resource: str, name: str | None = None) -> None:
        user: User = request[USER_KEY]  # type: ignore[assignment]
        if user.can(verb, resource):
            return
        namespace = request.match_info.get("namespace")
        top = resource.split("/")[0]
        subject = f'{top} "{name}"' if name else top
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        details = {"kind": top} | ({"name": name} if name else {})
        raise StatusError(
            403,
            "Forbidden",
            f'{subject} is forbidden: User "{user.name}" cannot {verb} resource "{resource}" '
            f'in API group ""{where}',
            details,
        )

    # -- discovery -------------------------------------------------------------------------

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "major": "1",
                "minor": "30",
                "gitVersion": GIT_VERSION,
                "gitCommit": "",
                "gitTreeState": "clean",
                "buildDate": "",
                "goVersion": "",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        )

    async def api_versions(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        )

    # -- list and watch --------------------------------------------------------------------

    def list_or_watch(self, resource: str, force_watch: bool = False) -> Callable:
        async def handler(request: web.Request) -> web.StreamResponse:
            query = request.query
            watch = force_watch or query.get("watch", "").lower() in ("1", "true")
            self.authorize(request, "watch" if watch else "list", resource)
            namespace = request.match_info.get("namespace")
            fields = field_selector(query.get("fieldSelector", ""), resource)
            labels = label_selector(query.get("labelSelector", ""))

            def match(obj: dict) -> bool:
                return fields(obj) and labels(obj)

            if watch:
                return await self._watch(request, resource, namespace, match)
            if "continue" in query:
                raise StatusError(
                    400, "BadRequest", "continue tokens are not supported by the stand-in"
                )
            items = self.store.list(resource, namespace, match)
            limit = int(query.get("limit", "0") or 0)
            kind = {"pods": "PodList", "events": "EventList"}[resource]
            body = {
                "kind": kind,
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.store.revision)},
                "items": [_strip_type(obj) for obj in (items[:limit] if limit > 0 else items)],
            }
            return web.json_response(body)

        return handler

    async def _watch(
        self, request: web.Request, resource: str, namespace: str | None, match: Matcher
    ) -> web.StreamResponse:
        query = request.query
        timeout = float(query.get("timeoutSeconds") or WATCH_DEFAULT_TIMEOUT)
        since_text = query.get("resourceVersion", "")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        watcher = Watcher(resource, namespace, match)
        # Register and take the replay in one step (no await between): no change is missed.
        if since_text in ("", "0"):
            replay = [
                json.dumps({"type": "ADDED", "object": obj}, separators=(",", ":")).encode()
                for obj in self.store.list(resource, namespace, match)
            ]
            last = self.store.revision
        else:
            since = int(since_text) if since_text.isdigit() else -1
            if since < 0:
                raise StatusError(400, "BadRequest", f"invalid resource version: {since_text}")
            expire = self.expire_watches > 0
            self.expire_watches -= expire
            if since < self.store.oldest() or expire:
                await response.prepare(request)
                gone = status_body(
                    410, "Expired", f"too old resource version: {since} ({self.store.oldest() + 1})"
                )
                await response.write(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
                await response.write_eof()
                return response
            entries = self.store.replay(watcher, since)
            replay = [e.line for e in entries]
            last = max([since, *(e.rv for e in entries)])
        self.store.watchers.add(watcher)
        try:
            await response.prepare(request)
            for line in replay:
                await response.write(line + b"\n")
            deadline = time.monotonic() + timeout
            while (remaining := deadline - time.monotonic()) > 0:
                try:
                    entry = await asyncio.wait_for(watcher.queue.get(), min(remaining, 5.0))
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    continue
                if entry.rv > last:
                    await response.write(entry.line + b"\n")
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.store.watchers.discard(watcher)
        return response

    # -- pods ------------------------------------------------------------------------------

    async def get_pod(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        self.authorize(request, "get", "pods", name)
        return web.json_response(self._pod_or_404(namespace, name))

    def _pod_or_404(self, namespace: str, name: str) -> dict:
        pod = self.store.get("pods", namespace, name)
        if pod is None:
            raise StatusError(
                404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"}
            )
        return pod

    async def create_pod(self, request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        self.authorize(request, "create", "pods")
        try:
            pod = await request.json()
        except json.JSONDecodeError as exc:
            raise StatusError(400, "BadRequest", f"error decoding request body: {exc}") from None
        if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod":
            raise StatusError(400, "BadRequest", "the body of the request was not a Pod")
        if namespace not in NAMESPACES:
            raise StatusError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                {"name": namespace, "kind": "namespaces"},
            )
        meta = pod.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta.get("name") or ""
        self._validate(pod, name)
        if meta.get("namespace", namespace) != namespace:
            raise StatusError(
                400,
                "BadRequest",
                "the namespace of the provided object does not "
                "match the namespace sent on the request",
            )
        runtime_class = pod["spec"].get("runtimeClassName")
        if runtime_class and runtime_class not in RUNTIME_CLASSES:
            raise StatusError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: pod rejected: '
                f'RuntimeClass "{runtime_class}" not found',
                {"name": name, "kind": "pods"},
            )
        if self.store.get("pods", namespace, name) is not None:
            raise StatusError(
                409,
                "AlreadyExists",
                f'pods "{name}" already exists',
                {"name": name, "kind": "pods"},
            )
        await self.held_creates.hold_before_async()
        self.add_pod(namespace, pod)
        await self.held_creates.hold_after_async()
        if self._simulate(pod) == "lost-create-response" and request.transport is not None:
            request.transport.abort()  # created, but the client never hears of it
        return web.json_response(pod, status=201)

    def add_pod(self, namespace: str, pod: dict) -> dict:
        """Default and store a valid new pod, and start its kubelet (a controller's create)."""
        name = pod["metadata"]["name"]
        self._default(pod, namespace)
        self.store.write("pods", pod, "ADDED")
        runtime = PodRuntime(uid=pod["metadata"]["uid"])
        self.pods[(namespace, name)] = runtime
        runtime.task = self._spawn(self._kubelet(namespace, name, runtime))
        return pod

    def remove_pod(self, namespace: str, name: str) -> None:
        """Delete a pod at once, as a grace period of 0 does (a controller's delete)."""
        pod = self.store.get("pods", namespace, name)
        if pod is not None:
            pod["metadata"]["deletionTimestamp"] = now_rfc3339()
            self.store.write("pods", pod, "DELETED")
            self._forget(namespace, name, self.pods.get((namespace, name)), stop_timeout=0)

    @staticmethod
    def _validate(pod: dict, name: str) -> None:
        causes = []

        def invalid(path: str, value: Any, why: str) -> None:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {value!r}: {why}",
                    "field": path,
                }
            )

        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name):
            invalid(
                "metadata.name",
                name,
                "a lowercase RFC 1123 subdomain must consist of lower "
                "case alphanumeric characters, '-' or '.'",
            )
        spec = pod.get("spec")
        containers = spec.get("containers") if isinstance(spec, dict) else None
        if not isinstance(containers, list) or not containers:
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                    "field": "spec.containers",
                }
            )
            containers = []
        for i, container in enumerate(containers):
            where = f"spec.containers[{i}]"
            if not isinstance(container, dict) or not container.get("name"):
                invalid(f"{where}.name", None, "Required value")
                continue
            if not container.get("image"):
                invalid(f"{where}.image", None, "Required value")
            for kind in ("requests", "limits"):
                for resource, value in ((container.get("resources") or {}).get(kind) or {}).items():
                    try:
                        parse_quantity(value)
                    except ValueError:
                        invalid(
                            f"{where}.resources.{kind}[{resource}]",
                            value,
                            "must match the regex ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$",
                        )
        if isinstance(spec, dict) and spec.get("restartPolicy", "Always") not in (
            "Always",
            "OnFailure",
            "Never",
        ):
            invalid(
                "spec.restartPolicy",
                spec["restartPolicy"],
                "supported values: Always, OnFailure, Never",
            )
        if causes:
            message = "; ".join(f"{c['field']}: {c['message']}" for c in causes)
            raise StatusError(
                422,
                "Invalid",
                f'Pod "{name}" is invalid: {message}',
                {"name": name, "kind": "Pod", "causes": causes},
            )

    @staticmethod
    def _default(pod: dict, namespace: str) -> None:
        """What the API server's defaulting and admission add to a new pod."""
        pod["apiVersion"], pod["kind"] = "v1", "Pod"
        meta = pod["metadata"]
        meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339())
        spec = pod["spec"]
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("securityContext", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("priority", 0)
        tolerations = spec.setdefault("tolerations", [])
        for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(t.get("key") == taint for t in tolerations):
                tolerations.append(
                    {
                        "key": taint,
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    }
                )
        for container in spec["containers"]:
            image = container["image"]
            tag = image.rsplit("/", 1)[-1]
            latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("resources", {})
            limits = container["resources"].get("limits") or {}
            requests = container["resources"].setdefault("requests", {})
            for resource, value in limits.items():
                requests.setdefault(resource, value)
            if not container["resources"]["requests"]:
                del container["resources"]["requests"]
        qos = "BestEffort"
        resources = [c["resources"] for c in spec["containers"]]
        if any(r.get("requests") or r.get("limits") for r in resources):
            guaranteed = all(
                set(r.get("limits") or {}) >= {"cpu", "memory"}
                and r.get("requests") == r.get("limits")
                for r in resources
            )
            qos = "Guaranteed" if guaranteed else "Burstable"
        pod["status"] = {"phase": "Pending", "qosClass": qos}

    async def delete_pod(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        self.authorize(request, "delete", "pods", name)
        pod = self._pod_or_404(namespace, name)
        options: dict = {}
        if request.can_read_body:
            with contextlib.suppress(json.JSONDecodeError):
                options = await request.json() or {}
        grace = request.query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        grace = (
            int(grace)
            if grace is not None
            else pod["spec"].get("terminationGracePeriodSeconds", 30)
        )
        if not pod["spec"].get("nodeName") or pod["status"].get("phase") in ("Succeeded", "Failed"):
            grace = 0
        runtime = self.pods.get((namespace, name))
        if pod["metadata"].get("deletionTimestamp") and grace > 0:
            return web.json_response(pod)
        pod["metadata"]["deletionTimestamp"] = now_rfc3339()
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
        if grace == 0:
            self.store.write("pods", pod, "DELETED")
            self._forget(namespace, name, runtime, stop_timeout=0)
            return web.json_response(pod)
        self.store.write("pods", pod, "MODIFIED")
        self._spawn(self._graceful_delete(namespace, name, runtime, grace))
        return web.json_response(pod)

    async def _graceful_delete(
        self, namespace: str, name: str, runtime: PodRuntime | None, grace: int
    ) -> None:
        if runtime is not None:
            runtime.deleted = True
            await self._remove_containers(runtime, stop_timeout=grace)
        pod = self.store.get("pods", namespace, name)
        if pod is not None:
            self.store.write("pods", pod, "DELETED")
        self.pods.pop((namespace, name), None)

    def _forget(
        self, namespace: str, name: str, runtime: PodRuntime | None, stop_timeout: int
    ) -> None:
        self.pods.pop((namespace, name), None)
        if runtime is not None:
            runtime.deleted = True
            self._spawn(self._remove_containers(runtime, stop_timeout))

    async def _remove_containers(self, runtime: PodRuntime, stop_timeout: int) -> None:
        for container_id in list(runtime.containers.values()):
            await self._docker(self._remove_container, container_id, stop_timeout)
        runtime.containers.clear()

    def _remove_container(self, container_id: str, stop_timeout: int) -> None:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            if stop_timeout:
                self.docker.api.stop(container_id, timeout=stop_timeout)
            self.docker.api.remove_container(container_id, force=True)

    def _spawn(self, coro: Any) -> asyncio.Task:
        """Run ``coro`` in the background; :meth:`stop` cancels what is still running."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _docker(self, func: Callable, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self.pool, lambda: func(*args, **kwargs)
        )

    # -- the scheduler and the kubelet -----------------------------------------------------

    def _update(
        self, namespace: str, name: str, runtime: PodRuntime, change: Callable[[dict], None]
    ) -> bool:
        """Apply ``change`` to the stored pod and write it (MODIFIED); False if it is gone."""
        pod = self.store.get("pods", namespace, name)
        if runtime.deleted or pod is None or pod["metadata"]["uid"] != runtime.uid:
            return False
        pod = json.loads(json.dumps(pod))
        change(pod)
        self.store.write("pods", pod, "MODIFIED")
        return True

    def _event(
        self,
        pod: dict,
        kind: str,
        reason: str,
        message: str,
        component: str,
        field_path: str | None = None,
    ) -> None:
        meta = pod["metadata"]
        stamp = now_rfc3339()
        involved = {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
            "apiVersion": "v1",
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        if field_path:
            involved["fieldPath"] = field_path
        event = {
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {
                "name": f"{meta['name']}.{secrets.token_hex(8)}",
                "namespace": meta["namespace"],
                "uid": str(uuid.uuid4()),
                "creationTimestamp": stamp,
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "source": {"component": component}
            | ({"host": NODE_NAME} if component == "kubelet" else {}),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": kind,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": NODE_NAME if component == "kubelet" else "",
        }
        self.store.write("events", event, "ADDED")

    @staticmethod
    def _simulate(pod: dict) -> str:
        meta = pod["metadata"]
        return (meta.get("labels") or {}).get(SIMULATE_KEY) or (meta.get("annotations") or {}).get(
            SIMULATE_KEY, ""
        )

    def _unschedulable(self, pod: dict) -> list[str]:
        """Why the one node cannot take ``pod``, in the scheduler's words; [] if it can."""
        reasons = []
        node_labels = {
            "kubernetes.io/hostname": NODE_NAME,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
        }
        selector = pod["spec"].get("nodeSelector") or {}
        if any(node_labels.get(k) != v for k, v in selector.items()):
            reasons.append("1 node(s) didn't match Pod's node affinity/selector")
        cpu = memory = 0.0
        for container in pod["spec"]["containers"]:
            requests = (container.get("resources") or {}).get("requests") or {}
            cpu += parse_quantity(requests.get("cpu", 0))
            memory += parse_quantity(requests.get("memory", 0))
        if cpu > self.node_cpu:
            reasons.append("1 Insufficient cpu")
        if memory > self.node_memory:
            reasons.append("1 Insufficient memory")
        if self._simulate(pod) == "unschedulable" and not reasons:
            reasons.append("1 Insufficient cpu")
        return reasons

    async def _kubelet(self, namespace: str, name: str, runtime: PodRuntime) -> None:
        try:
            await self._start_pod(namespace, name, runtime)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the pod fails like a pod whose runtime errored
            failure = {
                "phase": "Failed",
                "reason": "StartError",
                "message": f"{type(exc).__name__}: {exc}",
            }
            self._update(namespace, name, runtime, lambda p: p["status"].update(failure))
        finally:
            if runtime.deleted and runtime.containers:
                await self._remove_containers(runtime, 0)

    async def _start_pod(self, namespace: str, name: str, runtime: PodRuntime) -> None:
        pod = self.store.get("pods", namespace, name)
        assert pod is not None
        await asyncio.sleep(0)  # let the create response go out first, as a real server would
        reasons = self._unschedulable(pod)
        if reasons:
            message = (
                f"0/1 nodes are available: {', '.join(reasons)}. preemption: 0/1 nodes are "
                "available: 1 Preemption is not helpful for scheduling."
            )

            def unschedulable(p: dict) -> None:
                p["status"]["conditions"] = [
                    _condition("PodScheduled", "False", "Unschedulable", message)
                ]

            if self._update(namespace, name, runtime, unschedulable):
                self._event(pod, "Warning", "FailedScheduling", message, "default-scheduler")
            return
        if not await self._node_slot(namespace, name, runtime, pod):
            return

        def bind(p: dict) -> None:
            p["spec"]["nodeName"] = NODE_NAME
            p["status"]["conditions"] = [_condition("PodScheduled", "True")]

        if not self._update(namespace, name, runtime, bind):
            return
        self._event(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {namespace}/{name} to {NODE_NAME}",
            "default-scheduler",
        )
        containers = pod["spec"]["containers"]

        unready = f"containers with unready status: [{' '.join(c['name'] for c in containers)}]"

        def initialized(p: dict) -> None:
            p["status"].update(
                hostIP="127.0.0.1",
                startTime=now_rfc3339(),
                conditions=[
                    _condition("PodReadyToStartContainers", "False"),
                    _condition("Initialized", "True"),
                    _condition(
                        "Ready",
                        "False",
                        "ContainersNotReady",
                        unready,
                    ),
                    _condition(
                        "ContainersReady",
                        "False",
                        "ContainersNotReady",
                        unready,
                    ),
                    _condition("PodScheduled", "True"),
                ],
                containerStatuses=[_waiting(c, "ContainerCreating") for c in containers],
            )

        if not self._update(namespace, name, runtime, initialized):
            return
        for container in containers:
            if not await self._pull(namespace, name, runtime, pod, container):
                return
        for container in containers:
            if runtime.deleted:
                return
            container_id = await self._docker(self._run_container, pod, container)
            runtime.containers[container["name"]] = container_id
            path = f"spec.containers{{{container['name']}}}"
            self._event(
                pod, "Normal", "Created", f"Created container {container['name']}", "kubelet", path
            )
            self._event(
                pod, "Normal", "Started", f"Started container {container['name']}", "kubelet", path
            )
        started = now_rfc3339()

        def running(p: dict) -> None:
            p["status"].update(
                phase="Running",
                podIP=f"10.244.0.{len(self.pods) % 250 + 2}",
                conditions=[
                    _condition("PodReadyToStartContainers", "True"),
                    _condition("Initialized", "True"),
                    _condition("Ready", "True"),
                    _condition("ContainersReady", "True"),
                    _condition("PodScheduled", "True"),
                ],
                containerStatuses=[
                    {
                        "name": c["name"],
                        "image": c["image"],
                        "imageID": f"docker://{c['image']}",
                        "containerID": f"docker://{runtime.containers[c['name']]}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": started}},
                        "lastState": {},
                    }
                    for c in containers
                ],
            )

        self._update(namespace, name, runtime, running)

    async def _node_slot(self, namespace: str, name: str, runtime: PodRuntime, pod: dict) -> bool:
        """Wait, Pending, until the node has room for one more pod (:attr:`max_pods`), then
        take it; False if the pod was deleted while it waited."""
        message = (
            "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: "
            "1 No preemption victims found for incoming pod."
        )
        queued = False
        while self.max_pods is not None and self.max_pods <= sum(
            r.bound and not r.deleted for r in self.pods.values()
        ):
            if runtime.deleted:
                return False
            if not queued:
                queued = True

                def unschedulable(p: dict) -> None:
                    p["status"]["conditions"] = [
                        _condition("PodScheduled", "False", "Unschedulable", message)
                    ]

                if self._update(namespace, name, runtime, unschedulable):
                    self._event(pod, "Warning", "FailedScheduling", message, "default-scheduler")
            await asyncio.sleep(0.02)  # the scheduler's next try
        runtime.bound = not runtime.deleted
        return runtime.bound

    async def _pull(
        self, namespace: str, name: str, runtime: PodRuntime, pod: dict, container: dict
    ) -> bool:
        """The kubelet's image step: events, and ErrImagePull / ImagePullBackOff on failure."""
        image, policy = container["image"], container.get("imagePullPolicy", "IfNotPresent")
        path = f"spec.containers{{{container['name']}}}"
        started = time.perf_counter()
        present = await self._docker(self._image_present, image)
        if self._simulate(pod) == "image-pull-failure":
            present = False
        if present and policy != "Always":
            self._event(
                pod,
                "Normal",
                "Pulled",
                f'Container image "{image}" already present on machine',
                "kubelet",
                path,
            )
            return True
        if policy == "Never":
            message = f'Container image "{image}" is not present with pull policy of Never'
            self._event(pod, "Warning", "ErrImageNeverPull", message, "kubelet", path)
            self._update(
                namespace, name, runtime, _set_waiting(container, "ErrImageNeverPull", message)
            )
            return False
        self._event(pod, "Normal", "Pulling", f'Pulling image "{image}"', "kubelet", path)
        if present:
            took = go_duration(time.perf_counter() - started)
            size = await self._docker(lambda: self.docker.images.get(image).attrs.get("Size", 0))
            self._event(
                pod,
                "Normal",
                "Pulled",
                f'Successfully pulled image "{image}" in {took} '
                f"({took} including waiting). Image size: {size} bytes.",
                "kubelet",
                path,
            )
            return True
        reference = image if "/" in image.split(":")[0] else f"docker.io/library/{image}"
        reason = (
            f'rpc error: code = NotFound desc = failed to pull and unpack image "{reference}": '
            f'failed to resolve reference "{reference}": {reference}: not found'
        )
        self._event(
            pod, "Warning", "Failed", f'Failed to pull image "{image}": {reason}', "kubelet", path
        )
        self._event(pod, "Warning", "Failed", "Error: ErrImagePull", "kubelet", path)
        if not self._update(
            namespace, name, runtime, _set_waiting(container, "ErrImagePull", reason)
        ):
            return False
        await asyncio.sleep(1.0)  # the kubelet's first back-off
        back_off = f'Back-off pulling image "{image}"'
        self._event(pod, "Normal", "BackOff", back_off, "kubelet", path)
        self._event(pod, "Warning", "Failed", "Error: ImagePullBackOff", "kubelet", path)
        self._update(
            namespace, name, runtime, _set_waiting(container, "ImagePullBackOff", back_off)
        )
        return False

    def _image_present(self, image: str) -> bool:
        try:
            self.docker.images.get(image)
        except docker.errors.ImageNotFound:
            return False
        return True

    def _run_container(self, pod: dict, container: dict) -> str:
        """Create and start the docker container for one container of ``pod``; its id."""
        meta, spec = pod["metadata"], pod["spec"]
        pod_context = spec.get("securityContext") or {}
        context = container.get("securityContext") or {}
        caps = context.get("capabilities") or {}
        limits = (container.get("resources") or {}).get("limits") or {}
        user = context.get("runAsUser", pod_context.get("runAsUser"))
        group = context.get("runAsGroup", pod_context.get("runAsGroup"))
        kwargs: dict[str, Any] = {
            "name": f"k8s_{container['name']}_{meta['name']}_{meta['namespace']}_{meta['uid'][:8]}",
            "entrypoint": container.get("command"),
            "command": container.get("args"),
            "working_dir": container.get("workingDir"),
            "environment": {e["name"]: e.get("value", "") for e in container.get("env") or []},
            "hostname": meta["name"][:63],
            "labels": {
                OWNER_LABEL: self.id,
                PID_LABEL: str(os.getpid()),
                POD_LABEL: f"{meta['namespace']}/{meta['name']}",
                "io.kubernetes.container.name": container["name"],
            },
            "init": True,
            "network_mode": "none",
            "cap_drop": caps.get("drop"),
            "cap_add": caps.get("add"),
            "security_opt": ["no-new-privileges"]
            if context.get("allowPrivilegeEscalation") is False
            else None,
            "read_only": bool(context.get("readOnlyRootFilesystem")),
            "user": f"{user}:{group}" if user is not None and group is not None else user,
            "detach": True,
        }
        if "cpu" in limits:
            kwargs["nano_cpus"] = int(parse_quantity(limits["cpu"]) * 1e9)
        if "memory" in limits:
            kwargs["mem_limit"] = int(parse_quantity(limits["memory"]))
        if spec.get("runtimeClassName"):
            kwargs["runtime"] = RUNTIME_CLASSES[spec["runtimeClassName"]]
        created = self.docker.containers.create(
            container["image"], **{k: v for k, v in kwargs.items() if v is not None}
        )
        created.start()
        return created.id

    # -- exec ------------------------------------------------------------------------------

    async def exec_pod(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        self.authorize(request, "create", "pods/exec", name)
        pod = self._pod_or_404(namespace, name)
        query = request.query
        command = query.getall("command", [])
        if not command:
            raise StatusError(400, "BadRequest", "you must specify at least 1 command")
        containers = [c["name"] for c in pod["spec"]["containers"]]
        container = query.get("container") or (containers[0] if len(containers) == 1 else "")
        if not container:
            raise StatusError(
                400,
                "BadRequest",
                f"a container name must be specified for pod {name}, "
                f"choose one of: [{' '.join(containers)}]",
            )
        if container not in containers:
            raise StatusError(
                400, "BadRequest", f"container {container} is not valid for pod {name}"
            )
        runtime = self.pods.get((namespace, name))
        container_id = runtime.containers.get(container) if runtime else None
        if pod["status"].get("phase") != "Running" or container_id is None:
            raise StatusError(
                400,
                "BadRequest",
                f"pod {name} is not running (phase "
                f"{pod['status'].get('phase')}): unable to upgrade connection: "
                f'container not found ("{container}")',
            )
        flags = {
            key: query.get(key, "").lower() in ("1", "true")
            for key in ("stdin", "stdout", "stderr", "tty")
        }
        if flags["tty"]:
            raise StatusError(400, "BadRequest", "tty is not supported by the stand-in")
        ws = web.WebSocketResponse(protocols=self.exec_protocols, max_msg_size=0, autoping=True)
        ready = ws.can_prepare(request)
        if not ready.ok:
            raise StatusError(400, "BadRequest", "Upgrade request required")
        if ready.protocol is None:
            raise StatusError(
                400,
                "BadRequest",
                "none of the requested subprotocols is supported: "
                f"{', '.join(self.exec_protocols)}",
            )
        await ws.prepare(request)
        sockets = self._exec_sockets.setdefault(name, set())
        sockets.add(ws)
        try:
            await self._exec_stream(ws, container_id, command, flags)
        except (ConnectionError, docker.errors.APIError, OSError) as exc:
            failure = status_body(
                500, "InternalError", f"error executing command in container: {exc}"
            )
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_bytes(b"\x03" + json.dumps(failure).encode())
        finally:
            sockets.discard(ws)
            if not sockets:
                self._exec_sockets.pop(name, None)
            await ws.close()
        return ws

    async def _exec_stream(
        self,
        ws: web.WebSocketResponse,
        container_id: str,
        command: list[str],
        flags: dict[str, bool],
    ) -> None:
        created = await self._docker(
            self.docker.api.exec_create,
            container_id,
            command,
            stdout=flags["stdout"],
            stderr=flags["stderr"],
            stdin=flags["stdin"],
        )
        exec_id = created["Id"]
        reader, writer = await self._docker_attach(exec_id)
        feeder = asyncio.get_running_loop().create_task(
            self._feed_stdin(ws, writer, flags["stdin"])
        )
        try:
            async for channel, payload in _demux(reader):
                await ws.send_bytes(bytes([channel]) + payload)
        finally:
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeder
            writer.close()
        while (info := await self._docker(self.docker.api.exec_inspect, exec_id))["Running"]:
            await asyncio.sleep(0.002)
        code = info["ExitCode"]
        if code == 0:
            result = {"metadata": {}, "status": "Success"}
        else:
            result = {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: error executing command "
                f"{command}, exit code {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        await ws.send_bytes(b"\x03" + json.dumps(result).encode())

    async def _feed_stdin(
        self, ws: web.WebSocketResponse, writer: asyncio.StreamWriter, stdin: bool
    ) -> None:
        """Forward channel 0 to the process; a v5 close of channel 0 is its end of input."""
        async for message in ws:
            if message.type != WSMsgType.BINARY or not message.data:
                continue
            channel, payload = message.data[0], message.data[1:]
            if channel == 0 and stdin and payload:
                writer.write(payload)
                await writer.drain()
            elif channel == 255 and ws.ws_protocol == V5 and payload[:1] == b"\x00" and stdin:
                with contextlib.suppress(OSError):
                    writer.write_eof()
        if stdin:  # the websocket is gone: like the kubelet, end the process's input
            with contextlib.suppress(OSError):
                writer.write_eof()

    async def _docker_attach(
        self, exec_id: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Start an exec with docker's hijacked stream (``Upgrade: tcp``)."""
        host = self.docker_host
        if host.startswith("unix://"):
            reader, writer = await asyncio.open_unix_connection(host[len("unix://") :])
        elif host.startswith("tcp://"):
            address, _, port = host[len("tcp://") :].rpartition(":")
            reader, writer = await asyncio.open_connection(address, int(port))
        else:
            raise OSError(f"unsupported DOCKER_HOST {host}")
        body = b'{"Detach":false,"Tty":false}'
        writer.write(
            f"POST /v{self.docker.api.api_version}/exec/{exec_id}/start HTTP/1.1\r\n"
            "Host: docker\r\n"
            f"Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status not in (101, 200):
            writer.close()
            raise OSError(f"docker exec start answered {head.splitlines()[0].decode()}")
        return reader, writer


async def _demux(reader: asyncio.StreamReader) -> AsyncIterator[tuple[int, bytes]]:
    """Docker's multiplexed stream: 8-byte headers (stream, 0, 0, 0, size) then the payload."""
    while True:
        try:
            header = await reader.readexactly(8)
        except asyncio.IncompleteReadError:
            return
        size = int.from_bytes(header[4:8], "big")
        payload = await reader.readexactly(size)
        for offset in range(0, len(payload), 1 << 16):
            yield header[0], payload[offset : offset + (1 << 16)]


def _condition(
    kind: str, status: str, reason: str | None = None, message: str | None = None
) -> dict:
    condition = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": now_rfc3339(),
    }
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def _waiting(container: dict, reason: str, message: str | None = None) -> dict:
    waiting = {"reason": reason} | ({"message": message} if message else {})
    return {
        "name": container["name"],
        "image": container["image"],
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 0,
        "state": {"waiting": waiting},
        "lastState": {},
    }


def _set_waiting(container: dict, reason: str, message: str) -> Callable[[dict], None]:
    def change(pod: dict) -> None:
        statuses = pod["status"].setdefault("containerStatuses", [])
        for i, status in enumerate(statuses):
            if status["name"] == container["name"]:
                statuses[i] = _waiting(container, reason, message)

    return change


def _strip_type(obj: dict) -> dict:
    """List items carry no kind/apiVersion, as in a real list response."""
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _host_memory() -> float:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    return float(8 << 30)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- pytest fixtures (re-exported by tests/conftest.py) ----------------------------------------

try:
    import pytest
except ImportError:  # standalone use without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def k8s_api(docker_client, sandbox_image, tmp_path_factory) -> Iterator[KubeAPIStandIn]:
        """The stand-in API server for this test process, with a kubeconfig pointing at it."""
        server = KubeAPIStandIn()
        server.start()
        server.write_kubeconfig(tmp_path_factory.mktemp("k8s") / "kubeconfig")
        yield server
        server.stop()

    @pytest.fixture(scope="session")
    def k8s_kubeconfig(k8s_api: KubeAPIStandIn) -> Path:
        """The path of a kubeconfig whose current context is the stand-in's admin."""
        assert k8s_api.kubeconfig_path is not None
        return k8s_api.kubeconfig_path


# -- standalone --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument("--namespace", default="default", help="the contexts' namespace")
    args = parser.parse_args(argv)
    server = KubeAPIStandIn()
    url = server.start(args.host, args.port)
    path = server.write_kubeconfig(args.kubeconfig, args.namespace)
    print(f"k8s API stand-in serving on {url} (pods are docker containers)", flush=True)
    print(f"export KUBECONFIG={path}", flush=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
