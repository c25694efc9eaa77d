"""Does the k8s substrate serialize concurrent cold starts? -n 1 vs -n 8, on one test API server.
And what does each transport cost per action: ``exec`` vs ``session``, interleaved.

    python benchmarks/k8s_concurrency.py [--pods 32] [--workers 8] [--actions 400] [--starts 8]

Starts the local stand-in API server (tests/support/k8s_api.py: pods are docker containers)
and creates ``--pods`` pods three ways, each pod a full cold start (create, watch to Ready,
first no-op exec) followed by its teardown:

- ``-n 1``: one process, one pod after another (pytest without xdist);
- ``-n 8``: ``--workers`` processes with a Substrate each, all starting together (pytest-xdist);
- ``8 threads``: ``--workers`` threads sharing ONE Substrate (one ApiClient), the case a
  client-side lock would serialize.

"in flight" is the sum of cold starts divided by the wall time: about ``--workers`` when cold
starts overlap, about 1 when something serializes them. The API requests per rollout come from
the server's own count; the client CPU per cold start from ``time.process_time`` at -n 1.

Then, on the same server, the two transports side by side in one interleaved run: ``--starts``
cold starts of each (alternating), then one sandbox of each and ``--actions`` no-op probes
taken in turn (exec, session, exec, ...), then 1 MB outputs the same way. ``--pods 0`` runs
only this part; ``--actions 0`` skips it.

The figures are the stand-in's (docker on this machine), NOT Kubernetes timings: they show how
the client behaves, not how fast a cluster is.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.k8s_api import KubeAPIStandIn

from pytest_rollout_tax.core.substrate import new_id
from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate

TRANSPORTS = ("exec", "session")
#: The command of the output-heavy action: 1 MB on stdout.
MEGABYTE = "head -c 1048576 /dev/zero"


def one_rollout(substrate: KubernetesSubstrate) -> dict[str, Any]:
    """One cold start and teardown; its timings and the client CPU it took."""
    cpu = time.process_time()
    sandbox = substrate.start()
    cpu = time.process_time() - cpu
    sandbox.close()
    return {"cold_start": sandbox.rollout.cold_start_s, "phases": dict(sandbox.rollout.phases),
            "cpu": cpu}  # fmt: skip


def worker(kubeconfig: str, count: int, barrier: Any, results: Any) -> None:
    """An xdist-like worker process: its own Substrate, ``count`` rollouts one after another."""
    substrate = KubernetesSubstrate(kubeconfig=kubeconfig, session_id=f"bench-{new_id()}")
    one_rollout(substrate)  # warm: imports, connection pool
    barrier.wait()
    started = time.perf_counter()
    samples = [one_rollout(substrate) for _ in range(count)]
    results.put((started, time.perf_counter(), samples))
    substrate.close()


def processes(kubeconfig: str, workers: int, pods: int) -> tuple[float, list[dict]]:
    """``pods`` rollouts spread over ``workers`` processes; (wall seconds, samples)."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(workers), context.Queue()
    per_worker = [pods // workers + (i < pods % workers) for i in range(workers)]
    children = [
        context.Process(target=worker, args=(kubeconfig, n, barrier, results)) for n in per_worker
    ]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=600) for _ in children]
    for child in children:
        child.join()
    wall = max(end for _, end, _ in outcomes) - min(start for start, _, _ in outcomes)
    return wall, [sample for _, _, samples in outcomes for sample in samples]


def threads(kubeconfig: str, workers: int, pods: int) -> tuple[float, list[dict]]:
    """``pods`` rollouts from ``workers`` threads sharing one Substrate; (wall, samples)."""
    substrate = KubernetesSubstrate(kubeconfig=kubeconfig, session_id=f"bench-{new_id()}")
    one_rollout(substrate)
    samples: list[dict] = []
    remaining = iter(range(pods))
    lock = threading.Lock()  # hands out work only; never held around an API call

    def run() -> None:
        while True:
            with lock:
                if next(remaining, None) is None:
                    return
            samples.append(one_rollout(substrate))

    pool = [threading.Thread(target=run) for _ in range(workers)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    wall = time.perf_counter() - started
    substrate.close()
    return wall, samples


def transports(kubeconfig: str, starts: int, actions: int) -> dict[str, dict[str, list[float]]]:
    """Cold starts, no-op actions and 1 MB actions of both transports, interleaved; samples
    in seconds by transport and measure."""
    substrates = {
        name: KubernetesSubstrate(
            kubeconfig=kubeconfig, transport=name, session_id=f"bench-{new_id()}"
        )
        for name in TRANSPORTS
    }
    samples: dict[str, dict[str, list[float]]] = {
        name: {"cold": [], "session": [], "noop": [], "1mb": []} for name in TRANSPORTS
    }
    try:
        for substrate in substrates.values():
            one_rollout(substrate)  # warm: imports, connection pool
        for _ in range(starts):
            for name, substrate in substrates.items():
                rollout = one_rollout(substrate)
                samples[name]["cold"].append(rollout["cold_start"])
                samples[name]["session"].append(rollout["phases"].get("session", 0.0))
        sandboxes = {name: substrate.start() for name, substrate in substrates.items()}
        try:
            for sandbox in sandboxes.values():
                sandbox.probe(20)  # warm
            for round_ in range(actions):
                order = TRANSPORTS if round_ % 2 == 0 else TRANSPORTS[::-1]
                for name in order:
                    samples[name]["noop"] += sandboxes[name].probe(1)
            for round_ in range(max(actions // 20, 5)):
                for name in TRANSPORTS if round_ % 2 == 0 else TRANSPORTS[::-1]:
                    started = time.perf_counter()
                    assert sandboxes[name].exec(MEGABYTE).ok
                    samples[name]["1mb"].append(time.perf_counter() - started)
        finally:
            for sandbox in sandboxes.values():
                sandbox.close()
    finally:
        for substrate in substrates.values():
            substrate.close()
    return samples


def report_transports(samples: dict[str, dict[str, list[float]]], actions: int) -> None:
    """The transports table, and session's ratios to exec."""
    print("\nk8s transports against the LOCAL TEST API SERVER (stand-in figures, NOT Kubernetes")
    print(f"timings); interleaved; {actions} no-op actions per transport\n")
    header = ("transport", "cold p50", "session phase", "no-op p50", "no-op p95", "1 MB p50")
    print("{:<12}{:>10}{:>15}{:>12}{:>12}{:>11}".format(*header))
    p50 = {name: {k: statistics.median(v) for k, v in m.items()} for name, m in samples.items()}
    for name, measures in samples.items():
        phase = ms(p50[name]["session"]) if any(measures["session"]) else "-"
        print(
            f"{name:<12}{ms(p50[name]['cold']):>10}{phase:>15}"
            f"{ms(p50[name]['noop'], 2):>12}{ms(quantile(measures['noop'], 0.95), 2):>12}"
            f"{ms(p50[name]['1mb'], 1):>11}"
        )
    exec_, session = p50["exec"], p50["session"]
    without = (session["cold"] - session["session"]) / exec_["cold"]
    print(
        f"\nsession vs exec: no-op p50 {session['noop'] / exec_['noop']:.2f}x, "
        f"1 MB p50 {session['1mb'] / exec_['1mb']:.2f}x, cold start p50 "
        f"{session['cold'] / exec_['cold']:.2f}x ({without:.2f}x without the session phase)"
    )


def serve(conn: Any) -> None:
    """The stand-in in its own process (so no client shares its GIL); answers over ``conn``."""
    server = KubeAPIStandIn()
    url = server.start()
    path = server.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
    conn.send((url, str(path)))
    while (command := conn.recv()) != "stop":
        if command == "requests":
            conn.send(dict(server.requests))
    server.stop()
    conn.send("stopped")


def ms(seconds: float, digits: int = 0) -> str:
    return f"{seconds * 1e3:.{digits}f} ms"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def concurrency(kubeconfig: str, conn: Any, pods: int, workers: int) -> tuple[list, dict]:
    """The three modes' (name, wall, samples) rows, and the API requests per rollout at -n 1."""
    single = processes(kubeconfig, 1, pods)
    conn.send("requests")
    per_rollout = {k: v / (pods + 1) for k, v in conn.recv().items()}  # +1: warm-up
    rows = [("-n 1 (1 process)", *single)]
    rows.append((f"-n {workers} ({workers} processes)", *processes(kubeconfig, workers, pods)))
    rows.append((f"{workers} threads, one Substrate", *threads(kubeconfig, workers, pods)))
    return rows, per_rollout


def report_concurrency(rows: list, per_rollout: dict[str, float]) -> None:
    header = ("mode", "wall", "cold p50", "cold p90", "created p50", "ready p50", "in flight")
    print("{:<28}{:>9}{:>10}{:>10}{:>13}{:>11}{:>11}".format(*header))
    for mode, wall, samples in rows:
        cold = [s["cold_start"] for s in samples]
        created = [s["phases"]["created"] for s in samples]
        to_ready = [s["cold_start"] - s["phases"]["first_exec"] for s in samples]
        print(
            f"{mode:<28}{wall:>8.1f}s{ms(statistics.median(cold)):>10}"
            f"{ms(quantile(cold, 0.9)):>10}{ms(statistics.median(created)):>13}"
            f"{ms(statistics.median(to_ready)):>11}{sum(cold) / wall:>11.1f}"
        )
    cpu = [s["cpu"] for s in rows[0][2]]
    print(f"\nclient CPU per cold start at -n 1: p50 {ms(statistics.median(cpu))} "
          f"(wall p50 {ms(statistics.median(s['cold_start'] for s in rows[0][2]))})")  # fmt: skip
    print("API requests per rollout at -n 1 (cold start + teardown, server-side count):")
    for key, value in sorted(per_rollout.items()):
        print(f"  {value:5.2f}  {key}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=32, metavar="N",
                        help="per mode (default 32; 0 skips the concurrency modes)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=8, metavar="N", help="default 8")
    parser.add_argument("--actions", type=int, default=400, metavar="N",
                        help="no-op actions per transport (default 400; 0 skips this)")  # fmt: skip
    parser.add_argument("--starts", type=int, default=8, metavar="N",
                        help="cold starts per transport in the comparison (default 8)")  # fmt: skip
    args = parser.parse_args(argv)

    context = multiprocessing.get_context("spawn")
    conn, child_conn = context.Pipe()
    server = context.Process(target=serve, args=(child_conn,))
    server.start()
    url, kubeconfig = conn.recv()
    rows, per_rollout, compared = [], {}, None
    try:
        if args.pods:
            rows, per_rollout = concurrency(kubeconfig, conn, args.pods, args.workers)
        if args.actions:
            compared = transports(kubeconfig, args.starts, args.actions)
    finally:
        conn.send("stop")
        conn.recv()
        server.join()

    print("k8s substrate against the LOCAL TEST API SERVER (tests/support/k8s_api.py; pods are")
    print("docker containers) -- these are NOT Kubernetes timings.")
    print(f"server {url}; {platform.platform()}; {os.cpu_count()} cores; "
          f"python {platform.python_version()}; {args.pods} pods per mode\n")  # fmt: skip
    if rows:
        report_concurrency(rows, per_rollout)
    if compared:
        report_transports(compared, args.actions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
