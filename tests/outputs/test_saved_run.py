"""The saved run as an output: its options checked at configure time, the run saved before
every other output and said last, never an interrupted run."""

from __future__ import annotations

import json
import re

import pytest
from support.reports import COLD, report, rollouts
from support.summary_runs import unwrapped

from pytest_rollout_tax.errors import SavedRunError
from pytest_rollout_tax.gate import storage
from pytest_rollout_tax.outputs.outcome import OutputResult
from pytest_rollout_tax.outputs.saved_run import Saving
from pytest_rollout_tax.report.schema import SCHEMA

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=5, rounds=3)
def test_loop(sandbox):
    sandbox.exec("true")
"""


def saving(tmp_path, name=None, autosave=False) -> Saving:
    return Saving(storage.Storage.at(tmp_path / "store"), name, autosave)


def test_a_run_is_saved_by_name_and_numbered(tmp_path) -> None:
    paths, result = saving(tmp_path, "main", autosave=True).save(report(rollouts("local", COLD)))
    store = tmp_path / "store"
    assert paths[0] == store / "main.json" and paths[1].name.startswith("0001_")
    assert result == OutputResult(tuple(f"run saved to {path}" for path in paths), failed=False)
    assert json.loads(paths[0].read_text())["schema"] == SCHEMA


def test_a_failed_save_is_reported_not_raised(tmp_path, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage.Storage, "save", broken)
    paths, result = saving(tmp_path, "main").save(report(rollouts("local", COLD)))
    assert paths == () and result.failed
    assert result.lines == (
        f"rollout-tax: error: cannot save this run in {tmp_path / 'store'}/: "
        "[Errno 28] No space left on device",
    )


@pytest.mark.parametrize("name", ["../escape", ""])
def test_a_name_that_is_a_path_is_refused(pytester, name) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider", f"--rollout-save={name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line] == [
        f"ERROR: --rollout-save={name!r}: expected a plain name of letters, digits, '.', '_', "
        "'+' or '-' (not a path: runs are saved in the storage directory)"
    ]


def test_an_unwritable_storage_is_refused_before_any_test(pytester) -> None:
    pytester.makepyfile(test_workload=WORKLOAD)
    (pytester.path / "store").write_text("a file, not a directory")  # saving()'s storage too
    result = pytester.runpytest("--rollout-storage=store", "--rollout-save=main")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: storage directory store/: not a directory" in result.errlines
    with pytest.raises(SavedRunError, match="not a directory"):
        saving(pytester.path).storage.check_writable("main")


def test_the_run_is_said_saved_last_and_named_by_the_page(pytester) -> None:
    pytest.importorskip("matplotlib")
    pytester.makepyfile(test_workload=WORKLOAD)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--rollout-save=main", "--rollout-json=run.json",
        "--rollout-html=page.html", "--rollout-compare=main",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    lines = unwrapped(result.outlines)
    written = [i for i, line in enumerate(lines) if re.match(r"(report|HTML report) written", line)]
    missing = lines.index(next(line for line in lines if "nothing to compare" in line))
    saved = lines.index("run saved to .rollout-tax/main.json")
    assert written[0] < written[1] < missing < saved
    assert "<title>Rollout tax: main.json" in (pytester.path / "page.html").read_text()


def test_an_interrupted_run_is_not_saved(pytester) -> None:
    pytester.makepyfile("def test_a(sandbox):\n    raise KeyboardInterrupt\n")
    result = pytester.runpytest_subprocess("--rollout-save=main")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["rollout-tax: the session was interrupted: this run is not saved"])
    assert not (pytester.path / ".rollout-tax" / "main.json").exists()
