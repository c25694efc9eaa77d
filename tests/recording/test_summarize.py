"""``python -m pytest_rollout_tax summarize DIR``: a record-mode directory as the usual
summary, JSON, page and saved run, which ``compare --fail`` gates."""

from __future__ import annotations

import io
import json

import pytest

from pytest_rollout_tax import record
from pytest_rollout_tax.cli import main


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """Six recorded rollouts of three steps on local, the last one left unfinished."""
    monkeypatch.chdir(tmp_path)
    recorder = record("local", out="runs", probes=1)
    for _ in range(5):
        with recorder.rollout("task") as sandbox:
            for _ in range(3):
                sandbox.exec("true")
    recorder.start("task")
    recorder.close()
    return tmp_path / "runs"


def test_the_summary_of_a_recorded_run(runs):
    status, out, err = cli("summarize", str(runs))
    assert status == 0, err
    assert "local: " in out and "think time:" in out and "measured live" in out
    assert "recorded: 6 rollouts from 1 journal(s)" in out
    assert "interrupted: 1 rollout(s) ended before their agent did\n" in out


def test_json_page_and_a_saved_run_that_compare_gates(runs, tmp_path):
    pytest.importorskip("matplotlib")
    status, out, err = cli(
        "summarize", str(runs), "--json", "r.json", "--output", "r.html", "--save", "live",
        "--project", "1000x3", "--train", "batch=4,slots=2,train=1",
    )  # fmt: skip
    assert status == 0, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["projection"]["think_time_source"] == "live"
    assert data["projection"]["rollouts"] == 1000 and data["projection"]["steps"] == 3
    assert data["substrates"]["local"]["rollouts"] == 6
    assert data["training"]["model"]["batch"] == 4  # the training step of the live rollouts
    assert "<html" in (tmp_path / "r.html").read_text()
    assert (tmp_path / ".rollout-tax" / "live.json").exists()
    status, out, err = cli("compare", "live", "live", "--fail", "step.mean:10%")
    assert status == 0, out + err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["summarize", "missing"], "missing: not a directory"),
        (["summarize", "."], "no record-mode journal"),
        (["summarize", "runs", "--project", "0x1"], "--project"),
    ],
)
def test_bad_input_is_one_line_and_exit_4(runs, argv, message):
    status, out, err = cli(*argv)
    assert status == 4 and out == ""
    assert err.count("\n") == 1 and message in err, err
