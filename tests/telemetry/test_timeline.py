"""A rollout's time line: phases from the create request, steps where they began."""

from __future__ import annotations

import itertools

from support.timelines import record

from pytest_rollout_tax.core.record import Step
from pytest_rollout_tax.telemetry.timeline import launch_type, spans_of


def test_the_phases_follow_one_another_from_the_create_request():
    timeline = spans_of(record())
    phases = [span for span in timeline.children if span.name.startswith("cold_start ")]
    assert [span.name for span in phases] == [
        "cold_start create", "cold_start start", "cold_start first_exec",
    ]  # fmt: skip
    assert phases[0].start_ns == timeline.root.start_ns
    assert all(a.end_ns == b.start_ns for a, b in itertools.pairwise(phases))


def test_each_step_is_an_execute_tool_span_of_its_recorded_wall_time():
    timeline = spans_of(record())
    steps = [span for span in timeline.children if span.name.startswith("execute_tool")]
    assert [span.name for span in steps] == ["execute_tool exec", "execute_tool write_file"]
    assert [round(span.duration_s, 6) for span in steps] == [0.010, 0.020]
    assert steps[0].start_ns - timeline.root.start_ns == 400_000_000
    assert steps[0].attributes["gen_ai.operation.name"] == "execute_tool"


def test_a_replayed_step_carries_its_recorded_tool_and_call_id():
    step = Step("exec", 0.01, 0, at_s=0.4, tool="str_replace_editor", call_id="call_7")
    (span,) = [s for s in spans_of(record(steps=[step])).children if "tool" in s.name]
    assert span.name == "execute_tool str_replace_editor"
    assert span.attributes["gen_ai.tool.call.id"] == "call_7"


def test_an_exec_that_raised_ends_in_error():
    (span,) = [
        s
        for s in spans_of(record(steps=[Step("exec", 5.0, None, at_s=0.4)])).children
        if "tool" in s.name
    ]
    assert span.error == "_OTHER"


def test_the_launch_type_says_how_the_sandbox_came_to_be():
    assert launch_type(record()) == "cold"
    assert launch_type(record(phases={"claim": 0.01})) == "warm"
    assert launch_type(record(snapshot=True)) == "restore"


def test_a_rollout_without_a_create_stamp_has_no_time_line():
    assert spans_of(record(epoch={})) is None
