"""The table of bounds: docs/limits.md and core/limits.LIMITS agree, and every bound with a
command-line form refuses a value past it (and infinity) with one usage line, exit status 4."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_rollout_tax.core import limits
from pytest_rollout_tax.core.limits import LIMITS, file_number
from pytest_rollout_tax.errors import SavedRunError, TrajectoryError
from pytest_rollout_tax.gate.storage import load as load_run
from pytest_rollout_tax.replay.load import load as load_trajectories

DOC = Path(__file__).parents[2] / "docs" / "limits.md"

#: How each bound is given on the command line: the arguments for a value of it.
ARGUMENTS = {
    "--rollout-rounds": lambda v: [f"--rollout-rounds={v}"],
    "--rollout-probes": lambda v: [f"--rollout-probes={v}"],
    "--rollout-project steps": lambda v: [f"--rollout-project=1000x{v}"],
    "--rollout-think-time": lambda v: [f"--rollout-think-time={v}"],
    "--rollout-start-at": lambda v: [f"--rollout-start-at={v}"],
    "--rollout-burst": lambda v: [f"--rollout-burst={v}"],
    "--rollout-fleet": lambda v: [f"--rollout-fleet={v}"],
    "SUBSTRATE.pool": lambda v: [f"--substrate-opt=local.pool={v}"],
    "docker.cpus": lambda v: ["--substrate=docker", f"--substrate-opt=docker.cpus={v}"],
    "docker.pids_limit": lambda v: ["--substrate=docker", f"--substrate-opt=docker.pids_limit={v}"],
}
#: Values past each bound (both ends where the low end is refused too).
PAST = {
    "--rollout-start-at": ["-1e300", "0"],
    "docker.cpus": ["inf", "1e-12", "1025"],
    "--rollout-project steps": ["1" + "0" * 400],
    "--rollout-think-time": ["1e308"],
    "SUBSTRATE.pool": ["1000000000"],
}


def _rows() -> dict[str, str]:
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", DOC.read_text(), re.MULTILINE)
    return {name: text.strip() for name, text in rows}


def test_the_doc_lists_every_bound_as_the_code_has_it():
    assert _rows() == {name: bound.text() for name, bound in LIMITS.items()}


def _cases():
    for name, arguments in ARGUMENTS.items():
        bound = LIMITS[name]
        above = int(bound.high) + 1 if bound.high == int(bound.high) else bound.high * 2
        values = PAST.get(name, [str(above)])
        for value in values:
            yield pytest.param(name, arguments(value), id=f"{name}={value[:12]}")


@pytest.mark.parametrize(("name", "arguments"), list(_cases()))
def test_a_value_past_a_bound_is_one_usage_line(pytester, name, arguments):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest(*arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    errors = [line for line in result.errlines if line.startswith("ERROR")]
    assert len(errors) == 1, result.errlines
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize("text", ["1" * 401, "1e400", "-1e400"], ids=["401-digits", "inf", "-inf"])
def test_a_number_in_a_file_is_bounded(tmp_path, text):
    with pytest.raises(json.JSONDecodeError, match="expected a finite number"):
        json.loads(f'{{"x": {text}}}', parse_int=file_number, parse_float=file_number)
    saved = tmp_path / "run.json"
    saved.write_text(f'{{"schema": "rollout-tax/2", "x": {text}}}')
    with pytest.raises(SavedRunError, match="expected a finite number"):
        load_run(saved)
    trajectory = tmp_path / "run.jsonl"
    trajectory.write_text(f'{{"cmd": "ls", "think_s": {text}}}\n')
    with pytest.raises(TrajectoryError, match="expected a finite number"):
        load_trajectories(trajectory)


def test_the_modules_own_ceilings_are_the_tables():
    from pytest_rollout_tax import flags
    from pytest_rollout_tax.fleet import burst
    from pytest_rollout_tax.plugin import marker, settings
    from pytest_rollout_tax.replay.load import MAX_SECONDS

    assert LIMITS["--rollout-rounds"].high == settings.MAX_ROUNDS
    assert LIMITS["--rollout-probes"].high == settings.MAX_PROBES
    assert LIMITS["--rollout-output-cap"].high == settings.MAX_OUTPUT_CAP
    assert LIMITS["--rollout-burst"].high == burst.MAX_CONCURRENCY
    assert LIMITS["--rollout-fleet"].high == flags.MAX_WORKERS
    assert {
        "steps": LIMITS["marker steps"].high,
        "rounds": LIMITS["marker rounds"].high,
    } == marker.MAX_COUNTS
    assert LIMITS["recorded seconds"].high == MAX_SECONDS


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"projection": {"rollouts": 1e30}}', "projection.rollouts"),
        ('{"steps": [{"command": "true"}, {"think_s": 1e400}]}', "steps[1].think_s"),
        ("[1, -99999999999999999999]", "[1]"),
    ],
)
def test_a_file_number_past_its_bound_names_its_field(text: str, field: str) -> None:
    """Issue 47, finding 12: the refusal named the number, not where it was."""
    with pytest.raises(json.JSONDecodeError, match=rf"^{re.escape(field)}: number \S+: expected"):
        limits.loads(text)
    assert limits.loads('{"a": [1, 2.5]}') == {"a": [1, 2.5]}


def test_a_saved_run_and_a_trajectory_name_the_field(tmp_path) -> None:
    saved = tmp_path / "run.json"
    saved.write_text('{"projection": {"rollouts": 1e30}}')
    with pytest.raises(SavedRunError, match=r"projection\.rollouts: number 1e30"):
        load_run(saved)
    trajectory = tmp_path / "t.traj.json"
    trajectory.write_text('{"format": "rollout-tax", "steps": [{"think_s": 1e400}]}')
    with pytest.raises(TrajectoryError, match=r"steps\[0\]\.think_s: number 1e400"):
        load_trajectories(trajectory)
