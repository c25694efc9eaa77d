"""What a pod's events and status say: the image pull time, and why a pod is not ready."""

from __future__ import annotations

import re
from typing import Any

from .api import EVENTS, Api, ApiError

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


def pod_events(api: Api, name: str) -> list[dict[str, Any]]:
    """The events of pod ``name``, oldest first."""
    query = [("fieldSelector", f"involvedObject.kind=Pod,involvedObject.name={name}")]
    items = api.call("GET", EVENTS, verb="list", resource="events", query=query).get("items") or []

    def when(event: dict[str, Any]) -> str:
        return str(
            event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
            or ""
        )

    return sorted(items, key=when)


def image_pull_seconds(api: Api, name: str) -> float | None:
    """The pull time the kubelet reported in the pod's Pulled event; 0 if already present;
    None if the events say nothing (or cannot be read)."""
    try:
        events = pod_events(api, name)
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


def go_duration_seconds(text: str) -> float | None:
    """Seconds in a Go duration string (``1m2.5s``, ``850ms``, ``1.2s``); None if it is not one."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|μs|ns)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _GO_UNITS[unit] for number, unit in parts)


def not_ready_report(api: Api, name: str, pod: dict[str, Any] | None) -> str:
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
        events = pod_events(api, name)
    except ApiError as exc:
        return f"{state}; events not readable: {exc.detail}"
    last = "; ".join(
        f"[{e.get('type')}] {e.get('reason')}: {e.get('message')}" for e in events[-3:]
    )
    return f"{state}; last events: {last or 'none'}"
