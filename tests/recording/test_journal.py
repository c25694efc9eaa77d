"""The journals record mode writes: whole lines, readable after any crash, checked on read."""

from __future__ import annotations

import json

import pytest

from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.errors import UsageError
from pytest_rollout_tax.recording.journal import BEGIN, END, SCHEMA, Journal, read


def rollout(sandbox_id: str = "box-1", outcome: str = "passed") -> dict:
    record = Rollout(test="t[local-1]", substrate="local", round=1, sandbox_id=sandbox_id)
    record.outcome, record.cold_start_s = outcome, 0.25
    record.steps = [Step("exec", 0.01, 0, think_s=0.5, at_s=0.3)]
    return record.to_dict()


def journal(tmp_path, *events: tuple[str, dict]) -> Journal:
    written = Journal(tmp_path, "s1", {"machine": {"cpu_count": 2}, "commit": None})
    for event, record in events:
        written.write(event, record)
    written.close()
    return written


def test_a_rollout_begun_and_ended_reads_once_as_it_ended(tmp_path):
    journal(tmp_path, (BEGIN, rollout(outcome="pending")), (END, rollout()))
    recorded = read(tmp_path)
    assert [r["outcome"] for r in recorded.rollouts] == ["passed"]
    assert recorded.rollouts[0]["steps"]["think_us"] == [500_000]
    assert recorded.interrupted == recorded.unfinished == 0
    assert recorded.header["schema"] == SCHEMA and recorded.header["machine"]["cpu_count"] == 2


def test_a_rollout_never_ended_reads_as_interrupted(tmp_path):
    journal(tmp_path, (BEGIN, rollout("a", "pending")), (BEGIN, rollout("b")), (END, rollout("b")))
    recorded = read(tmp_path)
    assert sorted((r["sandbox_id"], r["outcome"]) for r in recorded.rollouts) == [
        ("a", "interrupted"),
        ("b", "passed"),
    ]
    assert recorded.interrupted == recorded.unfinished == 1


def test_a_last_line_cut_short_is_left_out_and_counted(tmp_path):
    path = journal(tmp_path, (END, rollout("a"))).path
    path.write_text(path.read_text() + '{"event":"end","rollout":{"te')
    recorded = read(tmp_path)
    assert len(recorded.rollouts) == 1
    assert recorded.cut_short == [path.name]


def test_a_recorder_that_recorded_nothing_leaves_no_file(tmp_path):
    journal(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("garbage\n", "not a record-mode journal"),
        ('{"event": "open", "schema": "rollout-tax-record/9"}\n', "schema 'rollout-tax-record/9'"),
        ("{}\nnot json\n{}\n", ":2: not a JSON line"),
        ('{}\n{"event": "start", "rollout": {}}\n', ":2: expected a begin or end line"),
        ('{}\n{"event": "end", "rollout": {"colour": 1}}\n', ":2: not a rollout record"),
        ('{}\n{"event": "end", "rollout": {"cold_start_s": "1s"}}\n', "cold_start_s='1s'"),
    ],
)
def test_a_bad_journal_is_one_line_naming_the_file(tmp_path, text, message):
    header = json.dumps({"event": "open", "schema": SCHEMA})
    (tmp_path / "s-1.jsonl").write_text(text.replace("{}", header, 1) if "{}" in text else text)
    with pytest.raises(UsageError) as raised:
        read(tmp_path)
    assert message in str(raised.value) and "s-1.jsonl" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_empty_or_missing_directory_says_so(tmp_path):
    with pytest.raises(UsageError, match="no record-mode journal"):
        read(tmp_path)
    with pytest.raises(UsageError, match="not a directory"):
        read(tmp_path / "missing")
