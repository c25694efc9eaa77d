"""The k8s stand-in with kubernetes-sigs/agent-sandbox installed: its four resources and a
stand-in of its controller, for the tests of ``k8s.api = "claim"``.

Resources (REST CRUD and ``?watch=true`` like the pods'): ``sandboxes`` of
``agents.x-k8s.io/v1beta1``; ``sandboxclaims``, ``sandboxtemplates``, ``sandboxwarmpools`` of
``extensions.agents.x-k8s.io/v1beta1``, shaped as agent-sandbox v0.5.6 defines them.

The controller does what the real one's reconcilers do, on the same fields and conditions:
a SandboxWarmPool keeps ``spec.replicas`` Sandboxes of its template (each a pod, so a real
docker container) and reports ``status.replicas`` / ``readyReplicas``; a Sandbox's ``Ready``
turns True (``DependenciesReady``) when its pod is Ready; a SandboxClaim is bound to a Ready
pool sandbox when there is one (the Sandbox labelled ``agents.x-k8s.io/launch-type: warm``,
``status.sandbox.name`` and the forwarded ``Ready`` written in one update, and the pool refills),
else to a Sandbox made for it from the pool's template (``cold``, ``Ready`` forwarded as it
turns True). A missing pool or template is ``Ready=False`` ``WarmPoolNotFound`` /
``TemplateNotFound``. Deleting a claim deletes its Sandbox and pod; deleting a pool, its
unclaimed Sandboxes. ``hold_claims`` keeps new claims unbound (a stuck controller).

Test infrastructure only: its timings are docker's, never Kubernetes' or agent-sandbox's.
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from aiohttp import web

from .k8s_api import (
    FIELDS,
    USER_KEY,
    KubeAPIStandIn,
    StatusError,
    User,
    Watcher,
    _condition,
    _strip_type,
    field_selector,
    label_selector,
    now_rfc3339,
)

CORE, EXTENSIONS, VERSION = "agents.x-k8s.io", "extensions.agents.x-k8s.io", "v1beta1"
#: plural -> (group, kind)
RESOURCES = {
    "sandboxes": (CORE, "Sandbox"),
    "sandboxclaims": (EXTENSIONS, "SandboxClaim"),
    "sandboxtemplates": (EXTENSIONS, "SandboxTemplate"),
    "sandboxwarmpools": (EXTENSIONS, "SandboxWarmPool"),
}
LAUNCH_TYPE = "agents.x-k8s.io/launch-type"
#: The stand-in's mark of a pool's unclaimed sandbox (the real controller uses owner refs).
POOL_LABEL = "agents.x-k8s.io/warm-pool"
for _plural in RESOURCES:
    FIELDS[_plural] = {"metadata.name", "metadata.namespace"}


class AgentSandboxStandIn(KubeAPIStandIn):
    """The stand-in API server with agent-sandbox's CRDs and controller."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        for plural in RESOURCES:
            self.store.objects[plural] = {}
        #: While True, the controller leaves new claims unbound (their conditions say why).
        self.hold_claims = False
        self._pod_watch: Watcher | None = None

    def app(self) -> web.Application:
        app = super().app()
        base = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"
        app.router.add_get(base, self.list_objects)
        app.router.add_post(base, self.create_object)
        app.router.add_get(base + "/{name}", self.get_object)
        app.router.add_delete(base + "/{name}", self.delete_object)
        app.on_startup.append(self._start_controller)
        return app

    async def _start_controller(self, app: web.Application) -> None:
        self._pod_watch = Watcher("pods", None, lambda pod: True)
        self.store.watchers.add(self._pod_watch)
        self._spawn(self._follow_pods(self._pod_watch))

    # -- REST ------------------------------------------------------------------------------

    def _resource(self, request: web.Request, verb: str, name: str | None = None) -> str:
        info = request.match_info
        plural = info["plural"]
        group = RESOURCES.get(plural, ("", ""))[0]
        if group != info["group"] or info["version"] != VERSION:
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        user: User = request[USER_KEY]  # type: ignore[assignment]
        if not user.can(verb, plural):
            raise StatusError(
                403,
                "Forbidden",
                f'{plural} is forbidden: User "{user.name}" cannot {verb} resource "{plural}" '
                f'in API group "{group}" in the namespace "{info["namespace"]}"',
                {"group": group, "kind": plural},
            )
        return plural

    async def list_objects(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch", "").lower() in ("1", "true")
        plural = self._resource(request, "watch" if watch else "list")
        namespace = request.match_info["namespace"]
        fields = field_selector(request.query.get("fieldSelector", ""), plural)
        labels = label_selector(request.query.get("labelSelector", ""))

        def match(obj: dict) -> bool:
            return fields(obj) and labels(obj)

        if watch:
            return await self._watch(request, plural, namespace, match)
        items = self.store.list(plural, namespace, match)
        limit = int(request.query.get("limit", "0") or 0)
        group, kind = RESOURCES[plural]
        return web.json_response(
            {
                "apiVersion": f"{group}/{VERSION}",
                "kind": f"{kind}List",
                "metadata": {"resourceVersion": str(self.store.revision)},
                "items": [_strip_type(o) for o in (items[:limit] if limit > 0 else items)],
            }
        )

    async def get_object(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        plural = self._resource(request, "get", name)
        return web.json_response(self._object_or_404(plural, request.match_info["namespace"], name))

    def _object_or_404(self, plural: str, namespace: str, name: str) -> dict:
        found = self.store.get(plural, namespace, name)
        if found is None:
            group = RESOURCES[plural][0]
            raise StatusError(
                404,
                "NotFound",
                f'{plural}.{group} "{name}" not found',
                {"name": name, "group": group, "kind": plural},
            )
        return found

    async def create_object(self, request: web.Request) -> web.Response:
        plural = self._resource(request, "create")
        namespace = request.match_info["namespace"]
        try:
            body = await request.json()
        except json.JSONDecodeError as exc:
            raise StatusError(400, "BadRequest", f"error decoding request body: {exc}") from None
        group, kind = RESOURCES[plural]
        meta = body.setdefault("metadata", {})
        name = meta.get("name") or ""
        if body.get("kind") != kind or not name or not isinstance(body.get("spec"), dict):
            raise StatusError(422, "Invalid", f'{kind} "{name}" is invalid: kind, name and spec')
        if self.store.get(plural, namespace, name) is not None:
            raise StatusError(
                409,
                "AlreadyExists",
                f'{plural}.{group} "{name}" already exists',
                {"name": name, "group": group, "kind": plural},
            )
        if plural == "sandboxclaims":
            await self.held_creates.hold_before_async()
        meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339())
        meta["generation"] = 1
        body["apiVersion"] = f"{group}/{VERSION}"
        created = self.store.write(plural, body, "ADDED")
        answer = copy.deepcopy(created)
        if plural == "sandboxwarmpools":
            self._fill_pool(namespace, name)
        elif plural == "sandboxclaims":
            self._spawn(self._bind(namespace, name))
            await self.held_creates.hold_after_async()
        return web.json_response(answer, status=201)

    async def delete_object(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        plural = self._resource(request, "delete", name)
        namespace = request.match_info["namespace"]
        found = copy.deepcopy(self._object_or_404(plural, namespace, name))
        self._delete(plural, namespace, name)
        return web.json_response(found)

    # -- the controller --------------------------------------------------------------------

    def _put(self, plural: str, obj: dict) -> dict:
        return self.store.write(plural, copy.deepcopy(obj), "MODIFIED")

    def _delete(self, plural: str, namespace: str, name: str) -> None:
        obj = self.store.get(plural, namespace, name)
        if obj is None:
            return
        obj["metadata"]["deletionTimestamp"] = now_rfc3339()
        self.store.write(plural, obj, "DELETED")
        owned = self._owned(namespace, obj["metadata"]["uid"])
        if plural == "sandboxes":
            self.remove_pod(namespace, name)
        for sandbox in owned:
            self._delete("sandboxes", namespace, sandbox["metadata"]["name"])

    def _owned(self, namespace: str, uid: str) -> list[dict]:
        return [
            s
            for s in self.store.list("sandboxes", namespace, lambda o: True)
            if any(ref.get("uid") == uid for ref in s["metadata"].get("ownerReferences") or [])
        ]

    def _make_sandbox(
        self, namespace: str, name: str, template: dict, owner: dict, launch: str
    ) -> dict:
        owner_ref = {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        labels = {LAUNCH_TYPE: launch}
        if owner["kind"] == "SandboxWarmPool":
            labels[POOL_LABEL] = owner["metadata"]["name"]
        sandbox = {
            "apiVersion": f"{CORE}/{VERSION}",
            "kind": "Sandbox",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now_rfc3339(),
                "labels": labels,
                "ownerReferences": [owner_ref],
            },
            "spec": {"podTemplate": copy.deepcopy(template["spec"]["podTemplate"])},
            "status": {
                "conditions": [
                    _condition("Ready", "False", "DependenciesNotReady", "Pod does not exist")
                ]
            },
        }
        self.store.write("sandboxes", sandbox, "ADDED")
        self._sandbox_pod(namespace, sandbox, {})
        return sandbox

    def _sandbox_pod(self, namespace: str, sandbox: dict, extra_labels: dict[str, str]) -> None:
        pod_template = sandbox["spec"]["podTemplate"]
        meta = pod_template.get("metadata") or {}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": sandbox["metadata"]["name"],
                "labels": {**(meta.get("labels") or {}), **extra_labels},
                "annotations": dict(meta.get("annotations") or {}),
            },
            "spec": copy.deepcopy(pod_template["spec"]),
        }
        pod["spec"].setdefault("automountServiceAccountToken", False)
        self.add_pod(namespace, pod)

    def _fill_pool(self, namespace: str, name: str) -> None:
        """Keep ``spec.replicas`` unclaimed sandboxes of the pool; write its status."""
        pool = self.store.get("sandboxwarmpools", namespace, name)
        if pool is None:
            return
        members = self._owned(namespace, pool["metadata"]["uid"])
        template_name = pool["spec"]["sandboxTemplateRef"]["name"]
        template = self.store.get("sandboxtemplates", namespace, template_name)
        if template is not None:
            for _ in range(int(pool["spec"].get("replicas", 1)) - len(members)):
                member = f"{name}-{secrets.token_hex(3)[:5]}"
                members.append(self._make_sandbox(namespace, member, template, pool, "warm"))
        ready = sum(_is_ready(m) for m in members)
        status = {"replicas": len(members), "readyReplicas": ready}
        if pool.get("status") != status:
            pool = copy.deepcopy(pool)
            pool["status"] = status
            self._put("sandboxwarmpools", pool)

    async def _bind(self, namespace: str, name: str) -> None:
        """Bind claim ``name``: a Ready pool sandbox (warm) or one made for it (cold)."""
        claim = self.store.get("sandboxclaims", namespace, name)
        if claim is None:
            return
        if self.hold_claims:
            self._claim_status(claim, None, "SandboxNotReady", "Sandbox is not ready")
            return
        pool_name = claim["spec"]["warmPoolRef"]["name"]
        pool = self.store.get("sandboxwarmpools", namespace, pool_name)
        if pool is None:
            message = f'SandboxWarmPool "{pool_name}" not found'
            self._claim_status(claim, None, "WarmPoolNotFound", message)
            return
        template_name = pool["spec"]["sandboxTemplateRef"]["name"]
        template = self.store.get("sandboxtemplates", namespace, template_name)
        if template is None:
            message = f'SandboxTemplate "{template_name}" not found'
            self._claim_status(claim, None, "TemplateNotFound", message)
            return
        members = self._owned(namespace, pool["metadata"]["uid"])
        ready = [m for m in members if _is_ready(m)]
        if ready:
            sandbox = copy.deepcopy(ready[0])
            owner = {
                "apiVersion": claim["apiVersion"],
                "kind": "SandboxClaim",
                "name": name,
                "uid": claim["metadata"]["uid"],
                "controller": True,
            }
            sandbox["metadata"]["ownerReferences"] = [owner]
            sandbox["metadata"]["labels"].pop(POOL_LABEL, None)
            sandbox["metadata"]["labels"][LAUNCH_TYPE] = "warm"
            sandbox = self._put("sandboxes", sandbox)
            self._relabel_pod(namespace, sandbox["metadata"]["name"], claim)
            self._fill_pool(namespace, pool_name)
        else:
            sandbox = self._make_sandbox(namespace, name, template, claim, "cold")
            self._relabel_pod(namespace, name, claim)
        self._forward(namespace, sandbox)

    def _relabel_pod(self, namespace: str, pod_name: str, claim: dict) -> None:
        """The claim's ``additionalPodMetadata`` labels on its sandbox's pod."""
        labels = ((claim["spec"].get("additionalPodMetadata") or {}).get("labels")) or {}
        pod = self.store.get("pods", namespace, pod_name)
        if pod is not None and labels:
            pod = copy.deepcopy(pod)
            pod["metadata"].setdefault("labels", {}).update(labels)
            self.store.write("pods", pod, "MODIFIED")

    def _claim_status(self, claim: dict, sandbox: str | None, reason: str, message: str) -> None:
        status = "True" if reason == "DependenciesReady" else "False"
        claim = copy.deepcopy(claim)
        claim["status"] = {"conditions": [_condition("Ready", status, reason, message)]}
        if sandbox:
            claim["status"]["sandbox"] = {"name": sandbox}
        self._put("sandboxclaims", claim)

    def _forward(self, namespace: str, sandbox: dict) -> None:
        """The sandbox's Ready to its claim (and its pool's counts), as the reconcilers do."""
        for ref in sandbox["metadata"].get("ownerReferences") or []:
            if ref["kind"] == "SandboxWarmPool":
                self._fill_pool(namespace, ref["name"])
            elif ref["kind"] == "SandboxClaim":
                claim = self.store.get("sandboxclaims", namespace, ref["name"])
                if claim is not None:
                    ready = next(c for c in sandbox["status"]["conditions"] if c["type"] == "Ready")
                    self._claim_status(
                        claim, sandbox["metadata"]["name"], ready["reason"], ready["message"]
                    )

    async def _follow_pods(self, watcher: Watcher) -> None:
        """The Sandbox reconciler: a sandbox's pod turned Ready -> the Sandbox's Ready."""
        while True:
            entry = await watcher.queue.get()
            pod = entry.obj
            namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            sandbox = self.store.get("sandboxes", namespace, name)
            if sandbox is None or entry.type == "DELETED" or _is_ready(sandbox):
                continue
            pod_ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (pod.get("status") or {}).get("conditions") or []
            )
            if pod_ready:
                sandbox = copy.deepcopy(sandbox)
                sandbox["status"] = {
                    "conditions": [
                        _condition("Ready", "True", "DependenciesReady", "Pod is Ready")
                    ],
                    "podIPs": [],
                }
                self._forward(namespace, self._put("sandboxes", sandbox))

    def names(self, plural: str, namespace: str = "default") -> list[str]:
        """The names of the stored objects of ``plural`` (a leak check)."""
        return [o["metadata"]["name"] for o in self.store.list(plural, namespace, lambda o: True)]


def _is_ready(obj: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


# -- pytest fixtures (re-exported by tests/conftest.py) ----------------------------------------

try:
    import pytest
except ImportError:  # standalone use without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def claims_api(docker_client, sandbox_image, tmp_path_factory) -> Iterator[AgentSandboxStandIn]:
        """The stand-in with agent-sandbox installed, and a kubeconfig pointing at it."""
        server = AgentSandboxStandIn()
        server.start()
        server.write_kubeconfig(tmp_path_factory.mktemp("k8s-claims") / "kubeconfig")
        yield server
        server.stop()

    @pytest.fixture(scope="session")
    def claims_kubeconfig(claims_api: AgentSandboxStandIn) -> Path:
        assert claims_api.kubeconfig_path is not None
        return claims_api.kubeconfig_path


def on_loop(server: KubeAPIStandIn, func: Callable[[], object]) -> object:
    """Run ``func`` on the server's event loop (store reads from a test thread)."""
    assert server._loop is not None

    async def call() -> object:
        return func()

    return asyncio.run_coroutine_threadsafe(call(), server._loop).result(10)
