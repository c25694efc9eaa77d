"""Cold start under a burst, and what a warm pool buys, measured in one run.

    python benchmarks/burst.py [--levels 1,4,16] [--rollouts 10] [--steps 30]
                               [--e2b-rate N] [--k8s-max-pods N] [--skip-standins]

1. Bursts: at each level N, N sandboxes started at once (``pytest_rollout_tax.fleet.burst``, the
   code behind ``--rollout-burst``), each up to its first no-op exec, then all torn down; creates
   per second and cold-start p50/p99, on docker and against the k8s and E2B stand-ins of
   tests/support/ (pods and E2B sandboxes are docker containers there: those rows are the
   stand-ins' figures on this machine, NOT Kubernetes' or E2B's). ``--e2b-rate`` makes the
   E2B stand-in answer creates beyond N per second with 429, ``--k8s-max-pods`` leaves pods
   beyond N Pending, as a rate-limited API or a full node does.
2. The pool target, on docker: ``--rollouts`` cold rollouts (create, ``--steps`` no-op execs,
   destroy), then as many claimed from a warm pool of 2 (``pool=2``). Target: the claimed
   cold-start p50 is at most 1/3 of the cold one measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.e2b_server import StandInE2B
from support.k8s_api import KubeAPIStandIn

from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.stats import Stats
from pytest_rollout_tax.core.substrate import Substrate
from pytest_rollout_tax.fleet import burst
from pytest_rollout_tax.fleet.pool import WarmPool
from pytest_rollout_tax.substrates.docker import DockerSubstrate
from pytest_rollout_tax.substrates.e2b import E2BSubstrate
from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate
from pytest_rollout_tax.text.units import seconds

#: The pool target: claimed p50 at most this fraction of the cold p50.
POOL_TARGET = 1 / 3


def burst_rows(
    label: str, substrate: Substrate, levels: list[int], notes: list[str]
) -> list[list[str]]:
    """One table row per level; each level's failure reasons appended to ``notes``."""
    rows = []
    for level in burst.run(substrate, levels):
        stats = Stats.of(level.cold_start_s)
        rows.append(
            [
                label,
                str(level.concurrency),
                f"{level.creates_per_s:.2f}" if level.creates_per_s else "-",
                seconds(stats.p50 if stats else None),
                seconds(stats.p99 if stats else None),
                seconds(level.ready_all_s),
                str(level.failures),
            ]
        )
        notes += [
            f"{label} at {level.concurrency}: {n}x {why}"
            for why, n in level.failure_reasons.items()
        ]
    substrate.reap(substrate.session_id)
    return rows


def one_rollout(sandbox, steps: int) -> float:
    """The rollout's work (``steps`` no-op execs), then its teardown; its cold start."""
    with sandbox:
        for _ in range(steps):
            sandbox.exec("true")
    return sandbox.rollout.cold_start_s


def pool_target(rollouts: int, steps: int) -> None:
    substrate = DockerSubstrate()
    try:
        substrate.start().close()  # warm: the image check and the client's connections
        cold = [one_rollout(substrate.start(), steps) for _ in range(rollouts)]
        pool = WarmPool(substrate, 2)
        pool.fill()
        try:
            claimed = [
                one_rollout(pool.claim(Rollout(substrate="docker")), steps) for _ in range(rollouts)
            ]
        finally:
            pool.close()
        stats = pool.stats
    finally:
        substrate.reap(substrate.session_id)
        substrate.close()
    cold_p50, claim_p50 = statistics.median(cold), statistics.median(claimed)
    creation_p50 = statistics.median(stats.creation_s)
    ratio = claim_p50 / cold_p50
    print(
        f"\ndocker, warm pool of 2, {rollouts} rollouts of {steps} no-op execs each way:\n"
        f"  cold create p50 {seconds(cold_p50)}; claimed p50 {seconds(claim_p50)} "
        f"(hits {stats.hits}/{stats.claims}); the pool's own creations p50 "
        f"{seconds(creation_p50)}\n"
        f"  idle sandbox time {seconds(stats.idle_sandbox_s)} in all, "
        f"{seconds(stats.idle_per_claim_s)} per claimed rollout; cold start saved per rollout "
        f"{seconds(statistics.mean(cold) - statistics.mean(claimed))}\n"
        f"  claimed/cold p50 = {ratio:.3f} (target <= {POOL_TARGET:.3f}): "
        f"{'PASS' if ratio <= POOL_TARGET else 'FAIL'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,4,16", help="burst levels (default 1,4,16)")
    parser.add_argument("--rollouts", type=int, default=10, help="rollouts each way (pool)")
    parser.add_argument("--steps", type=int, default=30, help="no-op execs per rollout (pool)")
    parser.add_argument("--e2b-rate", type=int, default=None, help="E2B creates per second")
    parser.add_argument("--k8s-max-pods", type=int, default=None, help="k8s node pod capacity")
    parser.add_argument("--skip-standins", action="store_true", help="docker only")
    args = parser.parse_args()
    levels = burst.parse_levels(args.levels)
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}"
    )
    notes: list[str] = []
    rows = burst_rows("docker", DockerSubstrate(), levels, notes)
    if not args.skip_standins:
        k8s = KubeAPIStandIn()
        k8s.max_pods = args.k8s_max_pods
        k8s.start()
        with tempfile.TemporaryDirectory() as scratch:
            kubeconfig = k8s.write_kubeconfig(Path(scratch) / "kubeconfig")
            try:
                label = "k8s (stand-in)" + (
                    f", {args.k8s_max_pods} pods/node" if args.k8s_max_pods else ""
                )
                substrate = KubernetesSubstrate(kubeconfig=str(kubeconfig), ready_timeout=60)
                rows += burst_rows(label, substrate, levels, notes)
            finally:
                k8s.stop()
        with StandInE2B() as e2b:
            e2b.creates_per_second = args.e2b_rate
            os.environ.update(e2b.env())
            label = "e2b (stand-in)" + (f", {args.e2b_rate} creates/s" if args.e2b_rate else "")
            rows += burst_rows(label, E2BSubstrate(), levels, notes)
    headers = ["substrate", "N", "creates/s", "p50", "p99", "all ready", "failures"]
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    for note in notes:
        print(f"failures: {note}")
    pool_target(args.rollouts, args.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
