"""What gVisor costs next to runc, in one interleaved run on one engine and one image.

    python benchmarks/isolation.py [--rounds 10] [--json PATH]

Every round takes one sample of each path, in reverse order every other round (ABC CBA), so
that drift in the machine's load hits all alike. Medians (p50) of:

- cold start: ``Substrate.start()`` (create, start, first no-op) on ``runtime=runc`` and
  ``runtime=runsc`` on each of gVisor's platforms, ``systrap`` (its default) and ``ptrace``;
- action: the no-op probe (what the report's ``action`` is) on each and on both transports;
- commands an agent runs, each one step on the ``exec`` transport: Python importing stdlib
  modules, 300 fork+exec, file I/O (500 files written and read back by Python), ``git status``
  on a small repository, and ``python -m unittest`` on a small suite (the image has no pytest);
- snapshots (gVisor only, each platform): the checkpoint of a prepared sandbox (and the
  commit of its disk), its restore in the same container, and a restore into a new container (the
  ``docker.snapshot`` variant's cold start, phases ``create`` + ``restore`` + ``first_exec``).

The ratios are each platform's p50 over runc's: the floor is runc, measured in the same run.
The machine's load (``os.getloadavg``) before and after, and gVisor's release, are printed
with the table, and a warning when the run starts at a load of 1 or more. A benchmark to
read, not a timed test. Needs the engine scripts/ensure-docker starts (runsc, runsc-systrap
and runsc-ptrace registered, experimental mode on).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

from sampling import interleaved_all

from pytest_rollout_tax import Sandbox, get_substrate
from pytest_rollout_tax.core.substrate import Prepare
from pytest_rollout_tax.substrates.docker import snapshot

#: The 1-minute load average below which a machine counts as quiet.
QUIET_LOAD = 1.0

#: What is compared, as docker options: runc, the floor, and gVisor on each platform.
RUNTIMES = {
    "runc": {"runtime": "runc"},
    "systrap": {"runtime": "runsc", "platform": "systrap"},
    "ptrace": {"runtime": "runsc", "platform": "ptrace"},
}
GVISOR = ("systrap", "ptrace")
TRANSPORTS = ("exec", "session")
COMMANDS = {
    "python import": "python3 -c 'import json, email.parser, http.client, xml.dom.minidom, "
    "sqlite3, decimal, argparse, asyncio, unittest'",
    "300 fork+exec": "for i in $(seq 300); do /bin/true; done",
    "file I/O (500 files)": 'python3 -c \'import pathlib; d = pathlib.Path("io"); '
    'd.mkdir(exist_ok=True); [(d / str(i)).write_bytes(b"x" * 4096) for i in range(500)]; '
    "[(d / str(i)).read_bytes() for i in range(500)]'",
    "git status": "git -C repo status --porcelain",
    "python -m unittest": "cd suite && python3 -m unittest -q 2>&1 | tail -1",
}
SETUP = """
set -e
mkdir -p repo suite
cd repo && git init -q && for i in $(seq 50); do echo "line $i" > "file$i.py"; done
git -c user.email=b@x -c user.name=b add -A && git -c user.email=b@x -c user.name=b commit -qm init
echo changed > file1.py && cd ..
for i in $(seq 10); do
  printf '%s\\n' 'import unittest' 'class T(unittest.TestCase):' \\
    "    def test_$i(self):" "        self.assertEqual($i, $i)" > "suite/test_$i.py"
done
"""


def p50(values: list[float]) -> float:
    return statistics.median(values)


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def cold_start(runtime: str) -> Callable[[], float]:
    substrate = get_substrate("docker", **RUNTIMES[runtime])

    def sample() -> float:
        with substrate.start() as sandbox:
            return sandbox.rollout.cold_start_s

    return sample


def command(sandbox: Sandbox, line: str) -> Callable[[], float]:
    def sample() -> float:
        result = sandbox.exec(line, timeout=120)
        assert result.ok, (line, result.stderr)
        return result.duration_s

    return sample


def restore_in_place(api, container_id: str) -> float:
    """Seconds to start a checkpointed container again from its own checkpoint folder."""
    url = api._url("/containers/{0}/start", container_id)
    return timed(lambda: api._raise_for_status(
        api._post(url, params={"checkpoint": snapshot.CHECKPOINT})
    ))  # fmt: skip


def snapshots(rounds: int, platform: str) -> dict[str, list[float]]:
    """Checkpoint, restore in place and restore into a new container, on gVisor's ``platform``."""
    plain = get_substrate("docker", **RUNTIMES[platform])
    restoring = get_substrate("docker", **RUNTIMES[platform], snapshot=True)
    out: dict[str, list[float]] = {"checkpoint": [], "restore in place": [], "restore new": []}
    try:
        for _ in range(rounds):
            sandbox = plain.start()
            assert sandbox.exec(SETUP, timeout=120).ok
            started = time.perf_counter()
            made = snapshot.checkpoint(plain.api, sandbox, plain._data_root)
            out["checkpoint"].append(time.perf_counter() - started)
            out["restore in place"].append(restore_in_place(plain.api, made.template_id))
            snapshot.remove(plain.api, made)
        prepare = Prepare("benchmark", lambda sandbox: sandbox.exec(SETUP, timeout=120))
        for _ in range(rounds + 1):
            with restoring.start(prepare=prepare) as sandbox:
                out["restore new"].append(sandbox.rollout.cold_start_s)
        out["restore new"].pop(0)  # the first made the checkpoint
    finally:
        plain.close()
        restoring.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="samples of each path")
    parser.add_argument("--json", help="write the samples and medians here")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    if load_before[0] >= QUIET_LOAD:
        print(f"load average {load_before[0]:.2f} on {os.cpu_count()} CPUs: not a quiet machine "
              f"(below {QUIET_LOAD}); queueing lowers every ratio", file=sys.stderr)  # fmt: skip
    results: dict[str, dict[str, float]] = {}
    cold = interleaved_all(args.rounds, {rt: cold_start(rt) for rt in RUNTIMES})
    results["cold start"] = {rt: p50(cold[rt]) for rt in RUNTIMES}

    boxes = {
        (rt, tr): get_substrate("docker", **RUNTIMES[rt], transport=tr).start()
        for rt in RUNTIMES
        for tr in TRANSPORTS
    }
    release = boxes["systrap", "exec"].substrate.runtime_release
    try:
        for transport in TRANSPORTS:
            action = interleaved_all(
                args.rounds * 5,
                {rt: (lambda box=boxes[rt, transport]: box.probe(1)[0]) for rt in RUNTIMES},
            )
            results[f"no-op action ({transport})"] = {rt: p50(action[rt]) for rt in RUNTIMES}
        for rt in RUNTIMES:
            assert boxes[rt, "exec"].exec(SETUP, timeout=120).ok
        for name, line in COMMANDS.items():
            samples = interleaved_all(
                args.rounds, {rt: command(boxes[rt, "exec"], line) for rt in RUNTIMES}
            )
            results[name] = {rt: p50(samples[rt]) for rt in RUNTIMES}
    finally:
        for box in boxes.values():
            box.close()
            box.substrate.close()

    snap = {platform: snapshots(max(3, args.rounds // 2), platform) for platform in GVISOR}
    load_after = os.getloadavg()
    print(f"gVisor (runsc) {release}; load average (1, 5, 15 min) before {load_before}, "
          f"after {load_after}, on {os.cpu_count()} CPUs")  # fmt: skip
    print("| path | runc p50 | systrap p50 | ptrace p50 | systrap / runc | ptrace / runc |")
    print("|---|---|---|---|---|---|")
    for name, by in results.items():
        runc, systrap, ptrace = by["runc"], by["systrap"], by["ptrace"]
        print(f"| {name} | {runc * 1e3:.1f} ms | {systrap * 1e3:.1f} ms | {ptrace * 1e3:.1f} ms "
              f"| {systrap / runc:.2f}x | {ptrace / runc:.2f}x |")  # fmt: skip
    for name in snap["systrap"]:
        systrap, ptrace = p50(snap["systrap"][name]), p50(snap["ptrace"][name])
        print(f"| {name} | | {systrap * 1e3:.0f} ms | {ptrace * 1e3:.0f} ms | | |")
    if args.json:
        medians = {platform: {k: p50(v) for k, v in got.items()} for platform, got in snap.items()}
        with open(args.json, "w") as out:
            json.dump({"p50_s": results, "snapshots_p50_s": medians, "release": release,
                       "load": [load_before, load_after]}, out, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
