"""docs/replay.md's format table and the readers stay in step: every format a reader names is a
row, with the fields its times come from, and each format's fixtures agree with its row."""

import re
import typing
from pathlib import Path

import pytest
from support.trajectories import FORMATS, write_layout

from pytest_rollout_tax.replay import load
from pytest_rollout_tax.replay.model import TIMES, Format

PAGE = Path(__file__).resolve().parents[2] / "docs" / "replay.md"
ROW = re.compile(r"^\| `([a-z0-9-]+)` \| (.*?) \| (.*?) \| (.*?) \|$")


def table() -> dict[str, tuple[str, str]]:
    """The format table's rows: format -> (think time, command time) as the page says them."""
    return {m.group(1): (m.group(3), m.group(4))
            for m in map(ROW.match, PAGE.read_text().splitlines()) if m}  # fmt: skip


def test_the_table_lists_every_format_the_readers_name():
    assert sorted(table()) == sorted(typing.get_args(Format)) == sorted(TIMES)


@pytest.mark.parametrize("name", typing.get_args(Format))
def test_each_row_states_the_fields_its_reader_takes_the_times_from(name):
    for said, field in zip(table()[name], TIMES[name], strict=True):
        if field == "unknown":
            assert said == "unknown", (name, said)
        else:
            assert f"`{field}`" in said, (name, said, field)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Every fixture trajectory, read."""
    directory = tmp_path_factory.mktemp("formats")
    return [t for file_name, rows in FORMATS.values()
            for t in load(write_layout(directory / file_name, rows, "jsonl"))]  # fmt: skip


@pytest.mark.parametrize("name", typing.get_args(Format))
def test_each_format_has_fixtures_whose_times_agree_with_its_row(loaded, name):
    mine = [t for t in loaded if t.format == name]
    assert mine, f"no fixture in tests/support is read as {name}"
    think, command = TIMES[name]
    steps = [step for trajectory in mine for step in trajectory.steps]
    assert any(s.think_s is not None for s in steps) == (think != "unknown")
    assert any(s.recorded_s is not None for s in steps) == (command != "unknown")
