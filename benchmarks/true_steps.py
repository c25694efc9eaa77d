"""The acceptance workload of issue 29: 60 ``/bin/true`` steps per rollout, as pytest runs it.

    python benchmarks/true_steps.py [--rounds 3] [--substrates local,local-session,...]

One pytest session over every variant (``--rollout-order interleave``); from its JSON report,
per variant: ``action.p50`` (the probe), ``step.p50``, their ratio, and each variant's
``step.p50`` as a ratio to its kind's ``exec`` variant. Targets: action.p50 >= 0.6x step.p50
on every variant; docker-session step.p50 <= 0.08x docker's; local-session's <= 1.0x local's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=60)
def test_true_steps(sandbox):
    for _ in range(60):
        assert sandbox.exec(["/bin/true"]).exit_code == 0
"""
VARIANTS = "local,local-session,docker,docker-session"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--substrates", default=VARIANTS)
    args = parser.parse_args(argv)
    names = args.substrates.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "test_workload.py").write_text(WORKLOAD)
        config = "".join(
            f'[tool.rollout-tax.substrates.{name}]\nkind = "{name.split("-")[0]}"\n'
            'transport = "session"\n'
            for name in names
            if name.endswith("-session")
        )
        (directory / "pyproject.toml").write_text(config)
        report = directory / "report.json"
        command = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            f"--substrate={args.substrates}", f"--rollout-rounds={args.rounds}",
            "--rollout-order=interleave", f"--rollout-json={report}", "test_workload.py",
        ]  # fmt: skip
        done = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"pytest failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        substrates = json.loads(report.read_text())["substrates"]
    print(f"60 /bin/true steps per rollout, {args.rounds} rounds, one interleaved session")
    print(f"{'variant':<16}{'action p50':>12}{'step p50':>12}{'action/step':>13}{'step/exec':>11}")
    for name in names:
        entry = substrates[name]
        action, step = entry["action"]["p50"], entry["step"]["p50"]
        plain = substrates.get(name.split("-")[0])
        versus = f"{step / plain['step']['p50']:.3f}x" if plain and plain is not entry else "-"
        cells = f"{action * 1e3:>10.2f}ms{step * 1e3:>10.2f}ms{action / step:>12.2f}x"
        print(f"{name:<16}{cells}{versus:>11}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
