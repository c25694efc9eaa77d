"""What one step costs through the public API, per command and per variant, and the probe.

    python benchmarks/step_paths.py [--rounds 40] [--variants local,local-session,docker,...]
                                    [--stepper prebuilt,build]

One sandbox per variant (``local``, ``local`` with ``transport=session``, ``docker``, ``docker``
with ``transport=session``), all open at once; every round times each command once on each
variant, the variants in reverse order every other round, so that drift in the machine's load
hits all alike. Medians (p50) of ``Sandbox.exec`` for ``true``, ``/bin/true``, ``echo hi``,
``sh -c ':'`` and ``ls /``, and of ``Sandbox.probe`` (the report's ``action``); then, per
variant, each command's median as a ratio to the probe's. Every step runs with a timeout (60 s),
as a rollout's steps do. ``--stepper`` opens each session variant once per value of
``ROLLOUT_TAX_STEPPER`` (``docker-session/prebuilt``, ``docker-session/build``: the package's
helper against one this host's compiler built, in the same rounds), then compares each with the
first: each command's p50 as a ratio, and a two-sided Mann-Whitney test on every sample. A
benchmark to read, not a timed test.
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
from pytest_rollout_tax.core import stepper
from pytest_rollout_tax.core.noise import ALPHA, mann_whitney_greater
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
    """A started sandbox of ``name`` (``kind``, ``kind-session`` or ``kind-session/SWITCH``),
    closed with ``stack``."""
    name, _, switch = name.partition("/")
    kind, _, transport = name.partition("-")
    substrate = get_substrate(kind, session_id=session, transport=transport or "exec")
    stack.callback(substrate.close)
    before = os.environ.get(stepper.SWITCH)
    os.environ[stepper.SWITCH] = switch or (before or "")
    try:
        box = stack.enter_context(substrate.start(timeout=TIMEOUT_S))
    finally:
        os.environ.pop(stepper.SWITCH)
        if before is not None:
            os.environ[stepper.SWITCH] = before
    if switch and box.rollout.step_path == "relay":
        raise SystemExit(f"step_paths: {name}/{switch} relays: {box.rollout.relay_reason}")
    return box


def with_stepper(variants: list[str], switches: list[str]) -> list[str]:
    """Each session variant once per switch value (``docker-session/build``)."""
    return [
        f"{v}/{switch}" if v.endswith("-session") else v
        for v in variants
        for switch in (switches if v.endswith("-session") else [""])
    ]


def two_sided_p(a: list[float], b: list[float]) -> float:
    return min(1.0, 2 * min(mann_whitney_greater(a, b), mann_whitney_greater(b, a)))


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, metavar="N", help="default 40")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--stepper", default="", metavar="SWITCH,...", help="e.g. prebuilt,build")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    switches = [s for s in args.stepper.split(",") if s]
    if switches:
        variants = with_stepper(variants, switches)
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
    for name in variants:
        base, _, switch = name.partition("/")
        if not switch or switch == switches[0]:
            continue
        first = f"{base}/{switches[0]}"
        print(f"\n{name} / {first}, p50 ratios and two-sided Mann-Whitney p:")
        for label in labels:
            a, b = samples[first][label], samples[name][label]
            ratio = statistics.median(b) / statistics.median(a)
            p = two_sided_p(a, b)
            verdict = "beyond the noise" if p < ALPHA else "within the noise"
            print(f"  {label}: {ratio:.2f}x (p={p:.2g}, {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
