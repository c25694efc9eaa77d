"""The ``session`` phase of a docker-session cold start: what placing the step helper costs.

    python benchmarks/session_open.py [--rounds 20]

The session phase opens the shell, places ``rtx-step`` in the container (written base64
through the shell), checks it runs and makes it the session's server. Two builds, interleaved
round by round (ABBA) on one engine:

- ``glibc, through the shell``: the helper built with ``gcc`` against glibc (about 720 KB), the
  way before;
- ``musl, through the shell``: built with ``musl-gcc`` (Debian's ``musl-tools``, about 50 KB),
  the way now where it is installed.

(One upload of docker's archive API, ``put_archive``, measured 1.19x the glibc way and 1.80x
the musl way in one such run: docker extracts an archive in a process of its own.)

Medians (p50) and p95 of the phase, and ratios to the first. Needs ``gcc``, ``libc6-dev`` and
``musl-tools`` (``scripts/ensure-docker`` installs them). A benchmark to read, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from sampling import interleaved_all

from pytest_rollout_tax import get_substrate
from pytest_rollout_tax.core import stepper
from pytest_rollout_tax.core.substrate import new_id


def build_with(compiler: str) -> Path:
    """The helper built by ``compiler`` (SystemExit if it cannot be)."""
    os.environ["CC"] = compiler
    try:
        built, _ = stepper.built(stepper.host_machine())
    finally:
        del os.environ["CC"]
    if built is None:
        raise SystemExit(f"session_open: cannot build the helper with {compiler}")
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, metavar="N", help="default 20")
    args = parser.parse_args(argv)
    helpers = {"glibc": build_with("gcc"), "musl": build_with("musl-gcc")}
    session = f"bench-{new_id()}"
    substrate = get_substrate("docker", session_id=session, transport="session")

    def opened(helper: Path) -> Callable[[], float]:
        def sample() -> float:
            stepper.for_machine = lambda machine: stepper.Helper(helper, "built")
            with substrate.start(timeout=60) as sandbox:
                served = sandbox.transport.helper
            if served is None or not served.startswith("/tmp/"):
                raise RuntimeError("session_open: the helper was not placed")
            return sandbox.rollout.phases["session"]

        return sample

    samplers = {
        "glibc, through the shell": opened(helpers["glibc"]),
        "musl, through the shell": opened(helpers["musl"]),
    }
    try:
        interleaved_all(1, samplers)
        samples = interleaved_all(args.rounds, samplers)
    finally:
        substrate.reap(session)
        substrate.close()
    sizes = {name: path.stat().st_size for name, path in helpers.items()}
    print(
        f"session phase of docker-session, {args.rounds} interleaved rounds, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; helper glibc {sizes['glibc']:,} "
        f"bytes, musl {sizes['musl']:,} bytes"
    )
    first = statistics.median(samples["glibc, through the shell"])
    print(f"{'way':<28}{'p50':>11}{'p95':>11}  ratio of p50s")
    for name, values in samples.items():
        p50 = statistics.median(values)
        p95 = statistics.quantiles(values, n=20, method="inclusive")[-1]
        print(f"{name:<28}{p50 * 1e3:>8.1f} ms{p95 * 1e3:>8.1f} ms  {p50 / first:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
