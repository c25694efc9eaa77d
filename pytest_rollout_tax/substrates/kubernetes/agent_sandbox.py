"""kubernetes-sigs/agent-sandbox's resources through the client's CustomObjectsApi.

The shapes follow agent-sandbox v0.5.6 (API ``v1beta1`` of ``agents.x-k8s.io`` and
``extensions.agents.x-k8s.io``) as its Python client ``k8s-agent-sandbox`` 1.0.8 writes them:
a SandboxClaim names a SandboxWarmPool (``spec.warmPoolRef``), the pool names a
SandboxTemplate (``spec.sandboxTemplateRef``); the claim controller writes
``status.sandbox.name`` and forwards the Sandbox's ``Ready`` condition to the claim, and labels
the Sandbox ``agents.x-k8s.io/launch-type`` ``warm`` (adopted from a pool) or ``cold``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ...errors import SubstrateUnavailable
from .api import Api, ApiError
from .client import iter_resp_lines, k8s_client, urllib3

CORE_GROUP = "agents.x-k8s.io"
EXTENSIONS_GROUP = "extensions.agents.x-k8s.io"
VERSION = "v1beta1"
#: The agent-sandbox release whose resource shapes this module follows.
FOLLOWED = "agent-sandbox v0.5.6 (v1beta1; Python client k8s-agent-sandbox 1.0.8)"
LAUNCH_TYPE_LABEL = "agents.x-k8s.io/launch-type"
CREATED_BY_LABEL = "agents.x-k8s.io/created-by"
REQUESTED_ANNOTATION = "agents.x-k8s.io/client-first-requested-at"
INSTALL_DOCS = "https://github.com/kubernetes-sigs/agent-sandbox#installation"
#: Ready=False reasons the claim controller never recovers from (as the Python client has them).
TERMINAL_REASONS = frozenset(
    {
        "TemplateNotFound",
        "WarmPoolNotFound",
        "InvalidMetadata",
        "EnvVarsInjectionRejected",
        "VolumeClaimTemplatesError",
        "ClaimExpired",
        "SandboxExpired",
        "InvalidConfiguration",
        "PodFailed",
        "PodSucceeded",
    }
)


@dataclass(frozen=True)
class Kind:
    """One agent-sandbox resource: its API group, plural and kind."""

    group: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{VERSION}"


SANDBOX = Kind(CORE_GROUP, "sandboxes", "Sandbox")
CLAIM = Kind(EXTENSIONS_GROUP, "sandboxclaims", "SandboxClaim")
TEMPLATE = Kind(EXTENSIONS_GROUP, "sandboxtemplates", "SandboxTemplate")
POOL = Kind(EXTENSIONS_GROUP, "sandboxwarmpools", "SandboxWarmPool")
#: What the tool makes, in the order reaping deletes it (claims release their sandboxes first).
MADE = (CLAIM, POOL, TEMPLATE)


def condition(obj: dict[str, Any], kind: str = "Ready") -> dict[str, Any] | None:
    """The status condition ``kind`` of ``obj``, or None."""
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            found: dict[str, Any] = item
            return found
    return None


def conditions_text(obj: dict[str, Any] | None) -> str:
    """The object's conditions in one line: ``Ready=False (Reason: message)``, or 'none'."""
    items = ((obj or {}).get("status") or {}).get("conditions") or []
    parts = []
    for item in items:
        why = item.get("reason") or ""
        if item.get("message"):
            why = f"{why}: {item['message']}" if why else item["message"]
        parts.append(f"{item.get('type')}={item.get('status')}" + (f" ({why})" if why else ""))
    return "; ".join(parts) or "no conditions yet"


def claim_manifest(name: str, pool: str, labels: dict[str, str]) -> dict[str, Any]:
    """A SandboxClaim checking out of ``pool``; ``labels`` on the claim and on its pod."""
    return {
        "apiVersion": CLAIM.api_version,
        "kind": CLAIM.kind,
        "metadata": {
            "name": name,
            "labels": {**labels, CREATED_BY_LABEL: "rollout-tax"},
            "annotations": {REQUESTED_ANNOTATION: datetime.now(UTC).isoformat()},
        },
        "spec": {"warmPoolRef": {"name": pool}, "additionalPodMetadata": {"labels": labels}},
    }


def template_manifest(name: str, pod: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """A SandboxTemplate whose pod is ``pod`` (a Pod manifest)."""
    meta = pod.get("metadata") or {}
    pod_meta = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
    return {
        "apiVersion": TEMPLATE.api_version,
        "kind": TEMPLATE.kind,
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "podTemplate": {"metadata": pod_meta, "spec": pod["spec"]},
            "networkPolicyManagement": "Unmanaged",
        },
    }


def pool_manifest(
    name: str, template: str, replicas: int, labels: dict[str, str]
) -> dict[str, Any]:
    """A SandboxWarmPool of ``replicas`` sandboxes of ``template``."""
    return {
        "apiVersion": POOL.api_version,
        "kind": POOL.kind,
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": template}},
    }


class Objects:
    """CRUD and watches of agent-sandbox resources in the substrate's namespace."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.namespace = api.namespace
        self.custom = k8s_client.CustomObjectsApi(api.client)

    def _call(
        self, verb: str, kind: Kind, name: str | None, func: Any, *args: Any, **kw: Any
    ) -> Any:
        try:
            return func(kind.group, VERSION, self.namespace, kind.plural, *args, **kw)
        except k8s_client.ApiException as exc:
            if exc.status == 0 or exc.status is None:
                raise self.api.unreachable(exc) from None
            body = exc.body.encode() if isinstance(exc.body, str) else exc.body
            raise self.api.refused(exc.status, body, verb, kind.plural, name) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self.api.unreachable(exc) from None

    def create(self, kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        timeout = self.api.timeout
        create = self.custom.create_namespaced_custom_object
        created: dict[str, Any] = self._call(
            "create", kind, name, create, body, _request_timeout=timeout
        )
        return created

    def get(self, kind: Kind, name: str) -> dict[str, Any]:
        get = self.custom.get_namespaced_custom_object
        found: dict[str, Any] = self._call(
            "get", kind, name, get, name, _request_timeout=self.api.timeout
        )
        return found

    def list(self, kind: Kind, selector: str = "", limit: int = 0) -> list[dict[str, Any]]:
        extra: dict[str, Any] = {"label_selector": selector} if selector else {}
        if limit:
            extra["limit"] = limit
        found = self._call(
            "list",
            kind,
            None,
            self.custom.list_namespaced_custom_object,
            _request_timeout=self.api.timeout,
            **extra,
        )
        return found.get("items") or []

    def delete(self, kind: Kind, name: str) -> bool:
        """Delete ``name``; False if it was already gone."""
        try:
            self._call(
                "delete",
                kind,
                name,
                self.custom.delete_namespaced_custom_object,
                name,
                _request_timeout=self.api.timeout,
            )
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def watch(
        self, kind: Kind, name: str, resource_version: str, seconds: float
    ) -> Generator[tuple[str, dict[str, Any]], None, None]:
        """The events of one watch on ``name`` (every object of ``kind`` if empty) after
        ``resource_version``, for ``seconds``."""
        extra = {"field_selector": f"metadata.name={name}"} if name else {}
        response = self._call(
            "watch",
            kind,
            name or None,
            self.custom.list_namespaced_custom_object,
            **extra,
            watch=True,
            resource_version=resource_version,
            timeout_seconds=max(1, math.ceil(seconds)),
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=(self.api.timeout[0], seconds + 0.05),
        )
        try:
            for line in iter_resp_lines(response):
                if line:
                    event = json.loads(line)
                    yield event.get("type", ""), event.get("object") or {}
        except (urllib3.exceptions.HTTPError, OSError):
            return  # the stream broke: the caller watches again from the last version
        finally:
            response.close()
            response.release_conn()

    def check_installed(self) -> None:
        """SubstrateUnavailable in one line when the cluster lacks agent-sandbox's CRDs."""
        try:
            self.list(CLAIM, limit=1)
        except ApiError as exc:
            if exc.code == 404:
                raise SubstrateUnavailable(
                    f"k8s: the agent-sandbox resources are not installed on the cluster of "
                    f"context {self.api.context!r} ({CLAIM.plural}.{CLAIM.group}/{VERSION} not "
                    f"found); install agent-sandbox v0.5.6 or later: {INSTALL_DOCS}"
                ) from None
            raise SubstrateUnavailable(str(exc)) from None
