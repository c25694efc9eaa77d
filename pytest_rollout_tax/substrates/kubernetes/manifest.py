"""The pod of a sandbox: hardened defaults, then the pod template, then the options."""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.transport import one_line
from ...errors import ConfigError
from .. import SANDBOX_IMAGE as DEFAULT_IMAGE
from .client import yaml
from .config import KubernetesOptions, toleration

DEFAULT_WORKDIR = "/workspace"
CONTAINER = "sandbox"
#: What the API server assigns; a template's values are dropped.
_ASSIGNED = ("name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp")


@dataclass(frozen=True)
class BasePod:
    """The pod every sandbox of a substrate starts from."""

    pod: dict[str, Any]
    #: The name of the container commands run in.
    container: str
    #: Its working directory.
    workdir: str

    def manifest(self, name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
        """The pod for a sandbox ``name`` in ``namespace`` with ownership ``labels``."""
        pod = copy.deepcopy(self.pod)
        meta = pod["metadata"]
        meta["name"] = name
        meta["namespace"] = namespace
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
        return pod


def base_pod(options: KubernetesOptions) -> BasePod:
    """The defaults, the template deep-merged over them, and the options over both."""
    template = read_template(options.pod_template)
    spec_template = dict(template.get("spec") or {})
    containers = spec_template.pop("containers", None) or []
    pod = merge(_default_pod(), {"metadata": template.get("metadata") or {}, "spec": spec_template})
    index = next((i for i, c in enumerate(containers) if c.get("name") == CONTAINER), 0)
    sandbox = merge(_default_container(), containers[index] if containers else {})
    others = [c for i, c in enumerate(containers) if i != index]
    pod["spec"]["containers"] = [sandbox, *others]
    meta, spec = pod["metadata"], pod["spec"]
    for key in _ASSIGNED:
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
    return BasePod(pod, sandbox["name"], sandbox["workingDir"])


def read_template(path: str | None) -> dict[str, Any]:
    """The Pod manifest in the YAML file ``path`` (a bare PodSpec is wrapped); {} for None."""
    if not path:
        return {}
    where = f"k8s.pod_template={path}"
    try:
        data = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {one_line(exc, 500)}") from None
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


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in: mappings recursively, everything else replaced."""
    result = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _default_pod() -> dict[str, Any]:
    return {
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


def _default_container() -> dict[str, Any]:
    return {
        "name": CONTAINER,
        "image": DEFAULT_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sleep", "infinity"],
        "workingDir": DEFAULT_WORKDIR,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
