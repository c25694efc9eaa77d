"""The summary's lines about the client side: this run's shard, start and saturation, or a
merged report's shards and clients (with a warning for each saturated one)."""

from __future__ import annotations

from typing import Any

from ..report.document import Report
from ..report.machine import SATURATED

ADVICE = "its timings include client-side queueing: spread the run over more machines"


def client_lines(report: Report) -> list[str]:
    """The client lines of one run's report (``client``) or a merged one (``clients[]``)."""
    if report.merge:
        return merge_lines(report, report.merge)
    client = report.client or {}
    lines = []
    if client.get("shard"):
        workload = client.get("workload") or {}
        lines.append(
            f"shard {client['shard']['index']}/{client['shard']['count']} of workload "
            f"{str(workload.get('fingerprint', '?'))[:19]} ({workload.get('items', '?')} items); "
            "merge the shards' reports with python -m pytest_rollout_tax merge"
        )
    if client.get("start_at"):
        lines.append(start_line(client["start_at"]))
    saturation = client.get("saturation")
    if saturation and saturation.get("saturated"):
        lines.append(f"warning: this client was saturated: {busy(saturation)}; {ADVICE}")
    return lines


def merge_lines(report: Report, merge: dict[str, Any]) -> list[str]:
    """The lines of a merged run (``merge``: its facts): its shards, clients and alignment."""
    clients = report.clients or []
    hosts = {client.get("host") for client in clients}
    of = f" of {merge['shards']}" if merge["shards"] else ""
    lines = [
        f"merged {merge['parts']} report(s){of} from {len(hosts)} client(s): each rollout "
        "once, percentiles and hours recomputed from the raw samples"
    ]
    for client in clients:
        lines.append(client_line(client))
    for client in clients:
        saturation = client.get("saturation")
        if saturation and saturation.get("saturated"):
            lines.append(
                f"warning: client {_name(client)} was saturated: {busy(saturation)}; {ADVICE}"
            )
    for index in merge["missing"]:
        lines.append(f"warning: incomplete: shard {index}{of} is missing")
    for index, error in merge["failed"].items():
        lines.append(f"warning: incomplete: shard {index}{of} failed: {error}")
    spreads = [
        level.release_spread_s
        for entry in report.substrates.values()
        for level in entry.burst or []
        if level.release_spread_s is not None
    ]
    if merge.get("alignment"):
        apart = f"; burst releases at most {max(spreads) * 1e3:.3g}ms apart" if spreads else ""
        lines.append(f"{merge['alignment']}{apart}")
    if merge.get("forced"):
        lines.append("note: merged with --force: the shards' projection settings differed")
    return lines


def client_line(client: dict[str, Any]) -> str:
    """``client 1a2b3c4d (shard 0): 2 CPUs, 3 rollouts, CPU 52% ...; control plane ...``"""
    parts = [f"{client['cpu_count']} CPUs" if client.get("cpu_count") else "CPUs unknown"]
    parts.append(f"{client['rollouts']} rollouts")
    if client.get("saturation"):
        parts.append(busy(client["saturation"]))
    trips = client.get("control_plane_rtt_s") or {}
    if trips:
        parts.append(
            "control plane "
            + ", ".join(
                f"{name} {'failed' if rtt is None else f'{rtt * 1e3:.3g}ms'}"
                for name, rtt in trips.items()
            )
        )
    return f"client {_name(client)}: " + ", ".join(parts)


def busy(saturation: dict[str, Any]) -> str:
    """``CPU 97% of 2 cores (this process 50%), load 1.2 -> 2.3``"""
    machine = saturation.get("machine_cpu_share")
    share = machine if machine is not None else saturation["process_cpu_share"]
    text = f"CPU {share:.0%} of {saturation['cpu_count']} cores"
    if machine is not None:
        text += f" (this process {saturation['process_cpu_share']:.0%})"
    if saturation.get("load_start") is not None and saturation.get("load_end") is not None:
        text += f", load {saturation['load_start']:.2f} -> {saturation['load_end']:.2f}"
    return text + (f" (> {SATURATED:.0%})" if saturation.get("saturated") else "")


def start_line(start: dict[str, Any]) -> str:
    """When a ``--rollout-start-at`` run started, and what that alignment is worth."""
    return (
        f"started at {start['at_utc']} (waited {start['waited_s']:.3g}s, "
        f"{start['late_s'] * 1e3:.3g}ms late); {start['note']}"
    )


def _name(client: dict[str, Any]) -> str:
    host = str(client.get("host") or "?")[:8]
    return f"{host} (shard {client['shard']})" if client.get("shard") is not None else host
