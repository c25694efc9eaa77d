"""The k8s options, and the client configuration from a kubeconfig or the in-cluster account."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...core.substrate import SubstrateOptions
from ...core.transport import one_line
from ...errors import ConfigError, CredentialsMissing, SubstrateUnavailable
from .client import ConfigException, k8s_client, k8s_config, yaml


def toleration(item: str | Mapping[str, Any]) -> dict[str, Any]:
    """A toleration from ``key[=value][:Effect]`` (kubectl taint syntax) or a mapping."""
    if isinstance(item, Mapping):
        given = dict(item)
        if "tolerationSeconds" in given:
            given["tolerationSeconds"] = int(given["tolerationSeconds"])
        return given
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


@dataclass
class KubernetesOptions(SubstrateOptions):
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
    #: ``pod`` (a pod per rollout) or ``claim`` (an agent-sandbox SandboxClaim per rollout).
    api: Literal["pod", "claim"] = "pod"
    #: claim: the user's SandboxTemplate; claims check out of the SandboxWarmPool naming it.
    template: str | None = None
    #: claim: ``pod`` applies a SandboxTemplate built from the pod options, and a
    #: SandboxWarmPool of ``warm_pool`` (the default when no ``template`` is named).
    template_from: Literal["pod"] | None = None
    #: claim, with ``template_from``: the replicas of the tool's SandboxWarmPool.
    warm_pool: int = 0
    #: claim: SandboxClaims created per second at most, per process (0: unpaced).
    max_claims_per_s: float = 0.0

    def check(self) -> None:
        for key in ("ready_timeout", "delete_timeout"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key}={getattr(self, key)}: must be > 0 seconds")
        if self.warm_pool < 0 or self.max_claims_per_s < 0:
            bad = "warm_pool" if self.warm_pool < 0 else "max_claims_per_s"
            raise ValueError(f"{bad}={getattr(self, bad)}: must be 0 or more")
        if self.template and self.template_from:
            raise ValueError(
                f"template={self.template!r} and template_from={self.template_from!r}: "
                "name your SandboxTemplate or let the tool make one, not both"
            )
        if self.api == "pod" and (self.template or self.template_from or self.warm_pool):
            raise ValueError("template, template_from and warm_pool need api='claim'")
        if self.api == "claim" and not self.template:
            self.template_from = "pod"
        if self.workdir is not None and not self.workdir.startswith("/"):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")
        for item in self.tolerations:
            toleration(item)


@dataclass(frozen=True)
class Cluster:
    """Where the pods go: the client configuration, its context's name and the namespace."""

    configuration: Any
    context: str
    namespace: str


def load_cluster(options: KubernetesOptions) -> Cluster:
    """The cluster of ``options``: a kubeconfig's context, else this pod's service account."""
    configuration = k8s_client.Configuration()
    configured = options.kubeconfig or os.environ.get("KUBECONFIG")
    paths = configured or "~/.kube/config"
    existing = [
        p
        for p in (os.path.expanduser(p) for p in paths.split(os.pathsep) if p)
        if os.path.exists(p)
    ]
    if existing:
        context, namespace = _from_kubeconfig(configuration, os.pathsep.join(existing), options)
    elif configured:
        raise ConfigError(f"k8s: kubeconfig {configured} does not exist")
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise SubstrateUnavailable(f"k8s: in-cluster configuration: {exc}") from None
        context, namespace = "in-cluster", options.namespace or _in_cluster_namespace()
    else:
        raise CredentialsMissing(
            "k8s: no kubeconfig (KUBECONFIG is unset and ~/.kube/config does not exist) "
            "and not running inside a cluster; set KUBECONFIG or k8s.kubeconfig"
        )
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 32)
    return Cluster(configuration, context, namespace)


def _from_kubeconfig(
    configuration: Any, source: str, options: KubernetesOptions
) -> tuple[str, str]:
    """Load ``source``'s context into ``configuration``; the context's name and namespace."""
    try:
        contexts, current = k8s_config.list_kube_config_contexts(config_file=source)
        wanted = options.context or (current or {}).get("name")
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
        raise ConfigError(f"k8s: kubeconfig {source}: {one_line(exc, 500)}") from None
    namespace = options.namespace or (context.get("context") or {}).get("namespace") or "default"
    return str(wanted), namespace


def _in_cluster_namespace() -> str:
    path = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    try:
        return path.read_text().strip() or "default"
    except OSError:
        return "default"
