"""The plugin's bookkeeping at scale: N synthetic rollouts of S steps gathered, summarized, written.

    python benchmarks/bookkeeping.py --rollouts 10000 --steps 150 [--json PATH]

Records are made through the public record API (``Rollout``, ``Step``), one at a time as a
session makes them. Each goes through the xdist path: ``to_dict()`` on the worker, then the
controller's ``Aggregate.add``. Timed without tracing first, then run again under tracemalloc
for the peak. ``report_s`` is the time to aggregate plus the time to build the summary;
``wire_bytes_per_rollout`` is a record as execnet serializes it. ``session_end_s`` is what a
session does between its last test and its terminal summary (summarize, then write the JSON);
``floor_s`` is the least any exact summary and file must cost, measured in the same run:
sorting every sample once and writing the same number of bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import execnet

from pytest_rollout_tax import Rollout, Step
from pytest_rollout_tax.core.files import write_json
from pytest_rollout_tax.report.aggregate import Aggregate
from pytest_rollout_tax.report.build import summarize
from pytest_rollout_tax.report.projection import Scale

KINDS = ("exec", "exec", "exec", "write_file", "read_file")
#: Every this many rollouts, one is serialized to measure the wire.
WIRE_SAMPLE_EVERY = 100


def synthetic(rollouts: int, steps: int, seed: int = 16) -> Iterator[Rollout]:
    """``rollouts`` records of ``steps`` steps on two substrates, made one at a time."""
    rng = random.Random(seed)
    for index in range(rollouts):
        substrate = ("local", "docker")[index % 2]
        cold = rng.lognormvariate(-1.5, 0.4)
        walls = [rng.expovariate(50.0) for _ in range(steps)]
        kinds = [KINDS[i % len(KINDS)] for i in range(steps)]
        yield Rollout(
            test=f"suite/test_agent.py::test_agent_loop[{substrate}-{index // 2 + 1}]",
            substrate=substrate,
            kind=substrate,
            transport="exec",
            round=index // 2 + 1,
            planned_steps=steps,
            outcome="passed" if index % 97 else "failed",
            cold_start_s=cold,
            phases={"create": cold * 0.6, "first_exec": cold * 0.4},
            teardown_s=rng.expovariate(20.0),
            trajectory_s=cold + sum(walls),
            steps=[
                Step(k, w, 0 if k == "exec" else None) for k, w in zip(kinds, walls, strict=True)
            ],
            action_probes_s=[rng.expovariate(500.0) for _ in range(5)],
            error=None if index % 97 else "test failed: AssertionError",
        )


def measure(rollouts: int, steps: int, directory: Path) -> dict[str, float]:
    """One pass: seconds to aggregate, summarize and write; JSON and wire bytes."""
    aggregate = Aggregate()
    aggregate_s = 0.0
    wire = []
    for index, rollout in enumerate(synthetic(rollouts, steps)):
        started = time.perf_counter()
        record = rollout.to_dict()
        aggregate.add(record)
        aggregate_s += time.perf_counter() - started
        if index % WIRE_SAMPLE_EVERY == 0:
            wire.append(len(execnet.dumps(record)))
    started = time.perf_counter()
    report = summarize(
        aggregate, Scale(), plugin_version="bench", machine={"cpu_count": 2}, commit=None
    )
    summary_s = time.perf_counter() - started
    path = directory / "report.json"
    started = time.perf_counter()
    write_json(path, report.to_dict())
    json_s = time.perf_counter() - started
    return {
        "floor_s": floor(aggregate, path.stat().st_size, directory),
        "aggregate_s": aggregate_s,
        "summary_s": summary_s,
        "json_s": json_s,
        "json_bytes": path.stat().st_size,
        "wire_bytes_per_rollout": sum(wire) / len(wire),
        "per_rollout_us": aggregate_s / rollouts * 1e6,
    }


def floor(aggregate: Aggregate, size: int, directory: Path) -> float:
    """Seconds to sort every sample once and write ``size`` bytes: the floor of a summary."""
    started = time.perf_counter()
    for samples in aggregate.samples.values():
        for metric in (samples.cold_start, samples.action, samples.step, samples.teardown):
            sorted(metric)
    (directory / "floor.bin").write_bytes(bytes(size))
    return time.perf_counter() - started


def run(rollouts: int, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        timed = measure(rollouts, steps, Path(directory))
        tracemalloc.start()
        measure(rollouts, steps, Path(directory))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    result = {
        "rollouts": rollouts,
        "steps": steps,
        "report_s": timed["aggregate_s"] + timed["summary_s"],
        "json_s": timed["json_s"],
        "json_bytes": timed["json_bytes"],
        "session_end_s": timed["summary_s"] + timed["json_s"],
        "floor_s": timed["floor_s"],
        "peak_bytes": peak,
        "wire_bytes_per_rollout": timed["wire_bytes_per_rollout"],
    }
    print(
        f"{rollouts:,} rollouts x {steps} steps: aggregate {timed['aggregate_s']:.2f} s "
        f"({timed['per_rollout_us']:.0f} us/rollout), summary {timed['summary_s']:.2f} s, "
        f"JSON {timed['json_s']:.2f} s, {timed['json_bytes'] / 1e6:.1f} MB; "
        f"session end {result['session_end_s']:.2f} s ("
        f"{result['session_end_s'] / timed['floor_s']:.1f}x the floor, {timed['floor_s']:.2f} s); "
        f"peak traced {peak / 1e6:.0f} MB; wire {timed['wire_bytes_per_rollout']:,.0f} B/rollout"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10_000, metavar="N")
    parser.add_argument("--steps", type=int, default=150, metavar="S")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)
    result = run(args.rollouts, args.steps)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
