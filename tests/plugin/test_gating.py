"""The gate of a pytest session: its options checked early, then compare, gate and save."""

from __future__ import annotations

import json

import pytest
from support.reports import COLD, report, rollouts
from support.summary_runs import unwrapped

from pytest_rollout_tax.errors import ConfigError, RolloutTaxError
from pytest_rollout_tax.gate import storage
from pytest_rollout_tax.gate.compare import Verdict
from pytest_rollout_tax.gate.storage import SavedRunError
from pytest_rollout_tax.plugin.gating import Gate, check_compare
from pytest_rollout_tax.report.schema import SCHEMA


def gate(tmp_path, **options) -> Gate:
    defaults = {"storage": str(tmp_path / "store"), "save": None, "autosave": False}
    defaults |= {"compare": None, "fail": []}
    return Gate.from_options(**(defaults | options))


def test_gate_without_options_does_nothing(tmp_path) -> None:
    verdict = gate(tmp_path).finish(report(rollouts("local", COLD)))
    assert verdict == Verdict()
    assert not (tmp_path / "store").exists()


def test_gate_missing_baseline_warns(tmp_path) -> None:
    named = gate(tmp_path, compare="main", fail=["cold_start.p95:15%"])
    assert named.baseline is None
    verdict = named.finish(report(rollouts("local", COLD)))
    store = tmp_path / "store"
    assert unwrapped(verdict.lines) == [
        f"rollout-tax: no baseline 'main' in {store}/: nothing to compare (this run is not failed)"
    ]
    assert not verdict.failed
    newest = gate(tmp_path, compare="").finish(report(rollouts("local", COLD)))
    assert unwrapped(newest.lines) == [
        f"rollout-tax: no saved run in {store}/: nothing to compare (this run is not failed)"
    ]


def test_gate_saves_then_compares(tmp_path) -> None:
    first = gate(tmp_path, save="main", compare="main", fail=["step.p50:10%"])
    verdict = first.finish(report(rollouts("local", COLD)))
    saved = tmp_path / "store" / "main.json"
    assert unwrapped(verdict.lines)[-1] == f"run saved to {saved}"
    assert json.loads(saved.read_text())["schema"] == SCHEMA
    second = gate(tmp_path, compare="main", fail=["step.p50:10%"], autosave=True)
    assert second.baseline is not None and second.baseline.path == saved
    verdict = second.finish(report(rollouts("local", COLD, 10)))
    assert verdict.failed
    assert unwrapped(verdict.summary)[-1].startswith(f"run saved to {tmp_path / 'store' / '0001_'}")
    assert unwrapped(verdict.regression)[0].startswith("FAILED local step.p50: baseline ")


def test_gate_does_not_save_an_interrupted_run(tmp_path) -> None:
    verdict = gate(tmp_path, save="main", autosave=True).finish(
        report(rollouts("local", COLD)), save=False
    )
    assert unwrapped(verdict.lines) == [
        "rollout-tax: the session was interrupted: this run is not saved"
    ]
    assert list((tmp_path / "store").iterdir()) == []


def test_gate_checks_without_compare_are_inert(tmp_path) -> None:
    verdict = gate(tmp_path, fail=["step.p50:10%"]).finish(report(rollouts("local", COLD)))
    assert not verdict.failed
    assert unwrapped(verdict.lines) == [
        "rollout-tax: --rollout-compare-fail has no effect without --rollout-compare"
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fail": ["bogus.p50:1%"]}, "unknown metric 'bogus'"),
        ({"fail": ["step.p50:1%", "step.p42:1%"]}, "unknown stat 'p42'"),
        ({"fail": ["step.p50:1 percent"]}, "malformed threshold"),
        ({"save": "../escape"}, "--rollout-save='../escape'"),
        ({"save": ""}, "--rollout-save=''"),
    ],
)
def test_gate_bad_options_raise(tmp_path, options, message) -> None:
    with pytest.raises(RolloutTaxError, match=message.replace("(", r"\(").replace(".", r"\.")):
        gate(tmp_path, **options)


def test_gate_refuses_a_test_directory_as_baseline(tmp_path, monkeypatch) -> None:
    """``pytest --rollout-compare suite``: the optional value swallowed the test path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite").mkdir()
    message = r"^--rollout-compare='suite' is a directory, not a saved run: write "
    for load_baseline in (True, False):  # the controller and every xdist worker
        with pytest.raises(ConfigError, match=message):
            gate(tmp_path, compare="suite", load_baseline=load_baseline)
    saved = gate(tmp_path, save="suite").finish(report(rollouts("local", COLD)))
    assert unwrapped(saved.lines) == [f"run saved to {tmp_path / 'store' / 'suite.json'}"]
    assert gate(tmp_path, compare="suite.json").baseline is not None  # the way to name it
    assert gate(tmp_path, compare="").baseline is not None  # no value: not the current dir


def test_gate_bad_baseline_raises_naming_the_file(tmp_path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "main.json").write_text("{not json")
    with pytest.raises(SavedRunError, match=rf"^{store / 'main.json'}: not valid JSON"):
        gate(tmp_path, compare="main")


def test_gate_unwritable_storage_raises_early(tmp_path) -> None:
    (tmp_path / "store").write_text("a file, not a directory")
    with pytest.raises(SavedRunError, match="not a directory"):
        gate(tmp_path, save="main")
    gate(tmp_path, save="main", load_baseline=False)  # xdist workers do no file work


def test_gate_save_failure_is_reported_not_raised(tmp_path, monkeypatch) -> None:
    g = gate(tmp_path, save="main")

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage.Storage, "save", broken)
    verdict = g.finish(report(rollouts("local", COLD)))
    assert unwrapped(verdict.lines) == [
        f"rollout-tax: error: cannot save this run in {tmp_path / 'store'}/: "
        "[Errno 28] No space left on device"
    ]


def test_check_compare_refuses_test_paths(tmp_path, monkeypatch) -> None:
    """``pytest --rollout-compare suite`` takes the test directory for the baseline's name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite" / "unit").mkdir(parents=True)
    with pytest.raises(ConfigError) as info:
        check_compare("suite")
    assert str(info.value) == (
        "--rollout-compare='suite' is a directory, not a saved run: write "
        "--rollout-compare=NAME (with '='), or put the option after the test paths "
        "(a saved run of that name: --rollout-compare=suite.json)"
    )
    with pytest.raises(ConfigError, match=r"^--rollout-compare='suite/unit' is a directory, "):
        check_compare("suite/unit")
    with pytest.raises(ConfigError, match=r"'test_x\.py' is a Python file, not a saved run"):
        check_compare("test_x.py")  # whether or not it exists
    with pytest.raises(ConfigError, match=r"'t\.py::test_a\[1\]' is a test id, not a saved run"):
        check_compare("t.py::test_a[1]")
    for ref in ("", "main", "0003", "suite.json", "ci/main.json", "missing-dir"):
        assert check_compare(ref) == ref
