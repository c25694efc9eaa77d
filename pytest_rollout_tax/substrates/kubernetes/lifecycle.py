"""The k8s control plane: create a pod and watch it to Ready through its phases, delete it and
watch until it is gone, reap a session's pods, and read the image pull time afterwards."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from ...core.pool_stats import PoolStats
from ...core.price import GIB, Resources
from ...core.record import PhaseClock, Rollout
from ...core.shell import ShellTransport
from ...core.substrate import ROLLOUT_LABEL, SESSION_LABEL, Substrate
from ...core.transport import Transport
from ...errors import RolloutTaxError, SandboxError, SandboxStartError, SubstrateUnavailable
from . import events
from .agent_sandbox import CLAIM, Objects
from .api import POD, PODS, Api, ApiError
from .claims import ClaimHandle, Claims
from .client import parse_quantity
from .config import KubernetesOptions, load_cluster
from .exec_transport import PodExec, PodHandle
from .exec_ws import ExecStream
from .manifest import base_pod

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


class _NotReady(Exception):
    def __init__(self, pod: dict[str, Any] | None) -> None:
        self.pod = pod


class _StartFailed(Exception):
    """The pod can never become ready (image pull failure, container exited, pod failed)."""


class KubernetesSubstrate(Substrate):
    """Pods on the cluster of a kubeconfig context (or the one this process runs in)."""

    kind = "k8s"
    Options = KubernetesOptions
    transports = ("exec", "session")

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        cluster = load_cluster(self.options)
        self.context, self.namespace = cluster.context, cluster.namespace
        self.server: str = cluster.configuration.host
        self._base = base_pod(self.options)
        self.workdir = self._base.workdir
        #: The API server's client, shared by every sandbox of this substrate.
        self.api = Api(cluster)
        try:
            self.api.call("GET", PODS, verb="list", resource="pods", query=[("limit", "1")])
        except ApiError as exc:
            self.api.close()
            raise SubstrateUnavailable(str(exc)) from None
        #: ``api = "claim"``: the agent-sandbox claims (None: a pod per rollout).
        self.claims: Claims | None = None
        if self.options.api == "claim":
            objects = Objects(self.api)
            try:
                objects.check_installed()
            except SubstrateUnavailable:
                self.api.close()
                raise
            self.claims = Claims(objects, self.options, self.session_id)

    def pod_manifest(self, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
        """The pod this substrate creates for a sandbox ``name`` with ownership ``labels``."""
        return self._base.manifest(name, self.namespace, labels)

    # -- the sandbox lifecycle -------------------------------------------------------------

    @property
    def secrets(self) -> list[str]:
        return self.api.secrets

    def _prepare(self) -> None:
        """Claims: the tool's template and pool applied (``template_from``), or the user's
        pool found, once, before the first rollout."""
        if self.claims is not None:
            self.claims.prepare(self.pod_manifest("rollout-tax-sandbox", {}))

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> PodHandle:
        name = f"rollout-tax-{labels[ROLLOUT_LABEL]}"
        if self.claims is not None:
            base = PodHandle(
                id="", workdir=self.workdir, container=self._base.container, resource_version=""
            )
            return self.claims.claim(name, labels, clock, base)
        deadline = clock.started + self.options.ready_timeout
        try:
            created = self.api.call(
                "POST", PODS, verb="create", resource="pods", body=self.pod_manifest(name, labels)
            )
        except ApiError as exc:
            if 0 < exc.code < 500:  # refused: nothing was created
                raise SandboxStartError(str(exc)) from None
            # No answer (timed out, connection reset) or a server error: the pod may exist.
            raise SandboxStartError(f"{exc}; {self._delete_after_failure(name)}") from None
        clock.mark("created")
        try:
            version = self._wait_ready(
                name, created["metadata"]["resourceVersion"], clock, deadline
            )
        except _NotReady as exc:
            state = events.not_ready_report(self.api, name, exc.pod)
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
        return PodHandle(
            id=name, workdir=self.workdir, container=self._base.container, resource_version=version
        )

    def _transport(self, handle: PodHandle) -> Transport:
        if self.options.transport == "session":
            return ShellTransport(
                lambda: ExecStream(self.api, handle.id, handle.container), substrate=self.name
            )
        return PodExec(self.api, handle, substrate=self.name)

    def after_cold_start(self, handle: PodHandle, rollout: Rollout) -> None:
        """The image pull time from the kubelet's Pulled event (one GET, untimed); without
        readable events, the gap from ``scheduled`` to ``containers_ready``, an upper bound."""
        if isinstance(handle, ClaimHandle) and self.claims is not None:
            rollout.launch_type = self.claims.launch_type(handle.id)
            return
        found = events.image_pull_seconds(self.api, handle.id)
        phases = rollout.phases
        if found is None and "scheduled" in phases and "containers_ready" in phases:
            found = phases.get("initialized", 0.0) + phases["containers_ready"]
        if found is not None:
            phases["image_pull"] = found

    def destroy(self, handle: PodHandle) -> None:
        if isinstance(handle, ClaimHandle) and self.claims is not None:
            self.claims.release(handle)
            return
        self._delete(handle.id, handle.resource_version)

    def reap(self, session_id: str | None = None) -> int:
        """Delete the pods labelled with ``session_id`` (any session if None) in the namespace."""
        selector = f"{SESSION_LABEL}={session_id}" if session_id else SESSION_LABEL
        return self._reap_claims(session_id) + self._delete_pods(selector)

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Delete the pods, or in claim mode the SandboxClaims (their Sandboxes and pods go
        with them), labelled with ``labels``: one create's, Pending ones included."""
        selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
        if self.claims is not None:
            return self.claims.remove(selector, kinds=(CLAIM,))
        return self._delete_pods(selector)

    def _delete_pods(self, selector: str) -> int:
        """Delete the pods ``selector`` picks in the namespace; how many were there."""
        removed = 0
        query = [("labelSelector", selector)]
        pods = self.api.call("GET", PODS, verb="list", resource="pods", query=query)
        for pod in pods.get("items") or []:
            try:
                self.api.call(
                    "DELETE", POD, verb="delete", resource="pods", name=pod["metadata"]["name"]
                )
                removed += 1
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return removed

    def _reap_claims(self, session_id: str | None) -> int:
        """The agent-sandbox objects of ``session_id``; in pod mode only where the cluster has
        them and the account may list them."""
        if self.claims is not None:
            return self.claims.reap(session_id)
        try:
            return Claims(Objects(self.api), self.options, self.session_id).reap(session_id)
        except ApiError as exc:
            if exc.code in (403, 404):
                return 0
            raise

    @property
    def resources(self) -> Resources:
        """The pod's requests: what GKE Autopilot bills for. A request that is no quantity
        is left to the API server to refuse (its 422 names it); its price is unknown."""
        memory = quantity(self.options.memory)
        return Resources(
            vcpus=quantity(self.options.cpu),
            gib=memory / GIB if memory is not None else None,
        )

    @property
    def endpoint(self) -> str:
        return self.server

    def ping(self) -> None:
        self.api.call("GET", "/version", verb="get", resource="version")

    def close_own_pool(self) -> PoolStats | None:
        """Claim mode: the SandboxWarmPool's figures (the tool's pool deleted now)."""
        return self.claims.close_pool() if self.claims is not None else None

    def close(self) -> None:
        if self.claims is not None:
            self.claims.close()
        self.api.close()

    # -- readiness ---------------------------------------------------------------------------

    def _wait_ready(
        self, name: str, resource_version: str, clock: PhaseClock, deadline: float
    ) -> str:
        """Follow the pod with a watch until Ready, marking each condition as it turns True."""
        marked: set[str] = set()
        pod: dict[str, Any] | None = None
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise _NotReady(pod)
            if not resource_version:  # the watch expired (410 Gone): start over from a read
                try:
                    pod = self.api.call("GET", POD, verb="get", resource="pods", name=name)
                except ApiError as exc:
                    if exc.code == 404:
                        raise _StartFailed(f"pod {name} was deleted while starting") from None
                    raise
                resource_version = pod["metadata"]["resourceVersion"]
                if self._advance(pod, clock, marked):
                    return resource_version
            with contextlib.closing(self.api.watch(name, resource_version, remaining)) as watch:
                for kind, obj in watch:
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

    def _advance(self, pod: dict[str, Any], clock: PhaseClock, marked: set[str]) -> bool:
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
                image = container.get("image") or pod["spec"]["containers"][0].get("image")
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

    # -- deletion ----------------------------------------------------------------------------

    def _delete(self, name: str, resource_version: str, timeout: float | None = None) -> None:
        """Delete pod ``name`` and return once a watch has seen it gone."""
        deadline = time.perf_counter() + (timeout or self.options.delete_timeout)
        try:
            self.api.call("DELETE", POD, verb="delete", resource="pods", name=name)
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
                    pod = self.api.call("GET", POD, verb="get", resource="pods", name=name)
                except ApiError as exc:
                    if exc.code == 404:
                        return
                    raise
                resource_version = pod["metadata"]["resourceVersion"]
            with contextlib.closing(self.api.watch(name, resource_version, remaining)) as watch:
                for kind, obj in watch:
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


def quantity(text: str | None) -> float | None:
    """A Kubernetes quantity (``500m``, ``2Gi``) as a number; None when unset or invalid."""
    try:
        return float(parse_quantity(text)) if text else None
    except (ValueError, ArithmeticError):  # the client's error differs across versions
        return None
