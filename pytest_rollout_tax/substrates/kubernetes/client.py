"""The official kubernetes client and its websocket library, or SubstrateUnavailable saying why."""

from __future__ import annotations

from ...errors import ExtraMissing, SubstrateUnavailable

try:
    import certifi
    import urllib3
    import yaml
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.stream import ws_client
    from kubernetes.utils.quantity import parse_quantity
    from kubernetes.watch.watch import iter_resp_lines
    from websocket import (
        ABNF,
        WebSocket,
        WebSocketBadStatusException,
        WebSocketConnectionClosedException,
        WebSocketException,
        WebSocketTimeoutException,
    )
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("k8s", "k8s") from None
if not hasattr(k8s_client.ApiClient, "param_serialize"):  # pragma: no cover
    # Clients before 37 were generated differently (ApiClient.call_api took other arguments).
    raise SubstrateUnavailable(
        f"k8s: kubernetes client {getattr(k8s_client, '__version__', '?')} is too old (37 or "
        "newer is needed); pip install 'pytest-rollout-tax[k8s]'"
    )

__all__ = [
    "ABNF",
    "ConfigException",
    "WebSocket",
    "WebSocketBadStatusException",
    "WebSocketConnectionClosedException",
    "WebSocketException",
    "WebSocketTimeoutException",
    "certifi",
    "iter_resp_lines",
    "k8s_client",
    "k8s_config",
    "parse_quantity",
    "urllib3",
    "ws_client",
    "yaml",
]
