"""``k8s`` (alias ``kubernetes``): one pod per sandbox, through the official kubernetes client.

Cold start is the pod's create request, then one watch that follows the pod's condition
transitions (``created``, ``scheduled``, ``initialized``, ``containers_ready``, ``ready``; the
core adds ``first_exec``). Commands run over the exec websocket (``v5.channel.k8s.io`` or
``v4.channel.k8s.io``): stdout and stderr on their own channels, the exit code from the
``Status`` on channel 3. Files travel over the same exec stream: stdin into ``head -c N`` to
write, ``cat`` to read, byte-exact. Every exec connects within the API's connect timeout; a
step with a timeout ends by its deadline, a file step without one when no data came for the
API's read timeout (an exec without one runs as long as its command). After the cold start,
untimed, one read of the pod's events gives the image pull time (``image_pull``: reported, not
counted in the cold start). Teardown deletes the pod and watches until it is gone.

Only the client's own REST and websocket machinery is used (``ApiClient.param_serialize``,
``call_api``, and ``ws_client.create_websocket``'s way of opening the exec websocket, with a
timeout added), with raw JSON instead of the generated models, so a cold start costs its API
round trips and nothing more; the ``stream()`` helper, which monkeypatches a shared ApiClient,
is not used.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import json
import math
import os
import posixpath
import re
import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..contract import READ_SCRIPT, WRITE_SCRIPT, file_error_for
from ..errors import (
    ConfigError,
    CredentialsMissing,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    StepTimeout,
    SubstrateUnavailable,
)
from ..record import PhaseClock, Rollout
from ..sandbox import (
    NOOP,
    ROLLOUT_LABEL,
    SESSION_LABEL,
    RawResult,
    Sandbox,
    Substrate,
    shell_command,
)
from . import SANDBOX_IMAGE as DEFAULT_IMAGE

try:
    import certifi
    import urllib3
    import yaml
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.stream import ws_client
    from kubernetes.watch.watch import iter_resp_lines
    from websocket import (
        ABNF,
        WebSocket,
        WebSocketBadStatusException,
        WebSocketConnectionClosedException,
        WebSocketException,
        WebSocketTimeoutException,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SubstrateUnavailable(
        f"k8s: the kubernetes client is not installed ({exc.name} is missing); "
        "pip install 'pytest-rollout-tax[k8s]'"
    ) from None
if not hasattr(k8s_client.ApiClient, "param_serialize"):  # pragma: no cover
    # Clients before 37 were generated differently (ApiClient.call_api took other arguments).
    raise SubstrateUnavailable(
        f"k8s: kubernetes client {getattr(k8s_client, '__version__', '?')} is too old (37 or "
        "newer is needed); pip install 'pytest-rollout-tax[k8s]'"
    )

#: The sandbox image when neither ``k8s.image`` nor the pod template names one (as for docker).
DEFAULT_WORKDIR = "/workspace"
CONTAINER = "sandbox"
PODS = "/api/v1/namespaces/{namespace}/pods"
POD = PODS + "/{name}"
EXEC = POD + "/exec"
EVENTS = "/api/v1/namespaces/{namespace}/events"
V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
#: (connect, read) seconds for one REST request.
API_TIMEOUT = (10.0, 60.0)
#: Condition type -> cold-start phase, in the order a pod goes through them.
CONDITION_PHASES = (
    ("PodScheduled", "scheduled"),
    ("Initialized", "initialized"),
    ("ContainersReady", "containers_ready"),
    ("Ready", "ready"),
)
PULL_FAILURES = {
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "RegistryUnavailable",
    "ImageInspectError",
}
START_FAILURES = {
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
    "StartError",
}
#: stdin frames are sent in pieces of this size.
STDIN_CHUNK = 256 * 1024
#: How long after a step's timeout the client gives up waiting for the killed process's status.
KILL_GRACE = 10.0
#: ``timeout -s KILL`` exits 128 + SIGKILL when it had to kill the command.
KILLED = 137
#: How runc reports a command that does not exist, whichever container runtime relays it.
_OCI_NOT_FOUND = re.compile(
    r"\s*OCI runtime exec failed: .*(executable file not found|no such file or directory)", re.S
)


@dataclass
class KubernetesOptions:
    #: kubeconfig path(s), ``:``-separated (default: ``$KUBECONFIG``, then ``~/.kube/config``,
    #: then the in-cluster service account).
    kubeconfig: str | None = None
    #: kubeconfig context (default: its current context).
    context: str | None = None
    #: Namespace for the pods (default: the context's namespace, else ``default``).
    namespace: str | None = None
    #: Container image (default: the pod template's, else rollout-tax/sandbox:bookworm).
    image: str | None = None
    #: ``Always``, ``IfNotPresent`` (default) or ``Never``.
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    #: CPU request and limit, e.g. ``500m`` or ``2``.
    cpu: str | None = None
    #: Memory request and limit, e.g. ``512Mi``.
    memory: str | None = None
    #: ``spec.runtimeClassName`` (gVisor, Kata, ...).
    runtime_class: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    #: ``key[=value][:Effect]`` strings or toleration objects (JSON / TOML tables).
    tolerations: list[str | dict[str, str]] = field(default_factory=list)
    #: ``spec.serviceAccountName``; its token is never mounted.
    service_account: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    #: Seconds from the create request until the pod must be Ready.
    ready_timeout: float = 300.0
    #: Seconds teardown waits for the pod to be gone.
    delete_timeout: float = 60.0
    #: Working directory of the sandbox (default: the template's ``workingDir``, else /workspace).
    workdir: str | None = None
    #: A YAML Pod manifest (or PodSpec) merged under these options, for what they don't cover.
    pod_template: str | None = None

    def check(self) -> None:
        for key in ("ready_timeout", "delete_timeout"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key}={getattr(self, key)}: must be > 0 seconds")
        if self.workdir is not None and not self.workdir.startswith("/"):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")
        for item in self.tolerations:
            toleration(item)


def toleration(item: str | Mapping[str, Any]) -> dict[str, Any]:
    """A toleration from ``key[=value][:Effect]`` (kubectl taint syntax) or a mapping."""
    if isinstance(item, Mapping):
        result = dict(item)
        if "tolerationSeconds" in result:
            result["tolerationSeconds"] = int(result["tolerationSeconds"])
        return result
    match = re.fullmatch(
        r"([^=:\s]+)(?:=([^:\s]*))?(?::(NoSchedule|PreferNoSchedule|NoExecute))?", item
    )
    if not match:
        raise ValueError(
            f"toleration {item!r}: expected key[=value][:NoSchedule|PreferNoSchedule|NoExecute]"
        )
    key, value, effect = match.groups()
    result: dict[str, Any] = {"key": key, "operator": "Equal" if value is not None else "Exists"}
    if value is not None:
        result["value"] = value
    if effect:
        result["effect"] = effect
    return result


class ApiError(SandboxError):
    """A refused or failed API request; the message names what was refused, never a secret.

    Its message is ``k8s: `` and :attr:`detail`; ``code`` is the HTTP status, 0 when no answer
    arrived (unreachable, timed out, connection reset).
    """

    def __init__(self, detail: str, code: int = 0, reason: str = "") -> None:
        super().__init__(f"k8s: {detail}")
        self.detail = detail
        self.code = code
        self.reason = reason


class _NotReady(Exception):
    def __init__(self, pod: dict | None) -> None:
        self.pod = pod


class _StartFailed(Exception):
    """The pod can never become ready (image pull failure, container exited, pod failed)."""


class _Deadline(Exception):
    """The client-side deadline of an exec passed."""


class KubernetesSandbox(Sandbox):
    """One pod; every step is one exec websocket."""

    def __init__(
        self,
        *,
        substrate: KubernetesSubstrate,
        name: str,
        container: str,
        resource_version: str,
        pull_fallback: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.substrate = substrate
        self.name = name
        self.container = container
        self._resource_version = resource_version
        self._pull_fallback = pull_fallback

    def _run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        command = (
            list(argv) if not env and cwd == self.workdir else shell_command(argv, env=env, cwd=cwd)
        )
        # A timed step runs under `timeout`, which kills it in the pod at the deadline. Not the
        # no-op probe: the action tax is measured without our wrapper (as for docker); it
        # cannot hang, and the client-side deadline still covers the API server.
        wrapped = timeout is not None and argv != list(NOOP)
        if wrapped:
            command = ["timeout", "-s", "KILL", f"{max(timeout, 0.001):.3f}", *command]
        started = time.perf_counter()
        deadline = started + timeout + KILL_GRACE if timeout is not None else None
        try:
            code, stdout, stderr = self.substrate._exec(
                self.name, self.container, command, deadline=deadline
            )
        except _Deadline:
            # The message names no command (it may carry secrets) and is the same for every
            # step with this timeout, so the summary can count it as one reason.
            raise StepTimeout(
                f"k8s: step ran past its {timeout:g} s timeout, and {KILL_GRACE:g} s later its "
                "exit status had not arrived"
            ) from None
        if wrapped and code == KILLED and time.perf_counter() - started >= timeout:
            raise StepTimeout(f"k8s: step ran past its {timeout:g} s timeout; killed")
        return RawResult(code, stdout, stderr)

    def _write(self, path: str, data: bytes) -> None:
        argv = ["sh", "-c", WRITE_SCRIPT, "sh", path, str(len(data))]
        code, _, stderr = self._file_exec(argv, data)
        if code != 0:
            raise file_error_for(code, path) or _os_error(
                path, stderr, f"cannot write {path} in pod {self.name}"
            )

    def _read(self, path: str) -> bytes:
        code, stdout, stderr = self._file_exec(["sh", "-c", READ_SCRIPT, "sh", path])
        if code != 0:
            raise file_error_for(code, path) or _os_error(
                path, stderr, f"cannot read {path} in pod {self.name}"
            )
        return stdout

    def _file_exec(
        self, command: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes, bytes]:
        """A file step's exec: within the sandbox's timeout if it has one, else the API's."""
        timeout = self.timeout
        deadline = None if timeout is None else time.perf_counter() + timeout
        try:
            return self.substrate._exec(
                self.name,
                self.container,
                command,
                stdin=stdin,
                deadline=deadline,
                idle=None if timeout is not None else API_TIMEOUT[1],
            )
        except _Deadline:
            if timeout is not None:
                raise StepTimeout(
                    f"k8s: step ran past its {timeout:g} s timeout; it may still be running"
                ) from None
            raise SandboxError(
                f"k8s: a file step got no data for {API_TIMEOUT[1]:g} s; its stream was closed"
            ) from None

    def _destroy(self) -> None:
        self.substrate._delete(self.name, self._resource_version)

    def _after_cold_start(self) -> None:
        """The image pull time, from the kubelet's Pulled event: one GET, after the cold start."""
        found = self.substrate._image_pull_seconds(self.name)
        if found is None:
            found = self._pull_fallback
        if found is not None:
            self.rollout.phases["image_pull"] = found


class KubernetesSubstrate(Substrate):
    """Pods on the cluster of a kubeconfig context (or the one this process runs in)."""

    kind = "k8s"
    Options = KubernetesOptions

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        self._configuration, self.context, self.namespace = self._load_config()
        self.server = self._configuration.host
        self._pod, self._container = self._base_pod()
        self.workdir = self._container_spec(self._pod)["workingDir"]
        self._api = k8s_client.ApiClient(self._configuration)
        try:
            self._call("GET", PODS, verb="list", resource="pods", query=[("limit", "1")])
        except ApiError as exc:
            self._api.close()
            raise SubstrateUnavailable(str(exc)) from None

    # -- configuration ---------------------------------------------------------------------

    def _load_config(self) -> tuple[Any, str, str]:
        """The client configuration, the context's name and the namespace to use."""
        configuration = k8s_client.Configuration()
        configured = self.options.kubeconfig or os.environ.get("KUBECONFIG")
        paths = configured or "~/.kube/config"
        existing = [
            p
            for p in (os.path.expanduser(p) for p in paths.split(os.pathsep) if p)
            if os.path.exists(p)
        ]
        if existing:
            source = os.pathsep.join(existing)
            try:
                contexts, current = k8s_config.list_kube_config_contexts(config_file=source)
                wanted = self.options.context or (current or {}).get("name")
                context = next((c for c in contexts if c.get("name") == wanted), None)
                if context is None:
                    names = ", ".join(sorted(str(c.get("name")) for c in contexts)) or "none"
                    raise ConfigError(
                        f"k8s: kubeconfig {source}: no context {wanted!r} (contexts: {names})"
                    )
                k8s_config.load_kube_config(
                    config_file=source,
                    context=wanted,
                    client_configuration=configuration,
                    persist_config=False,
                )
            except (ConfigException, yaml.YAMLError, OSError, TypeError, AttributeError) as exc:
                raise ConfigError(f"k8s: kubeconfig {source}: {_one_line(exc)}") from None
            namespace = (
                self.options.namespace
                or (context.get("context") or {}).get("namespace")
                or "default"
            )
            context_name = str(wanted)
        elif configured:
            raise ConfigError(f"k8s: kubeconfig {configured} does not exist")
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)
            except ConfigException as exc:
                raise SubstrateUnavailable(f"k8s: in-cluster configuration: {exc}") from None
            namespace = self.options.namespace or _in_cluster_namespace()
            context_name = "in-cluster"
        else:
            raise CredentialsMissing(
                "k8s: no kubeconfig (KUBECONFIG is unset and ~/.kube/config does not exist) "
                "and not running inside a cluster; set KUBECONFIG or k8s.kubeconfig"
            )
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 32)
        return configuration, context_name, namespace

    def _base_pod(self) -> tuple[dict, str]:
        """The pod every sandbox starts from: defaults, then the template, then the options."""
        options = self.options
        default_container = {
            "name": CONTAINER,
            "image": DEFAULT_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "command": ["sleep", "infinity"],
            "workingDir": DEFAULT_WORKDIR,
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        }
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {},
            "spec": {
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
            },
        }
        template = self._read_template()
        spec_template = dict(template.get("spec") or {})
        containers = spec_template.pop("containers", None) or []
        pod = _merge(pod, {"metadata": template.get("metadata") or {}, "spec": spec_template})
        index = next((i for i, c in enumerate(containers) if c.get("name") == CONTAINER), 0)
        sandbox = _merge(default_container, containers[index] if containers else {})
        others = [c for i, c in enumerate(containers) if i != index]
        pod["spec"]["containers"] = [sandbox, *others]
        meta, spec = pod["metadata"], pod["spec"]
        for key in (
            "name",
            "generateName",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ):
            meta.pop(key, None)
        pod.pop("status", None)
        if options.image:
            sandbox["image"] = options.image
        if options.image_pull_policy:
            sandbox["imagePullPolicy"] = options.image_pull_policy
        if options.workdir:
            sandbox["workingDir"] = options.workdir
        sandbox["workingDir"] = posixpath.normpath(sandbox.get("workingDir") or DEFAULT_WORKDIR)
        resources = sandbox.setdefault("resources", {})
        for key, value in (("cpu", options.cpu), ("memory", options.memory)):
            if value:
                resources.setdefault("requests", {})[key] = value
                resources.setdefault("limits", {})[key] = value
        if not resources:
            del sandbox["resources"]
        if options.runtime_class:
            spec["runtimeClassName"] = options.runtime_class
        if options.node_selector:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **options.node_selector}
        if options.tolerations:
            spec["tolerations"] = [
                *(spec.get("tolerations") or []),
                *map(toleration, options.tolerations),
            ]
        if options.service_account:
            spec["serviceAccountName"] = options.service_account
        if options.labels:
            meta["labels"] = {**(meta.get("labels") or {}), **options.labels}
        if options.annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **options.annotations}
        return pod, sandbox["name"]

    def _read_template(self) -> dict:
        path = self.options.pod_template
        if not path:
            return {}
        where = f"k8s.pod_template={path}"
        try:
            data = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{where}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{where}: not valid YAML: {_one_line(exc)}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a Pod manifest (a mapping)")
        if "containers" in data:  # a bare PodSpec
            data = {"spec": data}
        if data.get("kind", "Pod") != "Pod":
            raise ConfigError(f"{where}: expected kind Pod, got {data.get('kind')!r}")
        spec = data.get("spec") or {}
        if not isinstance(spec, dict) or not isinstance(data.get("metadata") or {}, dict):
            raise ConfigError(f"{where}: metadata and spec must be mappings")
        containers = spec.get("containers") or []
        if not isinstance(containers, list) or not all(isinstance(c, dict) for c in containers):
            raise ConfigError(f"{where}: spec.containers must be a list of mappings")
        return data

    @staticmethod
    def _container_spec(pod: dict) -> dict:
        return pod["spec"]["containers"][0]

    def pod_manifest(self, name: str, labels: Mapping[str, str]) -> dict:
        """The pod this substrate creates for a sandbox ``name`` with ownership ``labels``."""
        pod = copy.deepcopy(self._pod)
        meta = pod["metadata"]
        meta["name"] = name
        meta["namespace"] = self.namespace
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
        return pod

    # -- the sandbox lifecycle -------------------------------------------------------------

    def _create(self, *, rollout: Rollout, labels: dict[str, str], clock: PhaseClock) -> Sandbox:
        name = f"rollout-tax-{labels[ROLLOUT_LABEL]}"
        deadline = clock.started + self.options.ready_timeout
        try:
            created = self._call(
                "POST", PODS, verb="create", resource="pods", body=self.pod_manifest(name, labels)
            )
        except ApiError as exc:
            if 0 < exc.code < 500:  # refused: nothing was created
                raise SandboxStartError(str(exc)) from None
            # No answer (timed out, connection reset) or a server error: the pod may exist.
            raise SandboxStartError(f"{exc}; {self._delete_after_failure(name)}") from None
        clock.mark("created")
        try:
            resource_version = self._wait_ready(
                name, created["metadata"]["resourceVersion"], clock, deadline
            )
        except _NotReady as exc:
            state = self._not_ready_report(name, exc.pod)
            raise SandboxStartError(
                f"k8s: pod {name} in namespace {self.namespace!r} not ready after "
                f"{self.options.ready_timeout:g} s (k8s.ready_timeout): {state}; "
                f"{self._delete_after_failure(name)}"
            ) from None
        except _StartFailed as exc:
            raise SandboxStartError(f"k8s: {exc}; {self._delete_after_failure(name)}") from None
        except ApiError as exc:
            raise SandboxStartError(f"{exc}; {self._delete_after_failure(name)}") from None
        except BaseException:
            self._delete_after_failure(name)
            raise
        phases = rollout.phases
        gap = None  # the image pull time if the kubelet's events are not readable
        if "scheduled" in phases and "containers_ready" in phases:
            gap = phases.get("initialized", 0.0) + phases["containers_ready"]
        return KubernetesSandbox(
            substrate=self,
            name=name,
            container=self._container,
            resource_version=resource_version,
            pull_fallback=gap,
            workdir=self.workdir,
            rollout=rollout,
        )

    def _wait_ready(
        self, name: str, resource_version: str, clock: PhaseClock, deadline: float
    ) -> str:
        """Follow the pod with a watch until Ready, marking each condition as it turns True."""
        marked: set[str] = set()
        pod: dict | None = None
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise _NotReady(pod)
            if not resource_version:  # the watch expired (410 Gone): start over from a read
                try:
                    pod = self._call("GET", POD, verb="get", resource="pods", name=name)
                except ApiError as exc:
                    if exc.code == 404:
                        raise _StartFailed(f"pod {name} was deleted while starting") from None
                    raise
                resource_version = pod["metadata"]["resourceVersion"]
                if self._advance(pod, clock, marked):
                    return resource_version
            with contextlib.closing(self._watch(name, resource_version, remaining)) as events:
                for kind, obj in events:
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            resource_version = ""
                            break
                        raise ApiError(
                            f"watch pods: {obj.get('code')} {obj.get('reason')}: "
                            f"{obj.get('message')}"
                        )
                    metadata = obj.get("metadata") or {}
                    resource_version = metadata.get("resourceVersion") or resource_version
                    if kind == "DELETED":
                        raise _StartFailed(f"pod {name} was deleted while starting")
                    if kind in ("ADDED", "MODIFIED"):
                        pod = obj
                        if self._advance(pod, clock, marked):
                            return resource_version

    def _advance(self, pod: dict, clock: PhaseClock, marked: set[str]) -> bool:
        """Mark the phases whose condition turned True; raise if the pod can never start."""
        status = pod.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        for condition, phase in CONDITION_PHASES:
            if phase not in marked and conditions.get(condition) == "True":
                clock.mark(phase)
                marked.add(phase)
        if "ready" in marked:
            return True
        name = pod["metadata"]["name"]
        for container in status.get("containerStatuses") or []:
            state = container.get("state") or {}
            waiting = state.get("waiting") or {}
            reason = waiting.get("reason", "")
            if reason in PULL_FAILURES:
                image = container.get("image") or self._container_spec(pod).get("image")
                raise _StartFailed(
                    f"image pull failed ({reason}) for image {image!r} in pod {name}: "
                    f"{waiting.get('message') or 'no message'}"
                )
            if reason in START_FAILURES:
                raise _StartFailed(
                    f"container {container.get('name')} of pod {name} cannot start ({reason}): "
                    f"{waiting.get('message') or 'no message'}"
                )
            terminated = state.get("terminated")
            if terminated:
                raise _StartFailed(
                    f"container {container.get('name')} of pod {name} exited with code "
                    f"{terminated.get('exitCode')} ({terminated.get('reason', 'no reason')}) "
                    "before the pod was ready"
                )
        if status.get("phase") in ("Failed", "Succeeded"):
            raise _StartFailed(
                f"pod {name} {status['phase'].lower()} before it was ready: "
                f"{status.get('reason', '')} {status.get('message', '')}".rstrip()
            )
        return False

    def _watch(
        self, name: str, resource_version: str, seconds: float
    ) -> Iterator[tuple[str, dict]]:
        """The events of one watch on pod ``name`` after ``resource_version``, for ``seconds``."""
        query = [
            ("fieldSelector", f"metadata.name={name}"),
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(max(1, math.ceil(seconds)))),
            ("allowWatchBookmarks", "true"),
        ]
        response = self._call(
            "GET",
            PODS,
            verb="watch",
            resource="pods",
            query=query,
            stream=True,
            timeout=(API_TIMEOUT[0], seconds + 0.05),  # the deadline, not the whole second
        )
        try:
            for line in iter_resp_lines(response):
                if line:
                    event = json.loads(line)
                    yield event.get("type", ""), event.get("object") or {}
        except (urllib3.exceptions.HTTPError, OSError):
            return  # the stream broke: the caller watches again from the last version
        finally:
            response.close()  # an unfinished stream: drop the connection, never pool it
            response.release_conn()

    def _not_ready_report(self, name: str, pod: dict | None) -> str:
        """Why the pod is not ready (the scheduler's reason, a waiting container) and its events."""
        status = (pod or {}).get("status") or {}
        state = f"phase {status.get('phase', 'unknown')}"
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") != "True":
                state = (
                    f"still {status.get('phase', 'Pending')}, not scheduled: "
                    f"{condition.get('reason', '')}: {condition.get('message', '')}"
                )
                break
        else:
            for container in status.get("containerStatuses") or []:
                waiting = (container.get("state") or {}).get("waiting")
                if waiting:
                    state += (
                        f", container {container.get('name')} waiting: {waiting.get('reason', '')}"
                        f"{': ' + waiting['message'] if waiting.get('message') else ''}"
                    )
        try:
            events = self._pod_events(name)
        except ApiError as exc:
            return f"{state}; events not readable: {exc.detail}"
        last = "; ".join(
            f"[{e.get('type')}] {e.get('reason')}: {e.get('message')}" for e in events[-3:]
        )
        return f"{state}; last events: {last or 'none'}"

    def _pod_events(self, name: str) -> list[dict]:
        query = [("fieldSelector", f"involvedObject.kind=Pod,involvedObject.name={name}")]
        items = (
            self._call("GET", EVENTS, verb="list", resource="events", query=query).get("items")
            or []
        )

        def when(event: dict) -> str:
            return str(
                event.get("lastTimestamp")
                or event.get("eventTime")
                or (event.get("metadata") or {}).get("creationTimestamp")
                or ""
            )

        return sorted(items, key=when)

    def _image_pull_seconds(self, name: str) -> float | None:
        """The pull time the kubelet reported in the pod's Pulled event; 0 if already present."""
        try:
            events = self._pod_events(name)
        except ApiError:
            return None
        for event in events:
            if event.get("reason") != "Pulled":
                continue
            message = str(event.get("message", ""))
            if "already present on machine" in message:
                return 0.0
            match = re.search(r"\((\S+) including waiting\)", message) or re.search(
                r"Successfully pulled image \S+ in (\S+?)\.?(?:\s|$)", message
            )
            if match:
                seconds = go_duration_seconds(match.group(1))
                if seconds is not None:
                    return seconds
        return None

    def _delete(self, name: str, resource_version: str, timeout: float | None = None) -> None:
        """Delete pod ``name`` and return once a watch has seen it gone."""
        deadline = time.perf_counter() + (timeout or self.options.delete_timeout)
        try:
            self._call("DELETE", POD, verb="delete", resource="pods", name=name)
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise SandboxError(
                    f"k8s: pod {name} still exists {self.options.delete_timeout:g} s after its "
                    "deletion (k8s.delete_timeout)"
                )
            if not resource_version:
                try:
                    pod = self._call("GET", POD, verb="get", resource="pods", name=name)
                except ApiError as exc:
                    if exc.code == 404:
                        return
                    raise
                resource_version = pod["metadata"]["resourceVersion"]
            with contextlib.closing(self._watch(name, resource_version, remaining)) as events:
                for kind, obj in events:
                    if kind == "DELETED":
                        return
                    if kind == "ERROR":
                        resource_version = ""  # 410 Gone (or worse): read, then watch again
                        break
                    metadata = obj.get("metadata") or {}
                    resource_version = metadata.get("resourceVersion") or resource_version

    def _delete_after_failure(self, name: str) -> str:
        """Delete a pod that failed to start; say whether that worked."""
        try:
            self._delete(name, "", timeout=min(self.options.delete_timeout, 30.0))
        except RolloutTaxError as exc:
            return f"deleting the pod failed: {exc}"
        return "the pod was deleted"

    def reap(self, session_id: str | None = None) -> int:
        """Delete the pods labelled with ``session_id`` (any session if None) in the namespace."""
        selector = f"{SESSION_LABEL}={session_id}" if session_id else SESSION_LABEL
        pods = (
            self._call(
                "GET", PODS, verb="list", resource="pods", query=[("labelSelector", selector)]
            ).get("items")
            or []
        )
        removed = 0
        for pod in pods:
            try:
                self._call(
                    "DELETE", POD, verb="delete", resource="pods", name=pod["metadata"]["name"]
                )
                removed += 1
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return removed

    def close(self) -> None:
        self._api.close()

    # -- REST ------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: str,
        name: str | None = None,
        query: Sequence[tuple[str, str]] = (),
        body: dict | None = None,
        stream: bool = False,
        timeout: Any = API_TIMEOUT,
    ) -> Any:
        """One API request: its JSON (or the open response if ``stream``); ApiError if refused."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = self._api.call_api(
                *self._api.param_serialize(
                    method,
                    path,
                    path_params={"namespace": self.namespace, "name": name or ""},
                    query_params=list(query),
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                ),
                _request_timeout=timeout,
            )
        except (urllib3.exceptions.HTTPError, OSError, k8s_client.ApiException) as exc:
            raise self._unreachable(exc) from None
        raw = response.response
        if not 200 <= response.status <= 299:
            try:
                data = raw.data
            finally:
                raw.release_conn()
            raise self._refused(response.status, data, verb, resource, name)
        if stream:
            return raw
        try:
            return json.loads(response.read() or b"{}")
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._unreachable(exc) from None
        except ValueError:
            raise ApiError(
                f"{verb} {resource}: the API server answered with invalid JSON"
            ) from None

    def _unreachable(self, exc: BaseException) -> ApiError:
        reason = getattr(exc, "reason", None) or exc
        text = str(reason)
        found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
        if found:
            text = found.group(1).strip()
        elif isinstance(exc, urllib3.exceptions.ReadTimeoutError) or "timed out" in text:
            text = "no answer (timed out)"
        return ApiError(
            self._scrub(
                f"API server {self.server} unreachable (kubeconfig context {self.context!r}): "
                f"{_one_line(text)}"
            )
        )

    def _refused(
        self, code: int, data: bytes | None, verb: str, resource: str, name: str | None
    ) -> ApiError:
        """An ApiError for a non-2xx answer, naming what was refused."""
        try:
            status = json.loads(data or b"{}")
        except ValueError:
            status = {}
        status = status if isinstance(status, dict) else {}
        message = _one_line(str(status.get("message") or (data or b"").decode("utf-8", "replace")))[
            :500
        ]
        reason = str(status.get("reason") or "")
        target = f"{resource} {name!r}" if name else resource
        where = f"in namespace {self.namespace!r}"
        if code == 401:
            text = (
                f"unauthorized: the API server {self.server} rejected the credentials of "
                f"kubeconfig context {self.context!r} (401 Unauthorized) when asked to "
                f"{verb} {target} {where}"
            )
        elif code == 403:
            text = (
                f"forbidden: the API server refused to {verb} {target} {where} "
                f"(403 Forbidden): {message}"
            )
        elif code == 404 and (status.get("details") or {}).get("kind") == "namespaces":
            text = f"namespace {self.namespace!r} not found (when asked to {verb} {target})"
        elif code == 404:
            text = f"{target} not found {where} (404) when asked to {verb} it"
        else:
            text = f"{verb} {target} {where}: {code} {reason or 'error'}: {message}"
        return ApiError(self._scrub(text), code, reason)

    def _scrub(self, text: str) -> str:
        """``text`` without any credential of the configuration."""
        secrets = [str(v) for v in (self._configuration.api_key or {}).values() if v]
        secrets += [s.split(" ", 1)[1] for s in secrets if " " in s]
        secrets += [s for s in (self._configuration.password,) if s]
        for secret in sorted(set(secrets), key=len, reverse=True):
            if len(secret) >= 4:
                text = text.replace(secret, "<redacted>")
        return text

    # -- exec ------------------------------------------------------------------------------

    def _open_exec(
        self, name: str, container: str, command: list[str], stdin: bool, deadline: float | None
    ) -> Any:
        """The exec websocket for ``command`` in pod ``name``, connected within the API timeout."""
        query = [("command", part) for part in command] + [
            ("container", container),
            ("stdin", "true" if stdin else "false"),
            ("stdout", "true"),
            ("stderr", "true"),
            ("tty", "false"),
        ]
        timeout, by_deadline = API_TIMEOUT[0], False
        if deadline is not None:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise _Deadline
            if remaining < timeout:
                timeout, by_deadline = remaining, True
        request = self._api.param_serialize(
            "GET",
            EXEC,
            path_params={"namespace": self.namespace, "name": name},
            query_params=query,
            auth_settings=["BearerToken"],
        )
        try:
            return _websocket(self._configuration, request, timeout)
        except WebSocketBadStatusException as exc:
            raise self._refused(
                exc.status_code, exc.resp_body, "create", "pods/exec", name
            ) from None
        except (OSError, WebSocketException) as exc:
            if by_deadline and isinstance(exc, (TimeoutError, WebSocketTimeoutException)):
                raise _Deadline from None  # the step's deadline, not the API's, ran out
            raise self._unreachable(exc) from None

    def _exec(
        self,
        name: str,
        container: str,
        command: list[str],
        *,
        stdin: bytes | None = None,
        deadline: float | None = None,
        idle: float | None = None,
    ) -> tuple[int, bytes, bytes]:
        """Run ``command``; its exit code, stdout and stderr.

        Raises _Deadline past ``deadline``, or when ``idle`` seconds pass without a frame.
        Neither: it waits as long as the command runs (the connect is always bounded).
        """
        ws = self._open_exec(name, container, command, stdin is not None, deadline)

        def arm() -> None:  # the socket timeout for the next send or receive
            timeout = idle
            if deadline is not None:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    raise _Deadline
                timeout = remaining if idle is None else min(remaining, idle)
            ws.settimeout(timeout)

        stdout, stderr, status = bytearray(), bytearray(), bytearray()
        try:
            if stdin is not None:
                for offset in range(0, len(stdin), STDIN_CHUNK):
                    arm()
                    ws.send_binary(b"\x00" + stdin[offset : offset + STDIN_CHUNK])
                if ws.subprotocol == V5:
                    arm()
                    ws.send_binary(b"\xff\x00")  # v5: close stdin
            while True:
                arm()
                try:
                    opcode, frame = ws.recv_data_frame(True)
                except (WebSocketConnectionClosedException, ConnectionError):
                    break
                if opcode == ABNF.OPCODE_CLOSE:
                    break
                if opcode not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) or not frame.data:
                    continue
                data = frame.data if isinstance(frame.data, bytes) else frame.data.encode()
                channel, payload = data[0], data[1:]
                if channel == 1:
                    stdout += payload
                elif channel == 2:
                    stderr += payload
                elif channel == 3:
                    status += payload
        except WebSocketTimeoutException:
            raise _Deadline from None
        except (OSError, WebSocketException) as exc:
            raise SandboxError(
                f"k8s: exec in pod {name}: {self._unreachable(exc).detail}"
            ) from None
        finally:
            ws.shutdown()
        return self._exit_code(name, bytes(status), bytes(stdout), bytes(stderr))

    def _exit_code(
        self, name: str, status: bytes, stdout: bytes, stderr: bytes
    ) -> tuple[int, bytes, bytes]:
        """Read the ``Status`` of channel 3: Success, or NonZeroExitCode with its ExitCode cause."""
        if not status:
            raise SandboxError(f"k8s: exec in pod {name}: the stream ended without an exit status")
        unreadable = SandboxError(f"k8s: exec in pod {name}: unreadable exit status")
        try:
            result = json.loads(status)
        except ValueError:
            raise unreadable from None
        if not isinstance(result, dict):
            raise unreadable
        if result.get("status") == "Success":
            return 0, stdout, stderr
        if result.get("reason") == "NonZeroExitCode":
            for cause in (result.get("details") or {}).get("causes") or []:
                if cause.get("reason") == "ExitCode":
                    try:
                        code = int(cause.get("message", 1))
                    except (TypeError, ValueError):
                        raise unreadable from None
                    text = stdout.decode("utf-8", "replace")
                    if code == 126 and _OCI_NOT_FOUND.match(text):
                        # docker-based nodes: runc's message on stdout, exit 126
                        return 127, b"", stderr + text.replace("\r\n", "\n").encode()
                    return code, stdout, stderr
        message = self._scrub(_one_line(str(result.get("message", ""))))
        if _OCI_NOT_FOUND.search(message):
            # containerd / CRI-O nodes: an InternalError Status instead of an exit code
            return 127, stdout, stderr + message.encode() + b"\n"
        raise SandboxError(f"k8s: exec in pod {name} failed: {message or result}")


# -- helpers -------------------------------------------------------------------------------------


def _websocket(configuration: Any, request: tuple, timeout: float) -> WebSocket:
    """``ws_client.create_websocket`` for a serialized GET request, with ``timeout`` on the
    connect and the handshake (the client's own takes none, so an unanswered upgrade hangs)."""
    url, headers = ws_client.get_websocket_url(request[1]), request[2] or {}
    header = [f"sec-websocket-protocol: {V5},{V4}"]
    if "authorization" in headers:
        header.insert(0, f"authorization: {headers['authorization']}")
    if url.startswith("wss://") and configuration.verify_ssl:
        ssl_opts: dict[str, Any] = {
            "cert_reqs": ssl.CERT_REQUIRED,
            "ca_certs": configuration.ssl_ca_cert or certifi.where(),
        }
        if configuration.assert_hostname is not None:
            ssl_opts["check_hostname"] = configuration.assert_hostname
    else:
        ssl_opts = {"cert_reqs": ssl.CERT_NONE}
    if configuration.cert_file:
        ssl_opts["certfile"] = configuration.cert_file
    if configuration.key_file:
        ssl_opts["keyfile"] = configuration.key_file
    if configuration.tls_server_name:
        ssl_opts["server_hostname"] = configuration.tls_server_name
    options: dict[str, Any] = {"header": header}
    if configuration.proxy or configuration.proxy_headers:
        options = ws_client.websocket_proxycare(options, configuration, url, headers)
    websocket = WebSocket(sslopt=ssl_opts, skip_utf8_validation=False)
    websocket.connect(url, timeout=timeout, **options)
    return websocket


def _merge(base: dict, over: Mapping[str, Any]) -> dict:
    """``base`` with ``over`` merged in: mappings recursively, everything else replaced."""
    result = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


_GO_UNITS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
}


def go_duration_seconds(text: str) -> float | None:
    """Seconds in a Go duration string (``1m2.5s``, ``850ms``, ``1.2s``); None if it is not one."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|μs|ns)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _GO_UNITS[unit] for number, unit in parts)


def _os_error(path: str, stderr: bytes, what: str) -> OSError:
    message = stderr.decode("utf-8", "replace").strip() or "failed"
    for marker, kind, code in (
        ("Permission denied", PermissionError, errno.EACCES),
        ("Not a directory", NotADirectoryError, errno.ENOTDIR),
        ("Is a directory", IsADirectoryError, errno.EISDIR),
        ("Read-only file system", OSError, errno.EROFS),
        ("No space left", OSError, errno.ENOSPC),
    ):
        if marker in message:
            return kind(code, f"k8s: {what}: {_one_line(message)}", path)
    return OSError(errno.EIO, f"k8s: {what}: {_one_line(message)}", path)


def _one_line(value: object) -> str:
    return " ".join(str(value).split())


def _in_cluster_namespace() -> str:
    path = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    try:
        return path.read_text().strip() or "default"
    except OSError:
        return "default"
