"""The gate of a pytest session: its options checked early, then compare and gate."""

from __future__ import annotations

import pytest
from support.reports import COLD, report, rollouts
from support.summary_runs import unwrapped

from pytest_rollout_tax.errors import ConfigError, RolloutTaxError
from pytest_rollout_tax.gate import storage
from pytest_rollout_tax.gate.compare import Verdict
from pytest_rollout_tax.gate.storage import SavedRunError
from pytest_rollout_tax.plugin.gating import Gate, check_compare


def gate(tmp_path, **options) -> Gate:
    defaults = {"storage": str(tmp_path / "store"), "compare": None, "fail": []}
    return Gate.from_options(**(defaults | options))


def test_gate_without_options_does_nothing(tmp_path) -> None:
    verdict = gate(tmp_path).judge(report(rollouts("local", COLD)))
    assert verdict == Verdict()
    assert not (tmp_path / "store").exists()


def test_a_missing_baseline_under_checks_is_an_error_naming_what_exists(tmp_path) -> None:
    """Issue 42, finding 3: a mistyped baseline kept CI green forever. Under checks it is one
    line naming the saved runs there are, unless --rollout-compare-missing=pass."""
    store = tmp_path / "store"
    storage.Storage.at(str(store)).save("main", report(rollouts("local", COLD)))
    with pytest.raises(ConfigError) as caught:
        gate(tmp_path, compare="mian", fail=["cold_start.p95:15%"])
    assert str(caught.value) == (
        f"rollout-tax: --rollout-compare='mian' under --rollout-compare-fail: no baseline "
        f"'mian' in {store}/ (saved runs there: main); save one with --rollout-save=NAME, or "
        "--rollout-compare-missing=pass for a first run"
    )
    with pytest.raises(ValueError, match="--rollout-compare-missing='maybe': expected fail"):
        gate(tmp_path, compare="mian", fail=["cold_start.p95:15%"], missing="maybe")


def test_gate_missing_baseline_warns_when_allowed(tmp_path) -> None:
    named = gate(tmp_path, compare="main", fail=["cold_start.p95:15%"], missing="pass")
    assert named.baseline is None
    verdict = named.judge(report(rollouts("local", COLD)))
    store = tmp_path / "store"
    assert unwrapped(verdict.lines) == [
        f"rollout-tax: no baseline 'main' in {store}/: nothing to compare (this run is not failed)"
    ]
    assert not verdict.failed and verdict.state == "no baseline"
    newest = gate(tmp_path, compare="").judge(report(rollouts("local", COLD)))
    assert unwrapped(newest.lines) == [
        f"rollout-tax: no saved run in {store}/: nothing to compare (this run is not failed)"
    ]


def test_gate_compares_with_the_saved_baseline(tmp_path) -> None:
    saved = storage.Storage.at(tmp_path / "store").save("main", report(rollouts("local", COLD)))
    second = gate(tmp_path, compare="main", fail=["step.p50:10%"])
    assert second.baseline is not None and second.baseline.path == saved
    verdict = second.judge(report(rollouts("local", COLD, 10)))
    assert verdict.failed
    assert list((tmp_path / "store").iterdir()) == [saved]  # judging saves nothing
    assert unwrapped(verdict.regression)[0].startswith("FAILED local step.p50: baseline ")


def test_gate_checks_without_compare_are_inert(tmp_path) -> None:
    verdict = gate(tmp_path, fail=["step.p50:10%"]).judge(report(rollouts("local", COLD)))
    assert not verdict.failed
    assert unwrapped(verdict.lines) == [
        "rollout-tax: --rollout-compare-fail has no effect without --rollout-compare"
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fail": ["bogus.p50:1%"]}, "--rollout-compare-fail='bogus.p50:1%': unknown metric"),
        ({"fail": ["step.p50:1%", "step.p42:1%"]}, "unknown stat 'p42'"),
        ({"fail": ["step.p50:1 percent"]}, "malformed threshold"),
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
    storage.Storage.at(tmp_path / "store").save("suite", report(rollouts("local", COLD)))
    assert gate(tmp_path, compare="suite.json").baseline is not None  # the way to name it
    assert gate(tmp_path, compare="").baseline is not None  # no value: not the current dir


def test_gate_bad_baseline_raises_naming_the_file(tmp_path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "main.json").write_text("{not json")
    with pytest.raises(SavedRunError, match=rf"^{store / 'main.json'}: not valid JSON"):
        gate(tmp_path, compare="main")
    gate(tmp_path, compare="main", load_baseline=False)  # xdist workers do no file work


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
