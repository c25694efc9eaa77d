"""``python -m pytest_rollout_tax``: compare, list, project; exit statuses 0 / 1 / 4."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.reports import as_schema_1, report, rollouts
from support.summary_runs import unwrapped

from pytest_rollout_tax.cli import main, reproject
from pytest_rollout_tax.gate import compare
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Means, Scale, tax_hours, worker_hours

COLD = [0.80, 1.10, 0.95, 1.02, 1.20, 0.90]


def make_report(
    factor: float = 1.0, substrate: str = "local", scale: Scale | None = None
) -> Report:
    return report(rollouts(substrate, COLD, factor), scale=scale)


@pytest.fixture
def runs(tmp_path: Path, monkeypatch) -> Path:
    """A storage with base.json, slow.json (10x), fast.json (0.1x) and same.json (= base)."""
    monkeypatch.chdir(tmp_path)
    storage = tmp_path / ".rollout-tax"
    storage.mkdir()
    base = make_report()
    for name, data in {
        "base": base,
        "same": base,
        "slow": make_report(10),
        "fast": make_report(0.1),
    }.items():
        (storage / f"{name}.json").write_text(json.dumps(data.to_dict()))
    return storage


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def assert_one_line_error(status: int, out: str, err: str, *expected: str) -> None:
    assert status == 4
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("rollout-tax: error: ")
    assert "Traceback" not in err
    for text in expected:
        assert text in err


# -- compare ------------------------------------------------------------------------------------


def test_compare_ten_times_slower_fails(runs: Path) -> None:
    status, out, err = cli("compare", "base", "slow", "--fail", "cold_start.p95:15%")
    assert status == 1, out + err
    assert err == ""
    lines = unwrapped(out.splitlines())
    assert lines[0].startswith("baseline: base.json (")
    assert lines[1].startswith("now:      slow.json (")
    assert compare.heading("rollout tax regression") in lines
    failed = [x for x in lines if x.startswith("FAILED ")]
    assert len(failed) == 1
    assert failed[0].startswith("FAILED local cold_start.p95: baseline 1.18s, now 11.8s")
    assert "threshold 15%" in failed[0]
    assert "permutation test of one test p=" in failed[0] and "< 0.05 (n=6/6 rollouts)" in failed[0]
    assert lines[-1] == "gate failed: 1 check(s): 1 failed"


def test_compare_equal_and_faster_pass(runs: Path) -> None:
    fails = [
        "--fail",
        "cold_start.p95:15%",
        "--fail",
        "action.p50:1ms",
        "--fail",
        "worker_hours:5%",
    ]
    status, out, _ = cli("compare", "base", "same", *fails)
    assert status == 0
    assert "rollout tax regression" not in out
    assert unwrapped(out.splitlines())[-1] == "gate passed: 3 check(s): 3 passed"
    status, out, _ = cli("compare", "base", "fast", *fails)
    assert status == 0 and "-90.0%" in out


def test_compare_table_without_checks(runs: Path) -> None:
    status, out, _ = cli("compare", "base", "slow")
    assert status == 0
    rows = [x.split()[0:2] for x in out.splitlines()]
    for metric in ("cold_start", "action", "step", "teardown"):
        assert [metric, "p50"] in rows and [metric, "p95"] in rows
    assert any(x.startswith("worker-hours ") and "+900.0%" in x for x in out.splitlines())
    assert all(len(x) <= 80 for x in out.splitlines())


def test_compare_accepts_paths_and_storage(runs: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"
    runs.rename(moved)
    status, out, _ = cli("compare", "--storage", str(moved), "base", str(moved / "slow.json"))
    assert status == 0 and "+900.0%" in out


def test_compare_substrates_on_one_side(runs: Path) -> None:
    (runs / "docker.json").write_text(json.dumps(make_report(substrate="docker").to_dict()))
    status, out, _ = cli("compare", "base", "docker", "--fail", "step.p50:1%")
    assert status == 0
    assert "only in the baseline (not compared): local" in out
    assert "only in this run (no baseline): docker" in out


def test_compare_missing_baseline_under_checks_is_an_error(runs: Path) -> None:
    status, out, err = cli("compare", "main", "slow", "--fail", "cold_start.p95:1%")
    assert status == 4 and out == ""
    assert err.startswith("rollout-tax: BASELINE under --fail: no baseline 'main' in ")


def test_compare_missing_baseline_is_a_warning_when_allowed(runs: Path) -> None:
    status, out, err = cli("compare", "main", "slow", "--fail", "cold_start.p95:1%",
                           "--missing", "pass")  # fmt: skip
    assert status == 0 and out == ""
    store = f".rollout-tax{os.sep}"
    assert err == f"rollout-tax: no baseline 'main' in {store}: nothing to compare (not failed)\n"


def test_compare_missing_current_is_an_error(runs: Path) -> None:
    assert_one_line_error(*cli("compare", "base", "nope"), "CURRENT: no baseline 'nope'")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{ nope", "corrupt.json: not valid JSON"),
        (b"\xff\xfe\x00binary", "corrupt.json: not a JSON file"),
        (
            json.dumps(
                {**make_report().to_dict(), "schema": "rollout-tax/9", "created": "2026"}
            ).encode(),
            "unsupported schema",
        ),  # fixed: a test id with the clock in it differs per xdist worker
        (b'{"benchmarks": []}', "corrupt.json: not a rollout-tax report"),
    ],
    ids=["not-json", "binary", "schema-9", "not-rollout-tax"],  # stable: xdist workers agree
)
@pytest.mark.parametrize("side", ["baseline", "current"])
def test_compare_bad_file(runs: Path, content: bytes, message: str, side: str) -> None:
    (runs / "corrupt.json").write_bytes(content)
    argv = ["corrupt", "base"] if side == "baseline" else ["base", "corrupt"]
    assert_one_line_error(*cli("compare", *argv), message)


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ("nope.p95:15%", "--fail='nope.p95:15%': unknown metric 'nope'"),
        ("cold_start.p97:15%", "--fail='cold_start.p97:15%': unknown stat 'p97'"),
        ("cold_start.p95:15", "needs a unit"),
        ("cold_start.p95:15 pct", "malformed threshold '15 pct'"),
        ("cold_start.p95", "expected METRIC.STAT:THRESHOLD"),
    ],
)
def test_compare_bad_check(runs: Path, check: str, message: str) -> None:
    assert_one_line_error(*cli("compare", "base", "slow", "--fail", check), message)
    # the check is rejected even when there is no baseline to compare with
    assert_one_line_error(*cli("compare", "missing", "slow", "--fail", check), message)


# -- list ---------------------------------------------------------------------------------------


def test_list(runs: Path) -> None:
    for when, name in enumerate(["slow", "base", "fast", "same"], start=1):
        os.utime(runs / f"{name}.json", (when * 1000, when * 1000))
    (runs / "broken.json").write_text("[]")
    os.utime(runs / "broken.json", (500, 500))
    status, out, err = cli("list")
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert (
        lines[0]
        == f"saved runs in .rollout-tax{os.sep}, oldest first (the last is the default baseline):"
    )
    names = [x.split()[0] for x in lines[3:] if x.split()[0].endswith(".json")]
    assert names == ["broken.json", "slow.json", "base.json", "fast.json", "same.json"]
    assert "unusable: not a rollout-tax report" in lines[3]
    assert "local (6)" in lines[-1]


def test_list_empty(tmp_path: Path) -> None:
    status, out, _ = cli("list", "--storage", str(tmp_path / "none"))
    assert status == 0 and out == f"no saved runs in {tmp_path / 'none'}{os.sep}\n"


def test_list_on_a_regular_file_says_it_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("{}")
    for command in ("list", "history"):
        assert_one_line_error(
            *cli(command, "--storage", str(tmp_path / "runs")),
            f"storage directory {tmp_path / 'runs'}{os.sep}: not a directory",
        )


# -- project ------------------------------------------------------------------------------------


def test_project_reprojects_without_rerunning(runs: Path, tmp_path: Path) -> None:
    status, out, err = cli(
        "project", "base", "--rollouts", "1000000", "--steps", "150", "--think-time", "2",
        "--json", str(tmp_path / "out.json"),
    )  # fmt: skip
    assert status == 0, err
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["projection"] == {
        "rollouts": 1_000_000, "steps": 150, "think_time_s": 2.0, "think_time_source": "option",
        "fleet": None, "rank_by": "worker_hours", "steps_source": "option",
    }  # fmt: skip
    local = data["substrates"]["local"]
    expected = worker_hours(
        Means(
            cold_start_s=local["cold_start"]["mean"],
            action_s=None,
            step_s=local["step"]["mean"],
            teardown_s=local["teardown"]["mean"],
        ),
        Scale(1_000_000, 150, 2.0),
    )
    assert local["worker_hours"] == pytest.approx(expected)
    assert expected > 150 * 2 * 1_000_000 / 3600  # think time alone is 83,333 h
    assert out.splitlines()[0].startswith("base.json (")
    assert "re-projected from 1,000,000 rollouts x 150 steps" in out
    assert any(x.startswith("local ") for x in out.splitlines())


def test_project_keeps_what_is_not_given(runs: Path) -> None:
    data = make_report(scale=Scale(rollouts=10, steps=7, think_time_s=1.5))
    again = reproject(data, None, None, None)
    assert again.projection == data.projection
    assert again.substrates["local"].worker_hours == pytest.approx(
        data.substrates["local"].worker_hours
    )
    more = reproject(data, 20, None, None)
    assert more.substrates["local"].worker_hours == pytest.approx(
        2 * data.substrates["local"].worker_hours
    )
    assert data.projection.rollouts == 10  # the input is not changed
    without = data.to_dict()
    del without["substrates"]["local"]["decomposition"]  # a run saved before it was reported
    old = Report.from_dict(without)
    assert old.substrates["local"].projected.decomposition is None
    redone = reproject(old, None, None, None).substrates["local"].projected.decomposition
    assert redone.to_dict() == pytest.approx(
        data.substrates["local"].projected.decomposition.to_dict()
    )


def test_project_redoes_tax_hours_and_cost(runs: Path, tmp_path: Path) -> None:
    priced = make_report(scale=Scale(rollouts=10, steps=7)).to_dict()
    local = priced["substrates"]["local"]
    local["price_per_hour"] = 0.5
    local["cost_usd"] = local["worker_hours"] * 0.5
    (runs / "priced.json").write_text(json.dumps(priced))
    status, _, err = cli("project", "priced", "--rollouts", "1000", "--json", str(tmp_path / "o"))
    assert status == 0, err
    again = json.loads((tmp_path / "o").read_text())["substrates"]["local"]
    assert again["tax_hours"] == pytest.approx(
        tax_hours(
            Means(
                cold_start_s=local["cold_start"]["mean"],
                action_s=local["action"]["mean"],
                step_s=None,
                teardown_s=local["teardown"]["mean"],
            ),
            Scale(1000, 7),
        )
    )
    assert again["worker_hours"] == pytest.approx(100 * local["worker_hours"])
    assert again["decomposition"] == pytest.approx(
        {part: 100 * hours for part, hours in local["decomposition"].items()}
    )
    assert again["cost_usd"] == pytest.approx(again["worker_hours"] * 0.5)  # not the old cost
    unpriced = reproject(make_report(), 1000, None, None).to_dict()
    assert "cost_usd" not in unpriced["substrates"]["local"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["project", "base", "--rollouts", "0"], "--rollouts: expected a positive integer"),
        (["project", "base", "--rollouts", "1.5"], "--rollouts: expected a positive integer"),
        (["project", "base", "--steps", "many"], "--steps: expected a positive integer"),
        (["project", "base", "--think-time", "-1"], "--think-time: expected seconds >= 0"),
        (["project", "base", "--think-time", "nan"], "--think-time: expected seconds >= 0"),
        (["project", "nope"], "RUN: no baseline 'nope'"),
        (["project"], "the following arguments are required: RUN"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: COMMAND"),
        (["compare", "base"], "required: CURRENT"),
        (["list", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_exit_4(runs: Path, argv: list[str], message: str) -> None:
    assert_one_line_error(*cli(*argv), message)


def test_project_unwritable_json(runs: Path) -> None:
    (runs / "dir").mkdir()
    assert_one_line_error(*cli("project", "base", "--json", str(runs / "dir")), "--json=")


def test_project_json_never_replaces_a_device(runs: Path) -> None:
    link = runs / "null.json"
    link.symlink_to("/dev/null")
    assert_one_line_error(
        *cli("project", "base", "--json", str(link)),
        f"--json={link}: not a regular file (it resolves to /dev/null, a character device)",
    )
    assert os.readlink(link) == "/dev/null"


def test_project_accepts_scientific_rollouts(runs: Path) -> None:
    status, out, _ = cli("project", "base", "--rollouts", "1e6", "--steps", "1_000")
    assert status == 0 and "1,000,000 rollouts x 1000 steps" in out


# -- help and the module entry point ------------------------------------------------------------


def test_help_explains_each_option(capsys) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for word in ("compare", "list", "project", "exit status", "4 bad input"):
        assert word in text
    assert main(["compare", "--help"]) == 0
    text = capsys.readouterr().out
    for word in (
        "BASELINE",
        "CURRENT",
        "--fail",
        "--storage",
        "cold_start",
        "p99",
        "15%",
        "permutation",
    ):
        assert word in text
    assert main(["project", "--help"]) == 0
    text = capsys.readouterr().out
    for word in ("--rollouts", "--steps", "--think-time", "--json"):
        assert word in text


def test_python_dash_m(runs: Path) -> None:
    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest_rollout_tax", *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )

    slow = run("compare", "base", "slow", "--fail", "step.p50:10%")
    assert slow.returncode == 1 and "FAILED local step.p50" in slow.stdout
    same = run("compare", "base", "same", "--fail", "step.p50:10%")
    assert same.returncode == 0
    bad = run("compare", "base", "slow", "--fail", "step.p50:10")
    assert bad.returncode == 4 and bad.stderr.count("\n") == 1 and bad.stdout == ""


@pytest.mark.parametrize("steps_as", ["columns", "objects"])
def test_runs_saved_by_schema_1_still_compare_list_and_project(runs: Path, steps_as: str) -> None:
    """Runs saved by ``rollout-tax/1``: steps as ``/1`` columns, or as objects, indented."""
    (runs / "old.json").write_text(json.dumps(as_schema_1(make_report(10), steps_as), indent=2))
    (runs / "new-slow.json").write_text(json.dumps(make_report(10).to_dict()))
    fail = ("--fail", "step.p50:15%", "--fail", "cold_start.p95:15%")
    status, out, _ = cli("compare", "base", "old", *fail)
    assert status == 1 and "FAILED local step.p50" in out
    assert out.replace("old.json", "new-slow.json") == cli("compare", "base", "new-slow", *fail)[1]
    assert cli("compare", "old", "base", *fail)[0] == 0
    status, out, _ = cli("list")
    assert status == 0 and "old.json" in out and "unusable" not in out
    status, out, _ = cli("project", "old", "--steps", "10", "--json", "old-10.json")
    assert status == 0 and "report written to old-10.json" in out
    assert cli("compare", "old-10.json", "slow", *fail)[0] == 0


def test_project_a_fleet(runs: Path, tmp_path: Path) -> None:
    status, out, err = cli("project", "base", "--fleet", "4", "--json", str(tmp_path / "f.json"))
    assert status == 0, err
    data = json.loads((tmp_path / "f.json").read_text())
    fleet = data["substrates"]["local"]["fleet"]
    assert data["projection"]["fleet"] == 4 and fleet["workers"] == 4
    assert fleet["cold_start_from"] == "rollouts (no burst measured)"
    assert fleet["wall_clock_hours"] == pytest.approx(fleet["worker_hours"] / 4)
    assert "local fleet of 4 workers: " in out
    status, _, err = cli("project", "base", "--fleet", "0")
    assert status == 4 and "--fleet: expected a positive integer, got '0'" in err


# -- html ---------------------------------------------------------------------------------------


def test_html_writes_the_page_of_a_saved_run(runs: Path, tmp_path: Path) -> None:
    status, out, err = cli("html", "base", "-o", str(tmp_path / "page.html"))
    assert (status, err) == (0, "")
    assert out == f"HTML report written to {tmp_path / 'page.html'}\n"
    page = (tmp_path / "page.html").read_text()
    assert "<title>Rollout tax: base.json</title>" in page
    assert page.count("<svg") == 4 and 'id="gate"' not in page  # these runs have no phases


def test_html_against_a_baseline_shows_the_comparison_and_the_checks(
    runs: Path, tmp_path: Path
) -> None:
    status, _, err = cli(
        "html", "slow", "base", "-o", str(tmp_path / "page.html"), "--fail", "cold_start.p50:15%"
    )
    assert (status, err) == (0, "")  # the page shows the verdict; compare is the gate
    page = (tmp_path / "page.html").read_text()
    assert "local (baseline)" in page
    assert '<li class="failed">FAILED local cold_start.p50: baseline ' in page
    assert '<p class="verdict failed" id="verdict">Gate failed: 1 of 1 check(s)' in page


def test_html_of_a_run_saved_before_the_decomposition_draws_it(runs: Path, tmp_path: Path) -> None:
    old = json.loads((runs / "base.json").read_text())
    del old["substrates"]["local"]["decomposition"]
    (runs / "old.json").write_text(json.dumps(old))
    status, _, err = cli("html", "old", "-o", str(tmp_path / "page.html"))
    assert (status, err) == (0, "")
    assert 'aria-label="Worker-hours by part"' in (tmp_path / "page.html").read_text()


def test_html_with_a_missing_baseline_warns_and_writes_the_page(runs: Path, tmp_path: Path) -> None:
    status, _, err = cli("html", "base", "nope", "-o", str(tmp_path / "page.html"))
    assert status == 0
    assert err == "rollout-tax: no baseline 'nope' in .rollout-tax/: the page has no baseline\n"
    assert (tmp_path / "page.html").is_file()


def test_html_bad_input_is_one_line_and_exit_4(runs: Path, tmp_path: Path, request) -> None:
    status, _, err = cli("html", "base", "-o", str(tmp_path))
    assert status == 4
    assert err == f"rollout-tax: error: --output={tmp_path}: is a directory; name a file\n"
    status, _, err = cli("html", "missing", "-o", str(tmp_path / "page.html"))
    assert (status, err) == (4, "rollout-tax: error: RUN: no baseline 'missing' in .rollout-tax/\n")
    request.getfixturevalue("no_matplotlib")
    status, _, err = cli("html", "base", "-o", str(tmp_path / "page.html"))
    assert status == 4
    assert err == (
        f"rollout-tax: error: --output={tmp_path / 'page.html'}: the HTML report needs "
        "matplotlib: pip install 'pytest-rollout-tax[html]'\n"
    )
    assert not (tmp_path / "page.html").exists()


def test_the_console_script_is_the_module_s_command_line(monkeypatch, tmp_path, capsys):
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="pytest-rollout-tax")
    assert script.value == "pytest_rollout_tax.cli:run"
    monkeypatch.setattr("sys.argv", ["pytest-rollout-tax", "project", str(tmp_path / "no.json")])
    with pytest.raises(SystemExit) as exited:
        script.load()()
    assert exited.value.code == 4  # a missing run: one line, the usage status
    assert "no.json" in capsys.readouterr().err


@pytest.mark.parametrize("columns", [80, 132])
def test_compare_fits_columns(runs: Path, monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    """Issue 30, item 10: every line of ``compare --fail`` fits ``COLUMNS``, the regression
    section's heading spans it."""
    monkeypatch.setenv("COLUMNS", str(columns))
    fails = ("--fail", "cold_start.p95:15%", "--fail", "step.p50:5%", "--fail", "worker_hours:5%")
    status, out, _ = cli("compare", "base", "slow", *fails)
    assert status == 1
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns, out
    assert compare.heading("rollout tax regression", columns) in lines
    assert sum(line.startswith("FAILED local ") for line in lines) == 3


# -- project --train ----------------------------------------------------------------------------


def test_project_a_training_step_and_keep_it_when_reprojecting(runs: Path, tmp_path: Path) -> None:
    status, out, err = cli(
        "project", "base", "--train", "batch=4,slots=2,train=10", "--json", str(tmp_path / "t.json")
    )
    assert status == 0, err
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["training"]["model"]["batch"] == 4 and data["training"]["model"]["slots"] == 2
    lines = unwrapped(out.splitlines())
    assert any(line.startswith("training: sync steps of 4 rollouts on 2 slots") for line in lines)
    assert any(line.startswith("local training step ") for line in lines)
    (runs / "trained.json").write_text((tmp_path / "t.json").read_text())
    status, out, _ = cli("project", "trained", "--rollouts", "1e3", "--json", "t2.json")
    again = json.loads(Path("t2.json").read_text())["training"]
    assert status == 0 and again["model"] == data["training"]["model"]
    assert again["rollouts"] == 1000 and again["steps"] == 250  # redone at the new scale
    status, out, _ = cli("project", "base", "--rank-by", "train")
    assert status == 0 and out.splitlines()[1].startswith("fastest training step: local, ")
    assert "training: sync steps of 512 rollouts on 512 slots" in out


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("batch=0", "--train: batch=0: expected a whole number from 1 to 65,536"),
        ("batch=4,slots=8", "--train: slots=8: more sandboxes than the batch's 4 rollouts"),
        ("mode=maybe", "--train: mode=maybe: expected sync or async"),
        ("train=-1", "--train: train=-1: expected a number from 0 to 86400"),
    ],
)
def test_project_a_bad_training_value_is_one_usage_line(runs: Path, value: str, message) -> None:
    assert_one_line_error(*cli("project", "base", "--train", value), message)


def test_merge_help_promises_no_exit_status_of_an_option_it_lacks(capsys):
    """Issue 47, finding 12: ``merge --help`` said "1 a --fail check found a regression"."""
    main(["merge", "--help"])
    out = capsys.readouterr().out
    assert "--fail" not in out and "exit status: 0 merged; 4 bad input or a refused merge" in out
