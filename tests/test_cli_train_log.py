"""``python -m pytest_rollout_tax train-log``: a training run's section, against a saved run
or a report file; a file that is no training log is one line, exit status 4."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from support import train_logs
from support.train_logs import hand_checked_log, two_substrate_report

from pytest_rollout_tax.cli import main


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def run(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps(two_substrate_report().to_dict()))
    return hand_checked_log(tmp_path / "run.jsonl")


def test_against_a_report_file(run: Path):
    status, out, err = cli(
        "train-log", str(run), "--report", "report.json", "--gpus", "8", "--ran-on", "local"
    )
    assert (status, err) == (0, "")
    assert "on docker-session it would be 23.1 %" in out
    assert "idle GPU-hours: 2.2 over this run on 8 GPUs" in out


def test_the_newest_saved_run_is_the_default(run: Path, tmp_path: Path):
    storage = tmp_path / ".rollout-tax"
    storage.mkdir()
    (tmp_path / "report.json").rename(storage / "main.json")
    status, out, _ = cli("train-log", str(run))
    assert status == 0
    assert "what another substrate would change (report main.json" in out
    assert "on local it would be 21.6 %" in out  # 22 / 102: its tool time taken as tax free


def test_without_a_report_the_runs_own_figures(run: Path):
    status, out, _ = cli("train-log", str(run))
    assert status == 0
    assert out.splitlines()[-1] == (
        "what another substrate would change: no saved run in .rollout-tax/ (--report)"
    )


def test_json_alone_on_standard_output_or_to_a_file(run: Path, tmp_path: Path):
    status, out, _ = cli("train-log", str(run), "--report", "report.json", "--json")
    assert status == 0
    data = json.loads(out)
    assert data["stack"] == "verl" and data["figures"]["steps"] == 10
    status, out, _ = cli("train-log", str(run), "--json", str(tmp_path / "t.json"))
    assert status == 0 and "section written to" in out
    assert json.loads((tmp_path / "t.json").read_text())["what_if"]["substrates"] == []


def test_every_kind_on_the_command_line(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for stack, kinds in train_logs.KINDS.items():
        for kind in kinds:
            folder = tmp_path / f"{stack}-{kind}"
            folder.mkdir()
            files = [str(p) for p in train_logs.write(folder, stack, kind)]
            status, out, err = cli("train-log", *files)
            assert status == 0, err
            assert out.startswith(f"training log: {stack}, 10 steps"), out


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("empty.jsonl", b"", "empty file"),
        ("corrupt.jsonl", b'{"timing_s/step": 1}\n{oops\n', ":2: not a JSON line"),
        ("foreign.jsonl", b'{"loss": 1.0}\n', "its keys: loss (1 in all); known: verl"),
        ("events.out.tfevents.0.h", b"\x01\x02garbage", "no metric in it"),
    ],
)
def test_a_bad_file_is_one_line_exit_4(tmp_path: Path, name: str, data: bytes, expected: str):
    path = tmp_path / name
    path.write_bytes(data)
    status, out, err = cli("train-log", str(path))
    assert (status, out) == (4, "")
    assert err.count("\n") == 1 and err.startswith("rollout-tax: error: ")
    assert expected in err and "Traceback" not in err


def test_an_unknown_run_substrate_is_one_line(run: Path):
    status, _, err = cli("train-log", str(run), "--report", "report.json", "--ran-on", "e2b")
    assert status == 4
    assert "ran on 'e2b': not a substrate the report measured (local, docker-session)" in err


def test_a_missing_report_is_one_line(run: Path):
    status, _, err = cli("train-log", str(run), "--report", "nope")
    assert status == 4 and "--report: no baseline 'nope'" in err


def test_the_documented_output_is_what_it_prints(run: Path, tmp_path: Path):
    """docs/training-logs.md's example, every line but the elided ones, is printed as shown."""
    storage = tmp_path / ".rollout-tax"
    storage.mkdir()
    (tmp_path / "report.json").rename(storage / "main.json")
    status, out, _ = cli("train-log", "run.jsonl", "--gpus", "8", "--ran-on", "local")
    assert status == 0
    page = (Path(__file__).parents[1] / "docs" / "training-logs.md").read_text()
    block = page.split("## What it prints", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    documented = [line for line in block.splitlines() if "..." not in line]
    assert len(documented) == 7
    for line in documented:
        assert line in out.splitlines(), line


def test_tool_calls_per_trajectory_override_the_reports_steps(run: Path):
    # 100 tool calls: local 0.5 + 0.5 + 100 x 0.1 = 11 s, docker-session 2 + 1 + 30 = 33 s a
    # trajectory; from docker-session, local takes 22 s off 20 s in tools: none left
    status, out, _ = cli(
        "train-log", str(run), "--report", "report.json", "--ran-on", "docker-session",
        "--steps", "100",
    )  # fmt: skip
    assert status == 0
    assert "100 tool calls per trajectory" in out
    assert "on local it would be 0.0 % (-22.00 s per trajectory)" in out
    assert "the trainer would wait 20.0 % less" in out  # 100 s -> 80 s a step
