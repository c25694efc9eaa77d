"""What recording costs a live run: the same steps on the same substrate, through a recorder
and through a sandbox started without one, interleaved.

    python benchmarks/recording.py [--substrate local] [--rollouts 20] [--steps 200]

Each rollout makes ``--steps`` no-op execs. A recorder times every step exactly as a plain
sandbox does (the Sandbox times its own steps either way); what record mode adds is the think
time worked out at the end of a rollout and the rollout's two journal lines. So the cost is
per rollout, and it is stated per step as the difference of the two runs' mean seconds per
rollout divided by the steps (the issue's bound: 50 us), and as the ratio of the two means.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from pytest_rollout_tax import get_substrate, record


def plain_rollout(substrate, steps: int) -> float:
    started = time.perf_counter()
    sandbox = substrate.start()
    for _ in range(steps):
        sandbox.exec(["true"])
    sandbox.close()
    return time.perf_counter() - started


def recorded_rollout(recorder, steps: int) -> float:
    started = time.perf_counter()
    with recorder.rollout("bench") as sandbox:
        for _ in range(steps):
            sandbox.exec(["true"])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--substrate", default="local")
    parser.add_argument("--rollouts", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    plain, recorded = [], []
    substrate = get_substrate(args.substrate)
    with tempfile.TemporaryDirectory() as out, record(args.substrate, out, probes=0) as recorder:
        for _ in range(args.rollouts):  # A B A B: a drifting machine affects both alike
            plain.append(plain_rollout(substrate, args.steps))
            recorded.append(recorded_rollout(recorder, args.steps))
    substrate.close()
    extra_s = statistics.mean(recorded) - statistics.mean(plain)
    print(
        json.dumps(
            {
                "substrate": args.substrate,
                "rollouts": args.rollouts,
                "steps": args.steps,
                "plain_rollout_s": statistics.median(plain),
                "recorded_rollout_s": statistics.median(recorded),
                "recorded_over_plain": statistics.mean(recorded) / statistics.mean(plain),
                "extra_per_step_us": extra_s / args.steps * 1e6,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
