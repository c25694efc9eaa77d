"""pytest runs that save, compare and gate (pytester): save, autosave, compare, fail, xdist,
and every bad input. Regressions are made deterministic by scaling a real run's samples."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.summary_runs import unwrapped

from pytest_rollout_tax.cli import main as cli_main
from pytest_rollout_tax.gate import history

try:  # here, once: pytester's in-process runs drop modules they import, numpy cannot come back
    history.require()
    HAS_HISTORY = True
except history.HistoryUnavailable:
    HAS_HISTORY = False
needs_history = pytest.mark.skipif(not HAS_HISTORY, reason="the [history] extra is not installed")

needs_xdist = pytest.mark.skipif(
    importlib.util.find_spec("xdist") is None, reason="pytest-xdist is not installed"
)

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=20, rounds=6)
def test_edit_loop(sandbox):
    sandbox.write_file("calc.py", "def add(a, b):\\n    return a + b\\n")
    result = sandbox.exec("true")
    assert result.exit_code == 0
    assert "add" in sandbox.read_file("calc.py")
"""

STORE = ".rollout-tax"


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_workload=WORKLOAD)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def scaled(data, factor: float, key: str = ""):
    """Every duration (a float, or a step's whole microseconds) and hours times ``factor``."""
    if isinstance(data, dict):
        return {name: scaled(value, factor, name) for name, value in data.items()}
    if isinstance(data, list):
        return [scaled(value, factor, key) for value in data]
    if key == "wall_us":
        return round(data * factor)
    return data * factor if isinstance(data, float) else data


def saved_run(pytester: pytest.Pytester, name: str = "real") -> dict:
    """Run the workload once, save it, and return the saved report."""
    result = run(pytester, f"--rollout-save={name}")
    assert result.ret == 0, result.stdout.str()
    return json.loads((pytester.path / STORE / f"{name}.json").read_text())


def write_baseline(pytester: pytest.Pytester, name: str, data: dict, factor: float) -> Path:
    """STORAGE/NAME.json: ``data`` with its samples and STATS scaled by ``factor``."""
    baseline = {**data, "substrates": scaled(data["substrates"], factor)}
    baseline["rollouts"] = scaled(data["rollouts"], factor)
    path = pytester.path / STORE / f"{name}.json"
    path.write_text(json.dumps(baseline))
    return path


def section(result: pytest.RunResult, title: str) -> list[str]:
    """The lines of the terminal section headed ``title`` (up to the next ``===`` line)."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if re.fullmatch(rf"=+ {title} =+", line))
    end = next(
        (i for i in range(start + 1, len(lines)) if re.fullmatch(r"=+ .* =+", lines[i])),
        len(lines),
    )
    return unwrapped(lines[start + 1 : end])


def assert_usage_error(result: pytest.RunResult, *expected: str) -> None:
    """Exit 4, one ``ERROR:`` line naming the file or value, no traceback, no test run."""
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    output = result.stdout.str() + result.stderr.str()
    errors = [line for line in result.errlines if line.startswith("ERROR: ")]
    assert len(errors) == 1, output
    for text in expected:
        assert text in errors[0], errors[0]
    assert "Traceback" not in output
    assert "passed" not in result.stdout.str()


# -- save and autosave --------------------------------------------------------------------------


def test_save_writes_the_whole_report(suite: pytest.Pytester) -> None:
    result = run(suite, "--rollout-save=main")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"run saved to {STORE}/main.json"])
    data = json.loads((suite.path / STORE / "main.json").read_text())
    assert data["schema"] == "rollout-tax/2"
    assert len(data["rollouts"]) == 6
    assert data["substrates"]["local"]["cold_start"]["n"] == 6
    machine = data["machine"]
    assert {"cpu_count", "python", "platform", "hostname_sha256"} <= set(machine)
    assert "hostname" not in machine
    assert not [p for p in (suite.path / STORE).iterdir() if p.name != "main.json"]


def test_save_to_custom_storage(suite: pytest.Pytester) -> None:
    result = run(suite, "--rollout-save=main", "--rollout-storage=perf/runs")
    assert result.ret == 0
    assert (suite.path / "perf" / "runs" / "main.json").is_file()


def test_save_from_ini(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nrollout_save = nightly\nrollout_storage = runs\n")
    assert run(suite).ret == 0
    assert (suite.path / "runs" / "nightly.json").is_file()


def test_save_through_a_symlink_writes_its_target(suite: pytest.Pytester) -> None:
    (suite.path / STORE).mkdir()
    (suite.path / "shared").mkdir()
    (suite.path / STORE / "main.json").symlink_to(suite.path / "shared" / "main.json")
    assert run(suite, "--rollout-save=main").ret == 0
    assert (suite.path / STORE / "main.json").is_symlink()
    assert json.loads((suite.path / "shared" / "main.json").read_text())["schema"]


def test_save_to_a_link_to_a_device_is_a_usage_error(suite: pytest.Pytester) -> None:
    (suite.path / STORE).mkdir()
    (suite.path / STORE / "main.json").symlink_to("/dev/null")
    assert_usage_error(
        run(suite, "--rollout-save=main"),
        f"cannot save 'main' as {STORE}/main.json: not a regular file (it resolves to /dev/null, "
        "a character device)",
    )
    assert os.readlink(suite.path / STORE / "main.json") == "/dev/null"


def test_autosave_numbers_each_run(suite: pytest.Pytester) -> None:
    for _ in range(2):
        assert run(suite, "--rollout-autosave").ret == 0
    names = sorted(p.name for p in (suite.path / STORE).iterdir())
    assert len(names) == 2
    assert re.fullmatch(r"0001_\d{8}T\d{6}Z\.json", names[0])  # not a git checkout: a timestamp
    assert names[1].startswith("0002_")


def committed(suite: pytest.Pytester) -> str:
    """The suite's folder made a git checkout with its workload committed; the commit's sha."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=suite.path, check=True)
    subprocess.run([*git, "add", "test_workload.py"], cwd=suite.path, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=suite.path, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=suite.path, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_autosave_names_the_commit(suite: pytest.Pytester) -> None:
    sha = committed(suite)
    assert run(suite, "--rollout-autosave").ret == 0
    [path] = (suite.path / STORE).iterdir()
    assert path.name == f"0001_{sha[:12]}.json"
    commit = json.loads(path.read_text())["commit"]
    assert commit["sha"] == sha and commit["dirty"] is False


# -- compare and fail ---------------------------------------------------------------------------


def test_ten_times_slower_fails_with_a_regression_section(suite: pytest.Pytester) -> None:
    write_baseline(suite, "main", saved_run(suite), 0.01)  # the baseline was 100x faster
    result = run(
        suite,
        "--rollout-compare=main",
        "--rollout-compare-fail=cold_start.p50:15%",
        "--rollout-compare-fail=step.p50:15%",
        "--rollout-compare-fail=teardown.p95:100s",
    )
    assert result.ret == 1
    result.assert_outcomes(passed=6)  # every test passed; the gate failed the session
    summary = section(result, "rollout tax")
    assert any(line.startswith("baseline: main.json (") for line in summary)
    assert any(line.split()[:2] == ["cold_start", "p95"] for line in summary)
    lines = section(result, "rollout tax regression")
    failed = [line for line in lines if line.startswith("FAILED ")]
    assert len(failed) == 2
    assert failed[0].startswith("FAILED local cold_start.p50: baseline ")
    assert ", now " in failed[0] and "threshold 15%" in failed[0]
    assert "permutation test of one test p=" in failed[0] and "< 0.05" in failed[0]
    assert failed[1].startswith("FAILED local step.p50: ")
    assert lines[-1] == "gate failed: 3 check(s): 2 failed, 1 passed"


def test_a_failed_gate_states_its_verdict_first_and_last(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    write_baseline(suite, "main", saved_run(suite), 0.01)  # the baseline was 100x faster
    result = run(suite, "--color=yes", "--rollout-compare=main",
                 "--rollout-compare-fail=cold_start.p50:15%", "--rollout-compare-fail=step.p50:15%",
                 "--rollout-compare-fail=teardown.p95:100s")  # fmt: skip
    assert result.ret == 1
    result.assert_outcomes(passed=6)  # every test passed; the gate failed the session
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in result.outlines]
    final = next(i for i in range(len(plain) - 1, -1, -1) if plain[i].startswith("="))
    [verdict] = unwrapped(plain[final + 1 :])  # the session's last line, wrapped to 80 columns
    assert re.fullmatch(
        r"rollout-tax gate: FAILED \(exit status 1; 3 check\(s\): 2 failed, 1 passed, against "
        r"main\.json\): local cold_start\.p50 \+[\d.]+% "
        r"\(threshold 15%\); local step\.p50 \+[\d.]+% \(threshold 15%\)",
        verdict,
    ), verdict
    first = plain.index(section_heading(plain)) + 1  # the summary's first line
    assert unwrapped(plain[first : first + len(plain) - final - 1]) == [verdict]
    assert all(len(line) <= 80 for line in plain[final + 1 :])
    # pytest's final line, just above: red, and it counts the failed gate (not "6 passed" alone)
    assert re.fullmatch(r"=+ 6 passed, 1 rollout-tax gate failed in [\d.]+s =+", plain[final])
    assert result.outlines[final].startswith("\x1b[31m=")  # red, as the exit status says


def test_a_passed_gate_states_its_verdict_first_and_last(suite: pytest.Pytester) -> None:
    write_baseline(suite, "main", saved_run(suite), 10)  # the baseline was 10x slower
    result = run(suite, "--color=yes", "--rollout-compare=main",
                 "--rollout-compare-fail=cold_start.p50:15%")  # fmt: skip
    assert result.ret == 0
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in result.outlines]
    assert plain[-1] == "rollout-tax gate: passed (1 check(s): 1 passed, against main.json)"
    assert plain[plain.index(section_heading(plain)) + 1] == plain[-1]
    assert re.fullmatch(r"=+ 6 passed in [\d.]+s =+", plain[-2])
    assert result.outlines[-2].startswith("\x1b[32m=")  # green, as the exit status says


def test_an_ungated_run_states_no_verdict(suite: pytest.Pytester) -> None:
    result = run(suite, "--rollout-save=main")
    assert result.ret == 0
    assert "rollout-tax gate" not in result.stdout.str()
    assert re.fullmatch(r"=+ 6 passed in [\d.]+s =+", result.outlines[-1])


def section_heading(lines: list[str]) -> str:
    return next(line for line in lines if re.fullmatch(r"=+ rollout tax =+", line))


def test_comparison_counts_say_what_they_count(suite: pytest.Pytester) -> None:
    """Issue 30, item 9: the table's counts name their unit, as the gate's ``n=6/6 rollouts``
    does, so ``480/480`` steps never reads as rollouts."""
    real = saved_run(suite)
    write_baseline(suite, "main", real, 0.01)
    result = run(suite, "--rollout-compare=main", "--rollout-compare-fail=cold_start.p50:15%")
    assert result.ret == 1
    rows = {" ".join(line.split()[:2]): line for line in section(result, "rollout tax")}
    entry = real["substrates"]["local"]
    for metric, noun in (("cold_start", "rollouts"), ("action", "probes"), ("step", "steps"),
                         ("teardown", "rollouts")):  # fmt: skip
        n = entry[metric]["n"]
        assert rows[f"{metric} p50"].endswith(f" {n}/{n} {noun}"), rows[f"{metric} p50"]
    assert entry["step"]["n"] != entry["cold_start"]["n"]  # steps, not rollouts
    [failed] = [line for line in section(result, "rollout tax regression") if "FAILED" in line]
    rollouts = entry["cold_start"]["n"]
    assert f"(n={rollouts}/{rollouts} rollouts)" in failed


def test_the_current_run_keeps_dirty_in_the_header(suite: pytest.Pytester) -> None:
    """Issue 30, item 9: ``now:`` names the commit as the saved run's label does, ``-dirty``
    included."""
    sha = committed(suite)[:12]
    with (suite.path / "test_workload.py").open("a") as file:
        file.write("# uncommitted\n")
    assert run(suite, "--rollout-save=main").ret == 0
    result = run(suite, "--rollout-compare=main")
    assert result.ret == 0
    summary = section(result, "rollout tax")
    [baseline] = [line for line in summary if line.startswith("baseline: ")]
    [now] = [line for line in summary if line.startswith("now: ")]
    assert baseline.endswith(f", {sha}-dirty)") and now.endswith(f", {sha}-dirty)"), summary


@pytest.mark.parametrize("columns", [80, 100])
def test_every_comparison_and_gate_line_fits_the_terminal(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """Issue 30, item 10: at ``COLUMNS`` the gate's FAILED lines ran to 145-157 characters;
    every line of the comparison and of the regression section fits now."""
    write_baseline(suite, "main", saved_run(suite), 0.01)
    monkeypatch.setenv("COLUMNS", str(columns))
    result = run(
        suite,
        "--rollout-compare=main",
        "--rollout-compare-fail=cold_start.p50:15%",
        "--rollout-compare-fail=step.p95:15%",
        "--rollout-compare-fail=worker_hours:10%",
        "--rollout-compare-fail=action.p50:1ms",
    )
    assert result.ret == 1
    start = next(i for i, line in enumerate(result.outlines) if line.startswith("baseline: "))
    lines = result.outlines[start:]
    assert max(len(line) for line in lines) <= columns, "\n".join(lines)
    regression = section(result, "rollout tax regression")
    assert sum(line.startswith("FAILED local ") for line in regression) >= 3
    assert all(
        "permutation test of one test p=" in line
        for line in regression
        if line.startswith("FAILED")
    )


TWO_TESTS = """
import os
import pytest

@pytest.mark.trajectory(steps=20, rounds=10)
def test_edit(sandbox):
    sandbox.write_file("calc.py", "x = 1\\n")
    assert sandbox.exec(os.environ.get("EDIT_COMMAND", "true")).exit_code == 0

@pytest.mark.trajectory(steps=20, rounds=5)
def test_run(sandbox):
    assert sandbox.exec("true").exit_code == 0
"""


def test_the_gate_names_the_test_that_regressed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30, item 7: one line per test and substrate beside the totals, and the failed
    check names the test whose own rollouts carry it: two real runs, where only test_edit's
    command became slower."""
    pytester.makepyfile(test_workload=TWO_TESTS)
    assert run(pytester, "--rollout-save=main").ret == 0
    monkeypatch.setenv("EDIT_COMMAND", "sleep 0.05")
    result = run(pytester, "--rollout-compare=main", "--rollout-compare-fail=step.mean:50%")
    assert result.ret == 1, result.stdout.str()
    summary = section(result, "rollout tax")
    by_test = [line for line in summary if line.startswith("local test_workload.py::")]
    assert [line.split(":")[2] for line in by_test] == ["test_edit", "test_run"], summary
    assert by_test[0].endswith(" 10/10 rollouts") and by_test[1].endswith(" 5/5 rollouts")
    assert "cold_start p50 " in by_test[0] and ", step p50 " in by_test[0]
    regression = section(result, "rollout tax regression")
    [named] = [line for line in regression if " carried by: " in line]
    assert named.startswith("local step.mean carried by: test_workload.py::test_edit +")
    assert re.search(r"test_edit \+[\d.]+%, p=\S+; not alone: test_workload.py::test_run ", named)


def test_faster_run_passes(suite: pytest.Pytester) -> None:
    write_baseline(suite, "main", saved_run(suite), 10)  # the baseline was 10x slower
    result = run(suite, "--rollout-compare=main", "--rollout-compare-fail=cold_start.p50:15%")
    assert result.ret == 0
    assert "rollout tax regression" not in result.stdout.str()
    result.stdout.fnmatch_lines(["gate passed: 1 check(s): 1 passed"])


def test_compare_without_value_takes_the_newest(suite: pytest.Pytester) -> None:
    real = saved_run(suite)
    write_baseline(suite, "zz-slow", real, 10)
    newest = write_baseline(suite, "aa-fast", real, 0.01)
    result = run(suite, "--rollout-compare", "--rollout-compare-fail=step.p50:15%")
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"baseline: {newest.name} (*"])


def test_compare_by_path_and_autosave_number(suite: pytest.Pytester) -> None:
    real = saved_run(suite)
    path = write_baseline(suite, "x", real, 0.01)  # 100x faster, beyond any load
    moved = path.rename(suite.path / "baseline.json")
    assert run(suite, f"--rollout-compare={moved}", "--rollout-compare-fail=step.p50:15%").ret == 1
    assert run(suite, "--rollout-autosave").ret == 0
    assert run(suite, "--rollout-compare=0001", "--rollout-compare-fail=step.p50:900%").ret == 0


def test_save_and_compare_the_same_name(suite: pytest.Pytester) -> None:
    real = saved_run(suite, "main")
    write_baseline(suite, "main", real, 0.01)
    result = run(suite, "--rollout-compare=main", "--rollout-save=main",
                 "--rollout-compare-fail=step.p50:15%")  # fmt: skip
    assert result.ret == 1  # compared with the old main, then replaced it
    saved = json.loads((suite.path / STORE / "main.json").read_text())
    assert saved["created"] >= real["created"] and saved["rollouts"] != real["rollouts"]


def test_compare_table_matches_the_cli(suite: pytest.Pytester, capsys) -> None:
    write_baseline(suite, "main", saved_run(suite), 0.5)
    result = run(suite, "--rollout-compare=main", "--rollout-save=now")
    assert result.ret == 0
    plugin_rows = [line for line in section(result, "rollout tax") if line.startswith("step p")]
    capsys.readouterr()
    assert cli_main(["compare", "main", "now"]) == 0
    cli_rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step p")]
    assert plugin_rows == cli_rows and len(cli_rows) == 2


def test_substrates_on_one_side_are_listed(suite: pytest.Pytester) -> None:
    real = saved_run(suite)
    real["substrates"] = {"docker": real["substrates"]["local"]}
    for rollout in real["rollouts"]:
        rollout["substrate"] = "docker"
    (suite.path / STORE / "docker.json").write_text(json.dumps(real))
    result = run(suite, "--rollout-compare=docker", "--rollout-compare-fail=step.p50:1%")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "only in the baseline (not compared): docker",
            "only in this run (no baseline): local",
            "no substrate in common with the baseline: no check judged",
            "gate not applicable: 1 check(s): 1 not judged",
            "rollout-tax gate: not applicable (1 check(s): 1 not judged, against docker.json)",
        ]
    )


# -- missing baseline: an error under checks, a warning when allowed or ungated -----------------


def test_a_missing_baseline_under_checks_fails_in_one_line(suite: pytest.Pytester) -> None:
    """Issue 42, finding 3: --rollout-compare=mian kept CI green forever."""
    saved_run(suite, "main")
    result = run(suite, "--rollout-compare=mian", "--rollout-compare-fail=cold_start.p95:15%")
    assert_usage_error(
        result,
        f"--rollout-compare='mian' under --rollout-compare-fail: no baseline 'mian' in {STORE}/ "
        "(saved runs there: main); save one with --rollout-save=NAME, or "
        "--rollout-compare-missing=pass for a first run",
    )


@pytest.mark.parametrize(
    ("option", "warning"),
    [
        (
            "--rollout-compare=main",
            f"rollout-tax: no baseline 'main' in {STORE}/: nothing to compare",
        ),
        ("--rollout-compare", f"rollout-tax: no saved run in {STORE}/: nothing to compare"),
        ("--rollout-compare=ci/main.json", "rollout-tax: no baseline file ci/main.json: nothing"),
    ],
)
def test_missing_baseline_passes_with_a_warning(
    suite: pytest.Pytester, option: str, warning: str
) -> None:
    result = run(suite, option, "--rollout-compare-fail=cold_start.p95:1%", "--rollout-autosave",
                 "--rollout-compare-missing=pass")  # fmt: skip
    assert result.ret == 0
    assert unwrapped(result.outlines)[-1].startswith("rollout-tax gate: no baseline (")
    [line] = [line for line in unwrapped(result.outlines) if line.startswith("rollout-tax: no ")]
    assert line.startswith(warning) and line.endswith("(this run is not failed)")
    assert "rollout tax regression" not in result.stdout.str()
    assert len(list((suite.path / STORE).iterdir())) == 1  # the first run still saves


def test_missing_baseline_but_failing_tests_still_fail(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_broken(sandbox):\n    assert False\n")
    result = run(pytester, "--rollout-compare=main")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["rollout-tax: no baseline 'main' in*"])


# -- bad input: one ERROR line, exit 4, before any test runs ------------------------------------

BAD_FILES = [
    ("corrupt", b'{"schema": "rollout-tax/1", "substrates": {', "corrupt.json: not valid JSON"),
    ("binary", b"\x00\x01\xfe\xff\x89PNG", "corrupt.json: not a JSON file (not UTF-8 text)"),
    ("schema", b'{"schema": "rollout-tax/3"}', "unsupported schema 'rollout-tax/3'"),
    ("not a report", b'{"benchmarks": []}', "corrupt.json: not a rollout-tax report"),
]


@pytest.mark.parametrize(
    ("content", "message"), [b[1:] for b in BAD_FILES], ids=[b[0] for b in BAD_FILES]
)
def test_bad_baseline_file(suite: pytest.Pytester, content: bytes, message: str) -> None:
    store = suite.path / STORE
    store.mkdir()
    (store / "corrupt.json").write_bytes(content)
    assert_usage_error(run(suite, "--rollout-compare=corrupt"), f"{STORE}/corrupt.json: ", message)
    # the newest run is the corrupt one: the same error
    assert_usage_error(run(suite, "--rollout-compare"), message)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--rollout-compare-fail=latency.p95:15%"], "unknown metric 'latency'"),
        (["--rollout-compare-fail=cold_start.p96:15%"], "unknown stat 'p96'"),
        (["--rollout-compare-fail=cold_start.p95:15"], "needs a unit"),
        (["--rollout-compare-fail=cold_start.p95:fast"], "malformed threshold 'fast'"),
        (["--rollout-compare-fail=cold_start.p95"], "expected METRIC.STAT:THRESHOLD"),
        (["--rollout-compare-fail=worker_hours.p95:5%"], "worker_hours is projected from means"),
        (["--rollout-save=../outside"], "--rollout-save='../outside'"),
        (
            ["--rollout-save=main", "--rollout-storage=afile"],
            "storage directory afile/: not a directory",
        ),
    ],
)
def test_bad_option(suite: pytest.Pytester, options: list[str], message: str) -> None:
    (suite.path / "afile").write_text("")
    result = run(suite, "--rollout-compare=main", *options)
    name = options[0].split("=")[0]
    assert_usage_error(result, message, name if "fail" in name else "")


def test_compare_before_a_test_directory_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """``--rollout-compare`` takes an optional value: ``suite`` would become the baseline name,
    the whole rootdir would run and the gate would be off behind a "no baseline" warning."""
    pytester.mkpydir("suite").joinpath("test_workload.py").write_text(WORKLOAD)
    pytester.makepyfile(test_elsewhere="def test_not_in_suite():\n    assert False\n")
    result = run(pytester, "--rollout-compare", "suite", "--rollout-compare-fail=step.p50:1%")
    assert_usage_error(
        result,
        "--rollout-compare='suite' is a directory, not a saved run: write --rollout-compare=NAME "
        "(with '='), or put the option after the test paths",
    )
    assert_usage_error(run(pytester, "--rollout-compare", "suite/test_workload.py"), "Python file")
    after = run(pytester, "suite", "--rollout-compare", "--rollout-save=suite")
    assert after.ret == 0  # after the paths, the option takes no value
    after.assert_outcomes(passed=6)
    after.stdout.fnmatch_lines([f"rollout-tax: no saved run in {STORE}/: nothing to compare*"])
    named = run(pytester, "--rollout-compare=suite.json", "suite")  # a run named like the dir
    assert named.ret == 0
    named.stdout.fnmatch_lines(["baseline: suite.json (*"])


def test_bad_option_from_ini(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nrollout_compare_fail =\n    cold_start.p95:15%\n    step.nope:1ms\n")
    assert_usage_error(run(suite, "--rollout-compare"), "step.nope:1ms", "unknown stat 'nope'")


# -- xdist --------------------------------------------------------------------------------------


@needs_xdist
def test_xdist_saves_every_workers_rollouts_once(suite: pytest.Pytester) -> None:
    result = run(suite, "-n", "2", "--rollout-save=main", "--rollout-autosave")
    assert result.ret == 0
    result.assert_outcomes(passed=6)
    data = json.loads((suite.path / STORE / "main.json").read_text())
    assert len(data["rollouts"]) == 6
    assert sorted(p.name[:5] for p in (suite.path / STORE).iterdir()) == ["0001_", "main."]
    assert result.stdout.str().count("run saved to ") == 2


@needs_xdist
def test_xdist_gates_on_the_controller(suite: pytest.Pytester) -> None:
    write_baseline(suite, "main", saved_run(suite), 0.01)  # 100x faster, beyond any load
    result = run(suite, "-n", "2", "--rollout-compare=main", "--rollout-compare-fail=step.p50:15%")
    assert result.ret == 1
    assert result.stdout.str().count("rollout tax regression") == 1
    failed = [line for line in section(result, "rollout tax regression") if "FAILED" in line]
    assert len(failed) == 1 and "(n=6/6 rollouts)" in failed[0]  # all workers' rollouts
    verdict = (
        "rollout-tax gate: FAILED (exit status 1; 1 check(s): 1 failed, against main.json): "
        "local step.p50 +"
    )
    assert unwrapped(section(result, "rollout tax"))[0].startswith(verdict)  # once
    lines = result.outlines
    final = next(i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("="))
    [last] = unwrapped(lines[final + 1 :])
    assert last.startswith(verdict)
    assert re.fullmatch(r"=+ 6 passed, 1 rollout-tax gate failed in [\d.]+s =+", lines[final])


@needs_xdist
def test_xdist_bad_input_is_one_error(suite: pytest.Pytester) -> None:
    result = run(suite, "-n", "2", "--rollout-compare-fail=cold_start.p95:15")
    assert_usage_error(result, "needs a unit")


@needs_xdist
def test_xdist_missing_baseline_passes(suite: pytest.Pytester) -> None:
    result = run(suite, "-n", "2", "--rollout-compare=main", "--rollout-compare-fail=step.p50:1%",
                 "--rollout-compare-missing=pass")  # fmt: skip
    assert result.ret == 0
    assert result.stdout.str().count("rollout-tax: no baseline 'main'") == 1


# -- the history gate ---------------------------------------------------------------------------


def write_history(pytester: pytest.Pytester, data: dict, factors: list[float]) -> None:
    """Autosaves 0001.. of ``data`` scaled by each factor, oldest first by modification time."""
    for index, factor in enumerate(factors, start=1):
        path = write_baseline(pytester, f"{index:04d}_old", data, factor)
        os.utime(path, ns=(index * 10**9, index * 10**9))


@needs_history
def test_history_fail_fails_on_a_new_slowdown(suite: pytest.Pytester) -> None:
    data = saved_run(suite)
    (suite.path / STORE / "real.json").unlink()
    write_history(suite, data, [0.01 * (1 + 0.02 * (i % 3)) for i in range(8)])  # 100x faster
    result = run(suite, "--rollout-autosave", "--rollout-history-fail")
    assert result.ret == 1, result.stdout.str()
    lines = section(result, "rollout tax regression")
    new = [line for line in lines if line.startswith("NEW CHANGE POINT local.cold_start.p50 on ")]
    assert len(new) == 1 and "from 0009_" in new[0] and "t-test p=" in new[0]
    assert lines[-1] == f"(over 9 saved run(s) in {STORE}{os.sep}, per testbed)"


@needs_history
def test_history_fail_passes_without_a_change(suite: pytest.Pytester) -> None:
    result = run(suite, "--rollout-autosave", "--rollout-history-fail")
    assert result.ret == 0
    out = result.stdout.str()
    assert "rollout-tax: history: no new change point over 1 saved run(s)" in out
    assert "saved run(s) on this testbed, 3 needed: none looked for" in (
        " ".join(unwrapped(result.outlines))
    )
    unsaved = run(suite, "--rollout-history-fail")
    assert unsaved.ret == 0
    assert "--rollout-history-fail has no effect: this run was not saved" in unsaved.stdout.str()


def test_history_fail_without_the_extra_is_a_usage_error(suite, monkeypatch) -> None:
    def missing() -> None:
        raise history.HistoryUnavailable("change-point detection needs ruptures: pip install x")

    monkeypatch.setattr(history, "require", missing)
    result = run(suite, "--rollout-history-fail")
    assert result.ret == 4
    assert "ERROR: --rollout-history-fail: change-point detection needs ruptures" in (
        result.stderr.str()
    )
