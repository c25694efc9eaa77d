"""What gVisor and bubblewrap cost next to runc, in one interleaved run on one image.

    python benchmarks/isolation.py [--rounds 10] [--json PATH]

Every round takes one sample of each path, in reverse order every other round (ABC CBA), so
that drift in the machine's load hits all alike. Medians (p50) of:

- cold start: ``Substrate.start()`` (create, start, first no-op) on ``runtime=runc`` and
  ``runtime=runsc`` on each of gVisor's platforms, ``systrap`` (its default) and ``ptrace``,
  and on the ``bwrap`` substrate (the same image's root under a layer of its own);
- reset against fresh (``reuse="reset"``): the cold start of a rollout that gets a used
  sandbox, reset (phase ``reset``), on docker (runc) and bwrap, beside their fresh one;
- action: the no-op probe (what the report's ``action`` is) on each and on both transports;
- commands an agent runs, each one step on the ``exec`` transport: Python importing stdlib
  modules, 300 fork+exec, file I/O (500 files written and read back by Python), ``git status``
  on a small repository, and ``python -m unittest`` on a small suite (the image has no pytest);
- snapshots (gVisor only, each platform): the checkpoint of a prepared sandbox (and the
  commit of its disk), its restore in the same container, and a restore into a new container (the
  ``docker.snapshot`` variant's cold start, phases ``create`` + ``restore`` + ``first_exec``).

The ratios are each column's p50 over runc's: the floor is runc, measured in the same run;
the acceptance lines compare bwrap's cold start with docker's (at most 0.1x) and a reset
docker rollout's with a fresh one's (at most 0.25x).
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
from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.substrate import Prepare
from pytest_rollout_tax.fleet.reuse import Recycler
from pytest_rollout_tax.substrates.docker import snapshot

#: The 1-minute load average below which a machine counts as quiet.
QUIET_LOAD = 1.0

#: What is compared, as a substrate and its options: runc (the floor), gVisor on each
#: platform, and bubblewrap.
RUNTIMES = {
    "runc": ("docker", {"runtime": "runc"}),
    "systrap": ("docker", {"runtime": "runsc", "platform": "systrap"}),
    "ptrace": ("docker", {"runtime": "runsc", "platform": "ptrace"}),
    "bwrap": ("bwrap", {}),
}
#: The acceptance ratios: bwrap's cold start against docker's, a reset against a fresh one.
BWRAP_BOUND, RESET_BOUND = 0.1, 0.25
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


def substrate_of(runtime: str, **options: object):
    kind, given = RUNTIMES[runtime]
    return get_substrate(kind, **given, **options)


def cold_start(runtime: str) -> Callable[[], float]:
    substrate = substrate_of(runtime)

    def sample() -> float:
        with substrate.start() as sandbox:
            return sandbox.rollout.cold_start_s

    return sample


def reset_start(runtime: str, recyclers: list[Recycler]) -> Callable[[], float]:
    """The cold start of a rollout that gets a used sandbox, reset (a first rollout made it);
    the recycler goes in ``recyclers``, to be closed (its kept sandbox deleted) at the end."""
    recycler = Recycler(substrate_of(runtime, reuse="reset"))
    recyclers.append(recycler)
    with recycler.start(Rollout(substrate=runtime), timeout=None) as sandbox:
        assert sandbox.exec("echo used > used && (sleep 600 >/dev/null 2>&1 &)").ok

    def sample() -> float:
        rollout = Rollout(substrate=runtime)
        with recycler.start(rollout, timeout=None) as sandbox:
            assert sandbox.exec("echo used > used && (sleep 600 >/dev/null 2>&1 &)").ok
        assert "reset" in rollout.phases
        return rollout.cold_start_s

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
    plain = substrate_of(platform)
    restoring = substrate_of(platform, snapshot=True)
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
    fresh_and_reset = {"runc": cold_start("runc"), "bwrap": cold_start("bwrap")}
    recyclers: list[Recycler] = []
    try:
        fresh_and_reset |= {f"{rt} reset": reset_start(rt, recyclers) for rt in ("runc", "bwrap")}
        resets = interleaved_all(args.rounds, fresh_and_reset)
    finally:
        for recycler in recyclers:
            recycler.close()
            recycler.substrate.close()
    reset_p50 = {name: p50(samples) for name, samples in resets.items()}

    boxes = {
        (rt, tr): substrate_of(rt, transport=tr).start() for rt in RUNTIMES for tr in TRANSPORTS
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
    others = [rt for rt in RUNTIMES if rt != "runc"]
    print("| path | runc p50 | " + " | ".join(f"{rt} p50" for rt in others) + " | "
          + " | ".join(f"{rt} / runc" for rt in others) + " |")  # fmt: skip
    print("|---" * (2 + 2 * len(others)) + "|")
    for name, by in results.items():
        print(f"| {name} | {by['runc'] * 1e3:.1f} ms | "
              + " | ".join(f"{by[rt] * 1e3:.1f} ms" for rt in others) + " | "
              + " | ".join(f"{by[rt] / by['runc']:.3f}x" for rt in others) + " |")  # fmt: skip
    for name in snap["systrap"]:
        systrap, ptrace = p50(snap["systrap"][name]), p50(snap["ptrace"][name])
        print(f"| {name} | | {systrap * 1e3:.0f} ms | {ptrace * 1e3:.0f} ms | | | | | |")
    print("\n| reset against fresh | fresh p50 | reset p50 | reset / fresh |\n|---|---|---|---|")
    for rt in ("runc", "bwrap"):
        fresh, reset = reset_p50[rt], reset_p50[f"{rt} reset"]
        print(f"| {rt} | {fresh * 1e3:.1f} ms | {reset * 1e3:.1f} ms | {reset / fresh:.3f}x |")
    bwrap_ratio = results["cold start"]["bwrap"] / results["cold start"]["runc"]
    reset_ratio = reset_p50["runc reset"] / reset_p50["runc"]
    checks = [("bwrap cold start / docker's", bwrap_ratio, BWRAP_BOUND),
              ("docker reset cold start / fresh", reset_ratio, RESET_BOUND)]  # fmt: skip
    for what, got, bound in checks:
        print(f"{what}: {got:.3f}x (bound {bound}x): {'met' if got <= bound else 'NOT met'}")
    if args.json:
        medians = {platform: {k: p50(v) for k, v in got.items()} for platform, got in snap.items()}
        with open(args.json, "w") as out:
            json.dump({"p50_s": results, "snapshots_p50_s": medians, "release": release,
                       "reset_p50_s": reset_p50, "load": [load_before, load_after]},
                      out, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
