"""``k8s.api = "claim"``: a rollout's sandbox is an agent-sandbox SandboxClaim.

Cold start: ``claimed`` (the claim's create answered), ``bound`` (the controller wrote
``status.sandbox.name``), ``ready`` (the claim's forwarded ``Ready`` turned True; the core adds
``first_exec``). The sandbox's pod bears the Sandbox's name; steps reach it over the exec
websocket as a plain pod's do. Teardown deletes the claim and watches its Sandbox gone (a
claim's sandbox is never returned to a pool). With ``template_from = "pod"`` a SandboxTemplate
and a SandboxWarmPool are applied before the first claim and removed when the substrate
closes; otherwise the user's template and the pool naming it are used and never touched.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from ...core.pool_stats import PoolStats
from ...core.record import PhaseClock
from ...core.substrate import SESSION_LABEL, new_id
from ...errors import RolloutTaxError, SandboxError, SandboxStartError, SandboxUnbound
from ..pacing import CreatePacer
from .agent_sandbox import (
    CLAIM,
    LAUNCH_TYPE_LABEL,
    MADE,
    POOL,
    SANDBOX,
    TEMPLATE,
    TERMINAL_REASONS,
    Kind,
    Objects,
    claim_manifest,
    condition,
    conditions_text,
    pool_manifest,
    template_manifest,
)
from .api import ApiError
from .config import KubernetesOptions
from .exec_transport import PodHandle
from .pool_idle import PoolIdle


class ClaimUnbound(SandboxUnbound):
    """A claim the controller did not bind within ``k8s.ready_timeout`` (outcome ``unbound``)."""


@dataclass
class ClaimHandle(PodHandle):
    """A claimed sandbox: ``id`` is its pod (the Sandbox's name), ``claim`` the claim's."""

    claim: str = ""


class Claims:
    """The claims of one substrate: its pool (found or made), pacing, claim and release."""

    def __init__(self, objects: Objects, options: KubernetesOptions, session_id: str) -> None:
        self.objects = objects
        self.options = options
        self.session_id = session_id
        self.pacer = CreatePacer(options.max_claims_per_s)
        #: The pool claims check out of, and what the tool made (deleted at close).
        self.pool = ""
        self.made: list[tuple[Kind, str]] = []
        #: The pool's claims and (the tool's pool only) idle time, as a warm pool's figures.
        self.idle: PoolIdle | None = None

    # -- the template and the pool -----------------------------------------------------------

    def prepare(self, pod: dict[str, Any]) -> None:
        """Make the template and pool from ``pod`` (``template_from``), or find the user's."""
        if self.options.template_from == "pod":
            self._make(pod)
            return
        pool = self._pool_of(str(self.options.template))
        self.pool = pool["metadata"]["name"]
        replicas = int((pool.get("spec") or {}).get("replicas") or 0)
        self.idle = PoolIdle(self.pool, replicas, made_by_tool=False)

    def _make(self, pod: dict[str, Any]) -> None:
        name = f"rollout-tax-{self.session_id}-{new_id()[:6]}"
        labels = {SESSION_LABEL: self.session_id}
        self.objects.create(TEMPLATE, template_manifest(name, pod, labels))
        self.made.append((TEMPLATE, name))
        pool = self.objects.create(POOL, pool_manifest(name, name, self.options.warm_pool, labels))
        self.made.append((POOL, name))
        self.pool = name
        if self.options.warm_pool:
            self.idle = PoolIdle(name, self.options.warm_pool, made_by_tool=True)
            self.idle.follow(self.objects, pool["metadata"]["resourceVersion"])
            self._wait_pool(name, pool["metadata"]["resourceVersion"])

    def _wait_pool(self, name: str, version: str) -> None:
        """Until the pool reports ``warm_pool`` ready sandboxes (untimed: no rollout's)."""
        deadline = time.perf_counter() + self.options.ready_timeout
        pool: dict[str, Any] = {}
        while (remaining := deadline - time.perf_counter()) > 0:
            with contextlib.closing(self.objects.watch(POOL, name, version, remaining)) as watch:
                for kind, obj in watch:
                    if kind == "ERROR":
                        version = self.objects.get(POOL, name)["metadata"]["resourceVersion"]
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    pool = obj if kind in ("ADDED", "MODIFIED") else pool
                    ready = (pool.get("status") or {}).get("readyReplicas") or 0
                    if ready >= self.options.warm_pool:
                        return
        raise SandboxStartError(
            f"k8s: SandboxWarmPool {name} has {(pool.get('status') or {}).get('readyReplicas', 0)}"
            f" of {self.options.warm_pool} sandboxes ready after {self.options.ready_timeout:g} s"
            " (k8s.ready_timeout)"
        )

    def _pool_of(self, template: str) -> dict[str, Any]:
        """The user's SandboxWarmPool whose ``sandboxTemplateRef`` is ``template`` (by name,
        the first of several)."""
        try:
            self.objects.get(TEMPLATE, template)
        except ApiError as exc:
            if exc.code == 404:
                raise SandboxStartError(
                    f"k8s: SandboxTemplate {template!r} not found in namespace "
                    f"{self.objects.namespace!r} (k8s.template)"
                ) from None
            raise
        pools = self.objects.list(POOL)
        found = [
            p
            for p in pools
            if ((p.get("spec") or {}).get("sandboxTemplateRef") or {}).get("name") == template
        ]
        if not found:
            raise SandboxStartError(
                f"k8s: no SandboxWarmPool in namespace {self.objects.namespace!r} references "
                f"SandboxTemplate {template!r} (k8s.template); claims check out of a pool: "
                "apply one, or let the tool make both with k8s.template_from=pod"
            )
        return min(found, key=lambda p: p["metadata"]["name"])

    def close_pool(self) -> PoolStats | None:
        """The pool's figures (None without a pool of warm sandboxes): the tool's pool is
        deleted now, which ends its sandboxes' idle time; the user's is left alone."""
        idle, self.idle = self.idle, None
        if idle is None:
            return None
        stats = idle.close()
        if (POOL, self.pool) in self.made:
            self.made.remove((POOL, self.pool))
            with contextlib.suppress(RolloutTaxError):  # reap is the backstop
                self.objects.delete(POOL, self.pool)
        return stats

    def close(self) -> None:
        """Remove what :meth:`prepare` made: the pool (with its sandboxes), then the template."""
        self.close_pool()
        for kind, name in sorted(self.made, key=lambda made: MADE.index(made[0])):
            with contextlib.suppress(RolloutTaxError):
                self.objects.delete(kind, name)
        self.made.clear()

    # -- one claim ---------------------------------------------------------------------------

    def claim(
        self, name: str, labels: dict[str, str], clock: PhaseClock, base: PodHandle
    ) -> ClaimHandle:
        """Claim ``name``, marking ``paced``, ``claimed``, ``bound`` and ``ready``; the pod's
        container and workdir are ``base``'s."""
        if self.pacer.wait():
            clock.mark("paced")
        deadline = clock.started + self.options.ready_timeout
        try:
            created = self.objects.create(CLAIM, claim_manifest(name, self.pool, labels))
        except ApiError as exc:
            if 0 < exc.code < 500:
                raise SandboxStartError(str(exc)) from None
            raise SandboxStartError(f"{exc}; {self._release_after_failure(name)}") from None
        clock.mark("claimed")
        try:
            sandbox, version = self._wait_bound(name, created, clock, deadline)
        except SandboxStartError as exc:
            raise type(exc)(f"{exc}; {self._release_after_failure(name)}") from None
        except BaseException:
            self._release_after_failure(name)
            raise
        return ClaimHandle(
            id=sandbox,
            workdir=base.workdir,
            container=base.container,
            resource_version=version,
            claim=name,
        )

    def _wait_bound(
        self, name: str, claim: dict[str, Any], clock: PhaseClock, deadline: float
    ) -> tuple[str, str]:
        """Follow the claim until bound and Ready; its sandbox's name and the last version."""
        version = claim["metadata"]["resourceVersion"]
        marked: set[str] = set()
        while True:
            if self._advance(claim, clock, marked):
                return claim["status"]["sandbox"]["name"], version
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                bound = "bound" in marked  # then its pod is what is late: a start error
                raise (SandboxStartError if bound else ClaimUnbound)(
                    f"k8s: SandboxClaim {name} {'bound, not Ready' if bound else 'unbound'} "
                    f"after {self.options.ready_timeout:g} s (k8s.ready_timeout); the "
                    f"controller's conditions: {conditions_text(claim)}"
                )
            with contextlib.closing(self.objects.watch(CLAIM, name, version, remaining)) as watch:
                for kind, obj in watch:
                    if kind == "ERROR":  # 410 Gone: read, then watch again
                        claim = self.objects.get(CLAIM, name)
                        version = claim["metadata"]["resourceVersion"]
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind == "DELETED":
                        raise SandboxStartError(f"k8s: SandboxClaim {name} was deleted while bound")
                    if kind in ("ADDED", "MODIFIED"):
                        claim = obj
                        if self._advance(claim, clock, marked):
                            return claim["status"]["sandbox"]["name"], version

    @staticmethod
    def _advance(claim: dict[str, Any], clock: PhaseClock, marked: set[str]) -> bool:
        """Mark ``bound`` and ``ready`` as they happen; True once both have; raise on a
        condition the controller never recovers from."""
        status = claim.get("status") or {}
        if "bound" not in marked and (status.get("sandbox") or {}).get("name"):
            clock.mark("bound")
            marked.add("bound")
        ready = condition(claim) or {}
        if ready.get("status") == "False" and ready.get("reason") in TERMINAL_REASONS:
            raise SandboxStartError(
                f"k8s: SandboxClaim {claim['metadata']['name']} failed: {conditions_text(claim)}"
            )
        if "bound" in marked and ready.get("status") == "True":
            clock.mark("ready")
            return True
        return False

    def launch_type(self, sandbox: str) -> str | None:
        """What the controller reports: ``warm`` or ``cold`` (None: not labelled)."""
        found = self.objects.get(SANDBOX, sandbox)
        launch = ((found.get("metadata") or {}).get("labels") or {}).get(LAUNCH_TYPE_LABEL)
        if self.idle is not None:
            self.idle.claimed(launch)
        return launch

    def release(self, handle: ClaimHandle) -> None:
        """Delete the claim and return once its Sandbox is gone."""
        self.objects.delete(CLAIM, handle.claim)
        self._wait_gone(SANDBOX, handle.id)

    def _wait_gone(self, kind: Kind, name: str) -> None:
        deadline = time.perf_counter() + self.options.delete_timeout
        while (remaining := deadline - time.perf_counter()) > 0:
            try:
                version = self.objects.get(kind, name)["metadata"]["resourceVersion"]
            except ApiError as exc:
                if exc.code == 404:
                    return
                raise
            with contextlib.closing(self.objects.watch(kind, name, version, remaining)) as watch:
                if any(event == "DELETED" for event, _ in watch):
                    return
        raise SandboxError(
            f"k8s: {kind.kind} {name} still exists {self.options.delete_timeout:g} s after its "
            "claim's deletion (k8s.delete_timeout)"
        )

    def _release_after_failure(self, name: str) -> str:
        try:
            deleted = self.objects.delete(CLAIM, name)
        except RolloutTaxError as exc:
            return f"deleting the claim failed: {exc}"
        return "the claim was deleted" if deleted else "no claim was left"

    def reap(self, session_id: str | None) -> int:
        """Delete the claims, pools and templates labelled with ``session_id`` (any if None)."""
        selector = f"{SESSION_LABEL}={session_id}" if session_id else SESSION_LABEL
        return self.remove(selector)

    def remove(self, selector: str, kinds: tuple[Kind, ...] = MADE) -> int:
        """Delete the objects of ``kinds`` that ``selector`` picks; how many."""
        removed = 0
        for kind in kinds:
            for obj in self.objects.list(kind, selector):
                removed += self.objects.delete(kind, obj["metadata"]["name"])
        return removed
