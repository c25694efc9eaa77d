"""Does our docker adapter add to the tax it measures? Plugin vs raw docker SDK, in one run.

    python benchmarks/docker_overhead.py [--actions 200] [--cold-starts 30] [--image IMAGE]

Compares medians, interleaving the two sides sample by sample (ABBA order) so that drift in
the machine's load hits both equally:

- action: the plugin's no-op probe (``Sandbox.probe``, what the report's ``action`` is) against
  the raw SDK's ``container.exec_run(["true"])`` in a container of the same image and config;
- cold start: the plugin's ``Substrate.start()`` (``cold_start``: create, start, first no-op
  exec) against the raw SDK's ``client.containers.run(..., detach=True)`` plus its first
  ``exec_run(["true"])``.

Target: both ratios <= 1.10. A benchmark to read, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import docker
from sampling import interleaved

from pytest_rollout_tax.registry import get_substrate
from pytest_rollout_tax.sandbox import SESSION_LABEL, new_id
from pytest_rollout_tax.substrates.docker import DEFAULT_IMAGE, KEEPALIVE, OWNER_LABEL

TARGET = 1.10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=200, metavar="N", help="default 200")
    parser.add_argument("--cold-starts", type=int, default=30, metavar="N", help="default 30")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--warmup", type=int, default=3, metavar="N", help="default 3")
    args = parser.parse_args(argv)

    session = f"bench-{new_id()}"
    substrate = get_substrate("docker", session_id=session, image=args.image)
    client = docker.from_env()
    engine = client.version().get("Version", "?")
    raw_config = dict(  # what the plugin asks for, through the SDK's high-level API
        image=args.image,
        entrypoint=KEEPALIVE,
        working_dir="/workspace",
        network_mode="none",
        init=True,
        security_opt=["no-new-privileges"],
        labels={SESSION_LABEL: session, OWNER_LABEL: substrate._owner},
        detach=True,
    )
    try:
        # -- action: one live sandbox on each side ----------------------------------------------
        sandbox = substrate.start()
        container = client.containers.run(**raw_config)
        try:
            for _ in range(args.warmup):
                sandbox.probe(1)
                container.exec_run(["true"])

            def raw_action() -> float:
                started = time.perf_counter()
                container.exec_run(["true"])
                return time.perf_counter() - started

            plugin_action, raw_action_s = interleaved(
                args.actions, lambda: sandbox.probe(1)[0], raw_action
            )
        finally:
            sandbox.close()
            container.remove(force=True)

        # -- cold start: a fresh container per sample ----------------------------------------
        def plugin_cold() -> float:
            sb = substrate.start()
            sb.close()
            return sb.rollout.cold_start_s

        def raw_cold() -> float:
            started = time.perf_counter()
            c = client.containers.run(**raw_config)
            c.exec_run(["true"])
            elapsed = time.perf_counter() - started
            c.remove(force=True)
            return elapsed

        for _ in range(min(args.warmup, 2)):
            plugin_cold()
            raw_cold()
        plugin_cold_s, raw_cold_s = interleaved(args.cold_starts, plugin_cold, raw_cold)
    finally:
        substrate.reap(session)
        substrate.close()
        client.close()

    rows = [
        ("action (no-op exec)", plugin_action, raw_action_s, "exec_run(['true'])"),
        ("cold start", plugin_cold_s, raw_cold_s, "containers.run + first exec_run"),
    ]
    print(f"docker overhead: plugin vs raw docker SDK, image {args.image}")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
        f"dockerd {engine}; docker SDK {docker.__version__}; python {platform.python_version()}"
    )
    print()
    header = f"{'metric':<22}{'n':>5}{'plugin p50':>13}{'raw p50':>11}{'ratio':>8}  raw baseline"
    print(header)
    print("-" * len(header))
    worst = 0.0
    for name, plugin, raw, baseline in rows:
        p, r = statistics.median(plugin), statistics.median(raw)
        worst = max(worst, p / r)
        cells = f"{len(plugin):>5}{p * 1e3:>10.1f} ms{r * 1e3:>8.1f} ms{p / r:>8.3f}"
        print(f"{name:<22}{cells}  {baseline}")
    print()
    print(f"target: ratio <= {TARGET:.2f}: {'met' if worst <= TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
