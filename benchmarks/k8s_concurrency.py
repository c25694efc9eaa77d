"""Does the k8s substrate serialize concurrent cold starts? -n 1 vs -n 8, on one test API server.

    python benchmarks/k8s_concurrency.py [--pods 32] [--workers 8]

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

from pytest_rollout_tax.sandbox import new_id
from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate


def one_rollout(substrate: KubernetesSubstrate) -> dict[str, Any]:
    """One cold start and teardown; its timings and the client CPU it took."""
    cpu = time.process_time()
    sandbox = substrate.start()
    cpu = time.process_time() - cpu
    sandbox.close()
    return {"cold_start": sandbox.rollout.cold_start_s, "phases": dict(sandbox.rollout.phases),
            "cpu": cpu, "started": sandbox._trajectory_started}  # fmt: skip


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


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=32, metavar="N", help="per mode (default 32)")
    parser.add_argument("--workers", type=int, default=8, metavar="N", help="default 8")
    args = parser.parse_args(argv)

    context = multiprocessing.get_context("spawn")
    conn, child_conn = context.Pipe()
    server = context.Process(target=serve, args=(child_conn,))
    server.start()
    url, kubeconfig = conn.recv()
    rows = []
    try:
        single = processes(kubeconfig, 1, args.pods)
        conn.send("requests")
        per_rollout = {k: v / (args.pods + 1) for k, v in conn.recv().items()}  # +1: warm-up
        rows.append(("-n 1 (1 process)", *single))
        rows.append((f"-n {args.workers} ({args.workers} processes)",
                     *processes(kubeconfig, args.workers, args.pods)))  # fmt: skip
        rows.append((f"{args.workers} threads, one Substrate",
                     *threads(kubeconfig, args.workers, args.pods)))  # fmt: skip
    finally:
        conn.send("stop")
        conn.recv()
        server.join()

    print("k8s substrate: cold start against the LOCAL TEST API SERVER (tests/support/k8s_api.py;")
    print("pods are docker containers) -- these are NOT Kubernetes timings.")
    print(f"server {url}; {platform.platform()}; {os.cpu_count()} cores; "
          f"python {platform.python_version()}; {args.pods} pods per mode\n")  # fmt: skip
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
