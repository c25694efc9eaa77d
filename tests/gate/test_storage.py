"""Saved runs: naming, autosave numbering, newest, resolving NAME|PATH, loading and validation."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
from pathlib import Path

import pytest
from support.reports import as_schema_1, build_report

from pytest_rollout_tax.core import files as report_module
from pytest_rollout_tax.core.record import Rollout, Step, steps_of
from pytest_rollout_tax.gate.storage import (
    NoSavedRun,
    SavedRunError,
    Storage,
    autosave_label,
    check_name,
    load,
)
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Scale


def sample_report(commit: dict | None = None) -> Report:
    rollouts = [
        Rollout(
            test=f"t.py::test_x[local-{i}]",
            substrate="local",
            round=i,
            outcome="passed",
            cold_start_s=0.01 * i,
            teardown_s=0.002,
            trajectory_s=0.05,
            steps=[Step("exec", 0.001, 0)],
            action_probes_s=[0.0005, 0.0006],
        )
        for i in range(1, 4)
    ]
    return build_report(
        rollouts, Scale(), plugin_version="test", machine={"cpu_count": 1}, commit=commit
    )


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(tmp_path / ".rollout-tax")


def set_mtime(path: Path, when: int) -> None:
    os.utime(path, ns=(when * 10**9, when * 10**9))


# -- saving -------------------------------------------------------------------------------------


def test_save_writes_name_json(storage: Storage) -> None:
    data = sample_report()
    path = storage.save("main", data)
    assert path == storage.root / "main.json"
    assert json.loads(path.read_text()) == data.to_dict()
    assert storage.save("main.json", data) == path  # a trailing .json is the same name
    assert [p.name for p in storage.root.iterdir()] == ["main.json"]  # no temporary left


@pytest.mark.parametrize("name", ["", " ", "../x", "a/b", "/abs", ".hidden", "-x", "a b"])
def test_save_names_must_be_plain(name: str) -> None:
    with pytest.raises(SavedRunError, match=re.escape(f"name={name!r}: expected a plain name")):
        check_name(name)
    with pytest.raises(SavedRunError, match=re.escape(f"--rollout-save={name!r}: expected")):
        check_name(name, "--rollout-save")


def test_save_is_atomic(storage: Storage, monkeypatch) -> None:
    path = storage.save("main", sample_report())
    before = path.read_text()

    def crash(handle, data):
        handle.write('{"schema": "rollout-tax/1", "substr')
        raise KeyboardInterrupt

    monkeypatch.setattr(report_module, "stream_json", crash)
    with pytest.raises(KeyboardInterrupt):
        storage.save("main", sample_report())
    assert path.read_text() == before
    assert [p.name for p in storage.root.iterdir()] == ["main.json"]


def test_autosave_numbers_runs(storage: Storage) -> None:
    first = storage.autosave(sample_report({"sha": "a" * 40, "branch": "main", "dirty": False}))
    second = storage.autosave(sample_report({"sha": "b" * 40, "branch": "main", "dirty": True}))
    third = storage.autosave(sample_report(None))
    assert first.name == f"0001_{'a' * 12}.json"
    assert second.name == f"0002_{'b' * 12}-dirty.json"
    assert re.fullmatch(r"0003_\d{8}T\d{6}Z\.json", third.name)
    storage.save("main", sample_report())
    (storage.root / "0041_manual.json").write_text("{}")
    assert storage.next_number() == 42
    assert not [p for p in storage.root.iterdir() if p.name.startswith(".")]


def test_autosave_never_overwrites(storage: Storage, monkeypatch) -> None:
    commit = {"sha": "c" * 40, "branch": "x", "dirty": False}
    storage.root.mkdir()
    (storage.root / f"0001_{'c' * 12}.json").write_text("{}")
    numbers = iter([1, 1, 2])  # a concurrent session took 0001 between look-up and link
    monkeypatch.setattr(Storage, "next_number", lambda self: next(numbers))
    path = storage.autosave(sample_report(commit))
    assert path.name == f"0002_{'c' * 12}.json"
    assert (storage.root / f"0001_{'c' * 12}.json").read_text() == "{}"


def test_autosave_label() -> None:
    assert autosave_label({"sha": "0123456789abcdef", "dirty": False}) == "0123456789ab"
    assert autosave_label({"sha": "0123456789abcdef", "dirty": True}) == "0123456789ab-dirty"
    assert re.fullmatch(r"\d{8}T\d{6}Z", autosave_label(None))
    assert re.fullmatch(r"\d{8}T\d{6}Z", autosave_label({"sha": "../../"}))


def test_check_writable(tmp_path: Path) -> None:
    Storage(tmp_path / "new" / "dir").check_writable()
    assert (tmp_path / "new" / "dir").is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(SavedRunError, match=r"^storage directory .*file/: not a directory$"):
        Storage(tmp_path / "file").check_writable()


def test_save_through_a_symlink_writes_its_target(storage: Storage, tmp_path: Path) -> None:
    storage.root.mkdir()
    real = tmp_path / "shared" / "main.json"
    real.parent.mkdir()
    real.write_text("{}")
    (storage.root / "main.json").symlink_to(real)
    data = sample_report()
    assert storage.save("main", data) == storage.root / "main.json"
    assert (storage.root / "main.json").is_symlink()
    assert json.loads(real.read_text()) == data.to_dict()
    assert [p.name for p in real.parent.iterdir()] == ["main.json"]


@pytest.mark.parametrize("target", ["/dev/null", "fifo"])
def test_a_save_target_that_is_not_a_regular_file_is_refused(
    storage: Storage, tmp_path: Path, target: str
) -> None:
    storage.root.mkdir()
    os.mkfifo(tmp_path / "fifo")
    link = storage.root / "main.json"
    link.symlink_to(target if target.startswith("/") else tmp_path / target)
    kind = "a character device" if target == "/dev/null" else "a fifo"
    with pytest.raises(SavedRunError, match=rf"^cannot save 'main' as .*main\.json: not a regular "
                       rf"file \(it resolves to .*, {kind}\)"):  # fmt: skip
        storage.check_writable("main")
    with pytest.raises(OSError, match="not a regular file"):
        storage.save("main", sample_report())
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)
    storage.check_writable("other")  # another name is fine


def test_saved_runs_get_the_umask_mode(storage: Storage) -> None:
    previous = os.umask(0o022)
    try:
        paths = [storage.save("main", sample_report()), storage.autosave(sample_report())]
    finally:
        os.umask(previous)
    assert [stat.S_IMODE(p.stat().st_mode) for p in paths] == [0o644, 0o644]


# -- finding ------------------------------------------------------------------------------------


def test_newest_is_the_latest_written(storage: Storage) -> None:
    old = storage.save("zzz-old", sample_report())
    new = storage.autosave(sample_report())
    set_mtime(old, 1_000)
    set_mtime(new, 2_000)
    (storage.root / ".hidden.json").write_text("{}")
    (storage.root / "notes.txt").write_text("")
    assert storage.paths() == [old, new]
    assert storage.resolve(None) == new
    assert storage.resolve("") == new
    set_mtime(old, 3_000)
    assert storage.resolve(None) == old


def test_resolve_names_numbers_and_paths(storage: Storage, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    main = storage.save("main", sample_report())
    auto = storage.autosave(sample_report({"sha": "d" * 40, "dirty": False}))
    assert storage.resolve("main") == main
    assert storage.resolve("main.json") == main
    assert storage.resolve("0001") == auto
    assert storage.resolve(str(main)) == main
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    assert storage.resolve("elsewhere.json") == Path("elsewhere.json")
    assert storage.resolve("./elsewhere.json") == Path("elsewhere.json")
    (tmp_path / "main.json").write_text("{}")
    assert storage.resolve("main.json") == Path("main.json")  # an existing file wins
    assert storage.resolve("main") == main  # a bare name is a saved run


def test_resolve_missing(storage: Storage, tmp_path: Path) -> None:
    with pytest.raises(NoSavedRun, match=r"^no saved run in .*\.rollout-tax/$"):
        storage.resolve(None)
    with pytest.raises(NoSavedRun, match=r"^no baseline 'main' in .*\.rollout-tax/$"):
        storage.resolve("main")
    with pytest.raises(NoSavedRun, match=r"^no baseline file "):
        storage.resolve(str(tmp_path / "missing.json"))
    assert not issubclass(NoSavedRun, SavedRunError)  # a warning, never a usage error


def test_resolve_ambiguous_number(storage: Storage) -> None:
    storage.root.mkdir()
    (storage.root / "0007_a.json").write_text("{}")
    (storage.root / "0007_b.json").write_text("{}")
    with pytest.raises(SavedRunError, match="ambiguous"):
        storage.resolve("0007")


# -- loading ------------------------------------------------------------------------------------


def test_load_round_trip(storage: Storage) -> None:
    data = sample_report({"sha": "e" * 40, "branch": "main", "dirty": False})
    path = storage.save("main", data)
    run = storage.load("main")
    assert run.path == path and run.report == data
    assert run.label == f"main.json ({data.created}, {'e' * 12})"


def _broken(mutate) -> dict:
    data = sample_report().to_dict()
    mutate(data)
    return data


BAD_FILES = [
    ("empty", b"", "not valid JSON: Expecting value"),
    ("truncated", b'{"schema": "rollout-tax/1", "subst', "not valid JSON"),
    ("binary", b"\x89PNG\r\n\x1a\n\x00\xff", "not a JSON file (not UTF-8 text)"),
    ("a list", b"[1, 2]", "not a rollout-tax report (a JSON list)"),
    ("pytest-benchmark", b'{"machine_info": {}, "benchmarks": []}', "no 'schema' field"),
    ("schema 3", _broken(lambda d: d.update(schema="rollout-tax/3")), "unsupported schema"),
    ("no substrates", _broken(lambda d: d.pop("substrates")), "no 'substrates'"),
    ("no projection", _broken(lambda d: d.pop("projection")), "no 'projection'"),
    ("nan", b'{"schema": "rollout-tax/1", "x": NaN}', "NaN is not a number"),
    (
        "bad stat",
        _broken(lambda d: d["substrates"]["local"]["cold_start"].update(p95="fast")),
        'substrates.local.cold_start.p95: expected a number, got "fast"',
    ),
    (
        "missing stat",
        _broken(lambda d: d["substrates"]["local"]["action"].pop("p50")),
        "no 'substrates.local.action.p50'",
    ),
    (
        "negative",
        _broken(lambda d: d["rollouts"][1].update(cold_start_s=-1.0)),
        "rollouts[1].cold_start_s: negative value",
    ),
    (
        "bad step",
        _broken(lambda d: d["rollouts"][0]["steps"]["wall_us"].__setitem__(0, None)),
        "rollouts[0].steps.wall_us: expected a number, got null",
    ),
    (
        "bad step of /1 columns",
        _broken(lambda d: d["rollouts"][0].update(steps={"kind": ["exec"], "wall_s": [-1]})),
        "rollouts[0].steps.wall_s: negative value",
    ),
    (
        "bad step of the old shape",
        _broken(lambda d: d["rollouts"][0].update(steps=[{"kind": "exec"}])),
        "rollouts[0].steps[0].wall_s: expected a number, got null",
    ),
    (
        "bad steps",
        _broken(lambda d: d["rollouts"][0].update(steps="fast")),
        "rollouts[0].steps: expected columns or a list",
    ),
    (
        "bad rollouts",
        _broken(lambda d: d.update(rollouts={"a": 1})),
        "rollouts: expected a list",
    ),
    (
        "bad price",
        _broken(lambda d: d["substrates"]["local"].update(price_per_hour="cheap")),
        'substrates.local.price_per_hour: expected a number, got "cheap"',
    ),
    (
        "bad substrate entry",
        _broken(lambda d: d["substrates"].update(local=[1])),
        "substrates.local: expected an object",
    ),
]


@pytest.mark.parametrize(
    ("content", "message"), [b[1:] for b in BAD_FILES], ids=[b[0] for b in BAD_FILES]
)
def test_load_rejects_bad_files(tmp_path: Path, content, message: str) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    with pytest.raises(SavedRunError) as info:
        load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ")
    assert message in text
    assert "\n" not in text


def test_load_unreadable(tmp_path: Path) -> None:
    with pytest.raises(SavedRunError, match=r"not a regular file \(a directory\)"):
        load(tmp_path)
    with pytest.raises(SavedRunError, match=r"cannot read: No such file"):
        load(tmp_path / "missing.json")


def test_load_accepts_a_report_without_raw_samples(tmp_path: Path) -> None:
    report = sample_report()
    data = report.to_dict()
    del data["rollouts"]
    path = tmp_path / "summary-only.json"
    path.write_text(json.dumps(data))
    assert load(path).report == dataclasses.replace(report, rollouts=[])


@pytest.mark.parametrize("steps_as", ["columns", "objects"])
def test_a_run_saved_by_schema_1_still_loads(tmp_path: Path, steps_as: str) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps(as_schema_1(sample_report(), steps_as), indent=2))
    loaded = load(path).report
    assert loaded.schema == "rollout-tax/1"
    assert list(steps_of(loaded.rollouts[0]["steps"])) == [Step("exec", 0.001, 0)]
