"""What one step costs through the public API, per command and per variant, and the probe.

    python benchmarks/step_paths.py [--rounds 40] [--variants local,local-session,docker,...]

One sandbox per variant (``local``, ``local`` with ``transport=session``, ``docker``, ``docker``
with ``transport=session``), all open at once; every round times each command once on each
variant, the variants in reverse order every other round, so that drift in the machine's load
hits all alike. Medians (p50) of ``Sandbox.exec`` for ``true``, ``/bin/true``, ``echo hi``,
``sh -c ':'`` and ``ls /``, and of ``Sandbox.probe`` (the report's ``action``); then, per
variant, each command's median as a ratio to the probe's. Every step runs with a timeout (60 s),
as a rollout's steps do. A benchmark to read, not a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time
from collections.abc import Callable

from pytest_rollout_tax import Sandbox, get_substrate
from pytest_rollout_tax.core.substrate import new_id

COMMANDS: dict[str, list[str]] = {
    "true": ["true"],
    "/bin/true": ["/bin/true"],
    "echo hi": ["echo", "hi"],
    "sh -c ':'": ["sh", "-c", ":"],
    "ls /": ["ls", "/"],
}
VARIANTS = ("local", "local-session", "docker", "docker-session")
TIMEOUT_S = 60.0


def open_variant(name: str, session: str, stack: contextlib.ExitStack) -> Sandbox:
    """A started sandbox of ``name`` (``kind`` or ``kind-session``), closed with ``stack``."""
    kind, _, transport = name.partition("-")
    substrate = get_substrate(kind, session_id=session, transport=transport or "exec")
    stack.callback(substrate.close)
    return stack.enter_context(substrate.start(timeout=TIMEOUT_S))


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, metavar="N", help="default 40")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    samples: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    with contextlib.ExitStack() as stack:
        boxes = {v: open_variant(v, f"bench-{new_id()}", stack) for v in variants}
        for round_ in range(args.rounds + 2):  # two warm-up rounds
            order = variants if round_ % 2 == 0 else variants[::-1]
            for name in order:
                box = boxes[name]
                row = {
                    label: timed(lambda a=argv, b=box: b.exec(a))
                    for label, argv in COMMANDS.items()
                }
                row["probe (action)"] = box.probe(1)[0]
                if round_ >= 2:
                    for label, value in row.items():
                        samples[name].setdefault(label, []).append(value)
    load = os.getloadavg()[0]
    print(
        f"step paths: medians of {args.rounds} rounds, {os.cpu_count()} CPUs, "
        f"load {load:.1f}, {platform.system()} {platform.release()}"
    )
    labels = [*COMMANDS, "probe (action)"]
    print("| variant | " + " | ".join(f"`{label}`" for label in labels) + " |")
    print("|---" * (len(labels) + 1) + "|")
    for name in variants:
        p50 = {label: statistics.median(samples[name][label]) for label in labels}
        cells = " | ".join(f"{p50[label] * 1000:.2f} ms" for label in labels)
        print(f"| {name} | {cells} |")
    print()
    print("each command's p50 / the probe's p50:")
    for name in variants:
        probe = statistics.median(samples[name]["probe (action)"])
        ratios = ", ".join(
            f"{label} {statistics.median(samples[name][label]) / probe:.2f}x" for label in COMMANDS
        )
        print(f"  {name}: {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
