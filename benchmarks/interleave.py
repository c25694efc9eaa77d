"""The spread of A/A ratios with ``--rollout-order grouped`` and ``interleave``.

One substrate twice under two names (``A`` and its variant ``B``, the same kind and options)
in one session: any difference between them is the machine's drift and noise. Each session
gives one ratio B/A of a figure (p50 of cold start and of step); over many sessions, the
spread of that ratio is how far an A/B comparison can be off for no reason. Sessions of the
two orders alternate, so drift between sessions hits both alike.

    python benchmarks/interleave.py --substrate local --sessions 10 --rounds 10
    python benchmarks/interleave.py --substrate docker --sessions 6 --rounds 8
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps={steps})
def test_steps(sandbox):
    sandbox.write_file("f.txt", "x")
    for _ in range({steps} - 1):
        assert sandbox.exec("cat f.txt").exit_code == 0
"""

FIGURES = (("cold_start", "p50"), ("step", "p50"))


def session(directory: Path, substrate: str, order: str, rounds: int) -> dict[str, float]:
    """One pytest session over A and B; the ratio B/A of each figure."""
    report = directory / f"report-{order}.json"
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        f"--substrate={substrate},{substrate}-b", f"--rollout-rounds={rounds}",
        f"--rollout-order={order}", f"--rollout-json={report}", "test_workload.py",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pytest failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    substrates = json.loads(report.read_text())["substrates"]
    a, b = substrates[substrate], substrates[f"{substrate}-b"]
    return {f"{m}.{s}": b[m][s] / a[m][s] for m, s in FIGURES}


def spread(ratios: list[float]) -> tuple[float, float]:
    """The standard deviation of log(ratio), as a percentage, and the largest |ratio - 1|."""
    logs = [math.log(r) for r in ratios]
    return 100 * statistics.stdev(logs), 100 * max(abs(r - 1) for r in ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--substrate", default="local")
    parser.add_argument("--sessions", type=int, default=10, help="sessions per order")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    ratios: dict[str, dict[str, list[float]]] = {"grouped": {}, "interleave": {}}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "test_workload.py").write_text(WORKLOAD.format(steps=args.steps))
        (directory / "pyproject.toml").write_text(
            f'[tool.rollout-tax.substrates.{args.substrate}-b]\nkind = "{args.substrate}"\n'
        )
        for index in range(args.sessions):
            orders = ("grouped", "interleave") if index % 2 == 0 else ("interleave", "grouped")
            for order in orders:
                for figure, ratio in session(directory, args.substrate, order, args.rounds).items():
                    ratios[order].setdefault(figure, []).append(ratio)
            print(f"session {index + 1}/{args.sessions} done", file=sys.stderr, flush=True)
    print(
        f"A/A on {args.substrate}: {args.sessions} sessions per order, {args.rounds} rounds x "
        f"{args.steps} steps per substrate; the ratio B/A of each figure, per session "
        f"({os.cpu_count()} CPUs)"
    )
    print(f"{'figure':<16}{'order':<12}{'sd of log ratio':>17}{'worst |B/A - 1|':>17}  ratios")
    for figure in ratios["grouped"]:
        for order in ("grouped", "interleave"):
            values = ratios[order][figure]
            sd, worst = spread(values)
            shown = " ".join(f"{r:.2f}" for r in values)
            print(f"{figure:<16}{order:<12}{sd:>16.1f}%{worst:>16.1f}%  {shown}")


if __name__ == "__main__":
    main()
