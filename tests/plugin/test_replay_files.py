"""Recorded trajectories as workloads, end to end through pytester: collection, ids, shape
mode on local and docker, exact mode on every substrate and transport, the per-step columns,
think time in the projection."""

import json
import shutil

import pytest
from support.trajectories import (
    FORMATS,
    MINI,
    MINI_STEPS,
    MINI_TEXT,
    MINI_TEXT_STEPS,
    OPENAI_STEPS,
    ROLLOUT_TAX_LINES,
    SWE_AGENT_STEPS,
    SWE_AGENT_TOOLS,
    SWE_AGENT_TOOLS_STEPS,
    ZERO_ACTION,
    write_all,
    write_json,
    write_jsonl,
    write_layout,
    write_mini_batch,
)
from support.workloads import ROOT

from pytest_rollout_tax.core.record import steps_of
from pytest_rollout_tax.gate import storage
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Scale, project

EXAMPLE_TRAJECTORIES = ROOT / "example_trajectories"
#: Formats whose rows make one trajectory (steps, events).
SINGLE = ("rollout-tax", "openhands-events", "openhands-clock-back", "openhands-v1-events")


def report_of(pytester) -> Report:
    return storage.load(pytester.path / "report.json").report


def rollouts_by_trajectory(report):
    """Each replayed rollout, by (trajectory id, substrate)."""
    return {
        (r["replay"]["trajectory_id"], r["substrate"]): r
        for r in report.rollouts
        if r.get("replay")
    }


def column(rollout, name):
    return [getattr(step, name) for step in steps_of(rollout["steps"])]


@pytest.fixture
def trajectories(pytester):
    """A directory of one file per format (the JSONL files are replayed by --rollout-replay)."""
    return write_all(pytester.path / "runs")


def test_trajectory_files_are_collected_where_named_with_ids(pytester, trajectories):
    result = pytester.runpytest("--collect-only", "-q", "runs/fix.traj.json", "runs/swe.traj",
                                "runs/rows.jsonl", "--rollout-rounds=2")  # fmt: skip
    ids = [line for line in result.outlines if "::" in line]
    assert ids == [
        "runs/fix.traj.json::replay[local-1]",
        "runs/fix.traj.json::replay[local-2]",
        "runs/swe.traj::replay[local-1]",
        "runs/swe.traj::replay[local-2]",
        "runs/rows.jsonl::row-a[local-1]",
        "runs/rows.jsonl::row-a[local-2]",
        "runs/rows.jsonl::row-b[local-1]",
        "runs/rows.jsonl::row-b[local-2]",
    ]
    # a folder on the command line is a test path: its trajectory files are test data
    result = pytester.runpytest("--collect-only", "-q", "runs")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_mixed_directory_collects_one_item_per_trajectory(pytester, trajectories):
    mixed = pytester.path / "mixed"
    mixed.mkdir()
    for name in ("mini", "swe-agent", "openai"):
        shutil.copy(trajectories[name], mixed)
    # alone: without test paths on the command line, only the named trajectories run
    result = pytester.runpytest("--collect-only", "-q", "--rollout-replay", "mixed")
    ids = sorted(line for line in result.outlines if "::" in line)
    assert ids == [
        "mixed/fix.traj.json::replay[local-1]",
        "mixed/rows.jsonl::row-a[local-1]",
        "mixed/rows.jsonl::row-b[local-1]",
        "mixed/swe.traj::replay[local-1]",
    ]


def test_k_and_last_failed_select_trajectories(pytester, trajectories):
    result = pytester.runpytest("--rollout-replay", "runs", "-k", "row-b", "-q")
    result.assert_outcomes(passed=1, deselected=5)
    # a trajectory whose sandbox never starts fails; --lf runs that one again
    pytester.makepyprojecttoml(
        '[tool.rollout-tax.substrates.broken]\nkind = "local"\nroot = "/nonexistent/rt"\n'
    )
    pytester.runpytest("--rollout-replay", "runs/steps.jsonl", "runs/fix.traj.json",
                       "--substrate=local,broken")  # fmt: skip
    again = pytester.runpytest("--lf", "--substrate=local,broken", "runs/fix.traj.json", "-q",
                               "--rollout-replay", "runs/steps.jsonl")  # fmt: skip
    again.assert_outcomes(errors=2, deselected=2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rollout-replay", "nowhere"], "--rollout-replay=nowhere: no such file or directory"),
        (["--rollout-replay-mode", "fast"], "--rollout-replay-mode='fast': expected shape*"),
    ],
)
def test_bad_replay_options_are_usage_errors(pytester, args, message):
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_an_unreadable_trajectory_is_a_one_line_usage_error(pytester):
    (pytester.path / "bad.traj").write_text('{"cmd": "ls"}\n{"cmd": 1}\n')
    result = pytester.runpytest("bad.traj")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f'ERROR: {pytester.path}/bad.traj:2: expected {{"cmd"*'])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def replay_run(pytester, selected, mode):
    args = ["runs", "--rollout-replay", "runs", *selected.args,
            f"--rollout-replay-mode={mode}", "--rollout-json=report.json", "--rollout-probes=1",
            "-p", "no:cacheprovider"]  # fmt: skip
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=6)
    return result, rollouts_by_trajectory(report_of(pytester))


@pytest.mark.parametrize("selected_substrate", ["local", "docker"], indirect=True)
def test_shape_mode_reproduces_every_recorded_size_and_exit_code(
    pytester, trajectories, selected_substrate
):
    result, rollouts = replay_run(pytester, selected_substrate, "shape")
    substrate = selected_substrate.name
    mini = rollouts["fix", substrate]
    assert mini["replay"] == {
        "source": str(trajectories["mini"]), "format": "mini-swe-agent", "mode": "shape",
        "trajectory_id": "fix", "recorded_steps": 3, "divergent_steps": None,
        "divergence": None, "think_time": "recorded", "clock_back_steps": 0,
    }  # fmt: skip
    assert mini["planned_steps"] == 3
    for name, values in MINI_STEPS.items():
        assert column(mini, name) == values, name
    old = rollouts["old", substrate]
    assert column(old, "output_bytes") == MINI_TEXT_STEPS["output_bytes"]
    assert column(old, "exit_code") == MINI_TEXT_STEPS["exit_code"]
    assert column(old, "think_s") == [None, None]
    swe = rollouts["swe", substrate]
    assert column(swe, "output_bytes") == SWE_AGENT_STEPS["output_bytes"]
    assert column(swe, "recorded_s") == SWE_AGENT_STEPS["recorded_s"]
    assert column(swe, "exit_code") == [0, 0]  # unknown: replayed as 0
    for row in ("row-a", "row-b"):
        steps = rollouts[row, substrate]
        assert column(steps, "kind") == ["exec"] * len(OPENAI_STEPS[row]["recorded"])
        assert column(steps, "output_bytes") == OPENAI_STEPS[row]["recorded"]
    ours = rollouts["steps", substrate]
    for name in ("think_s", "recorded_s", "exit_code", "output_bytes"):
        assert column(ours, name) == [line[name] for line in ROLLOUT_TAX_LINES]
    # per substrate: the recorded think of every step that has one (mini 3, ours 3)
    report = report_of(pytester)
    think = report.substrates[substrate].think
    assert think.n == 6
    assert think.mean == pytest.approx((2 + 4 + 0 + 2 + 4 + 0) / 6)
    assert report.projection.think_time_source == "recorded"
    assert report.projection.think_time_s == pytest.approx(2.0)
    result.stdout.fnmatch_lines(["think time: 2s per step, recorded in the replayed trajectories"])


def test_exact_mode_runs_the_commands_and_counts_divergent_steps_on_every_substrate(
    pytester, trajectories, selected_substrate
):
    """Every substrate and transport (the stand-ins) replays the same commands alike."""
    _, rollouts = replay_run(pytester, selected_substrate, "exact")
    substrate = selected_substrate.name
    mini = rollouts["fix", substrate]
    assert mini["replay"]["mode"] == "exact"
    assert mini["replay"]["divergent_steps"] == 0
    assert column(mini, "output_bytes") == MINI_STEPS["output_bytes"]  # echo hello, printf ...
    assert column(mini, "exit_code") == [0, 0, 3]
    assert column(mini, "think_s") == MINI_STEPS["think_s"]
    old = rollouts["old", substrate]
    assert old["replay"]["divergent_steps"] == 1  # seq exits 0 where the recording says 1
    assert column(old, "output_bytes") == [4, len("".join(f"{i}\n" for i in range(1, 101)))]
    swe = rollouts["swe", substrate]
    # no recorded exit codes, but SWE-agent's submit tool is not in the image
    assert swe["replay"]["divergence"] == {
        "harness_tool": 1,
        "not_found": 0,
        "exit_code": 0,
        "output_size": 0,
    }
    assert len(column(swe, "kind")) == 2
    row_a = rollouts["row-a", substrate]
    assert column(row_a, "kind") == OPENAI_STEPS["row-a"]["kind"]
    assert column(row_a, "output_bytes") == [4, None, None, None]
    assert row_a["replay"]["divergent_steps"] == 0
    assert rollouts["row-b", substrate]["replay"]["divergent_steps"] == 1  # false exits 1
    ours = rollouts["steps", substrate]
    assert (column(ours, "exit_code"), column(ours, "output_bytes")) == ([0, 2, 0], [6, 0, 2])
    assert ours["replay"]["divergent_steps"] == 0


def test_the_editor_actions_edit_the_file_in_exact_mode(pytester, trajectories):
    pytester.makeconftest(
        "import pytest\n"
        "@pytest.hookimpl(wrapper=True)\n"
        "def pytest_runtest_call(item):\n"
        "    result = yield\n"
        "    sandbox = item.funcargs['sandbox']\n"
        "    print('NOTES', repr(sandbox.read_file('notes.txt')))\n"
        "    return result\n"
    )
    result = pytester.runpytest("--rollout-replay", "runs/rows.jsonl", "-k", "row-a", "-s",
                                "--rollout-replay-mode=exact")  # fmt: skip
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*NOTES 'goodbye world\\n'"])


def test_a_step_past_the_recorded_timeout_fails_in_one_line(pytester):
    """Finding 8: the file, the step, the command's first line, where the limit came from."""
    data = json.loads(json.dumps(MINI))
    data["info"]["config"]["environment"]["timeout"] = 0.5
    data["messages"][4]["extra"]["actions"][0]["command"] = "sleep 5\necho never"
    path = write_json(pytester.path / "slow.traj.json", data)
    result = pytester.runpytest("slow.traj.json", "--rollout-replay-mode=exact",
                                "--rollout-json=report.json")  # fmt: skip
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "Traceback" not in output and "During handling" not in output
    result.stdout.fnmatch_lines([
        f"{path}: slow: step 2 `sleep 5`: ran past its 0.5 s step timeout (from the "
        "recording's info.config.environment.timeout); killed"
    ])  # fmt: skip
    [rollout] = report_of(pytester).rollouts
    assert rollout["outcome"] == "failed"
    assert "0.5 s timeout" in rollout["error"]  # the substrate's countable reason
    assert len(column(rollout, "kind")) == 2  # the step that timed out, recorded


def test_the_think_time_option_wins_over_the_recording(pytester, trajectories):
    result = pytester.runpytest("runs/fix.traj.json", "--rollout-think-time=1",
                                "--rollout-json=report.json")  # fmt: skip
    result.assert_outcomes(passed=1)
    report = report_of(pytester)
    assert report.projection.think_time_source == "option"
    assert report.projection.think_time_s == 1.0
    assert report.substrates["local"].think.n == 3  # still recorded


def test_the_example_trajectory_replays_with_its_recorded_think_time(pytester):
    shutil.copytree(EXAMPLE_TRAJECTORIES, pytester.path / "example_trajectories")
    result = pytester.runpytest("--rollout-replay", "example_trajectories",
                                "--rollout-json=report.json")  # fmt: skip
    result.assert_outcomes(passed=1)
    report = report_of(pytester)
    [rollout] = report.rollouts
    assert rollout["replay"]["recorded_steps"] == len(column(rollout, "kind")) == 35
    assert report.projection.think_time_source == "recorded"
    assert report.projection.think_time_s == pytest.approx(3.189, abs=1e-3)
    result.stdout.fnmatch_lines(
        ["think time: 3.19s per step, recorded in the replayed trajectories"]
    )
    # the worker-hours decomposition's think term is the recorded think time
    local = report.substrates["local"]
    think_hours = 1_000_000 * 35 * local.think.mean / 3600  # at its own length
    assert local.projected.decomposition.think == pytest.approx(think_hours)
    parts = local.projected.decomposition.to_dict()
    assert sum(parts.values()) == pytest.approx(local.worker_hours)


def projected_hours(report: Report, steps: int) -> float:
    """Local's worker-hours from its means at 1,000,000 rollouts of ``steps`` steps, at the
    recorded think time."""
    scale = Scale(steps=steps, think_time_source="none")
    return project(report.substrates["local"].means(), scale).worker_hours


def test_replays_are_projected_at_their_mean_recorded_length(pytester, trajectories):
    shutil.copytree(EXAMPLE_TRAJECTORIES, pytester.path / "example_trajectories")
    paths = ("runs/fix.traj.json", "example_trajectories/fix-rounding.traj.json")  # 3, 35 steps
    result = pytester.runpytest(*paths, "--rollout-json=report.json")
    result.assert_outcomes(passed=2)
    report = report_of(pytester)
    assert report.projection.steps == 19 and report.projection.steps_source == "replays"
    result.stdout.fnmatch_lines(["projected: 1,000,000 rollouts x 19 steps, the replays' mean;*"])
    local = report.substrates["local"]
    assert local.worker_hours == pytest.approx(projected_hours(report, 19))
    assert local.worker_hours != pytest.approx(projected_hours(report, 150))
    # --rollout-project still decides
    result = pytester.runpytest(*paths, "--rollout-json=report.json", "--rollout-project=1000x7")
    report = report_of(pytester)
    assert (report.projection.steps, report.projection.steps_source) == (7, "option")
    result.stdout.fnmatch_lines(["projected: 1,000 rollouts x 7 steps; tax = *"])
    hours = projected_hours(report, 7) / 1000  # the means' hours at 1,000,000 rollouts
    assert report.substrates["local"].worker_hours == pytest.approx(hours)


def test_replays_mixed_with_workloads_keep_the_default_length_and_say_why(pytester, trajectories):
    pytester.makepyfile(test_workload="def test_one_step(sandbox):\n    sandbox.exec('true')\n")
    result = pytester.runpytest("runs/fix.traj.json", "test_workload.py", "--rollout-json=r.json")
    result.assert_outcomes(passed=2)
    report = storage.load(pytester.path / "r.json").report
    assert (report.projection.steps, report.projection.steps_source) == (150, "mixed")
    result.stdout.fnmatch_lines(
        ["projected: 1,000,000 rollouts x 150 steps, the default (not every rollout is a*"]
    )


def test_without_recorded_think_time_the_source_is_none(pytester, trajectories):
    pytester.runpytest("runs/swe.traj", "--rollout-json=report.json").assert_outcomes(passed=1)
    report = report_of(pytester)
    assert report.projection.think_time_source == "none"
    assert report.projection.think_time_s == 0
    assert report.substrates["local"].think is None


def test_the_ini_twin_adds_trajectories_to_the_test_paths(pytester, trajectories):
    pytester.makeini("[pytest]\ntestpaths = tests\nrollout_replay =\n    runs/steps.jsonl\n")
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_one.py").write_text(
        "def test_one(sandbox):\n    sandbox.exec('true')\n"
    )
    result = pytester.runpytest("--collect-only", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert ids == ["tests/test_one.py::test_one[local-1]", "runs/steps.jsonl::replay[local-1]"]


def test_replays_run_under_xdist(pytester, trajectories):
    result = pytester.runpytest("-p", "xdist", "-n", "2", "--rollout-replay", "runs",
                                "--rollout-json=report.json")  # fmt: skip
    result.assert_outcomes(passed=6)
    rollouts = rollouts_by_trajectory(report_of(pytester))
    assert sorted(trajectory for trajectory, _ in rollouts) == [
        "fix", "old", "row-a", "row-b", "steps", "swe",
    ]  # fmt: skip
    assert column(rollouts["fix", "local"], "think_s") == MINI_STEPS["think_s"]


def test_a_rollout_whose_sandbox_never_started_still_names_its_trajectory(pytester, trajectories):
    pytester.makepyprojecttoml(
        '[tool.rollout-tax.substrates.broken]\nkind = "local"\nroot = "/nonexistent/rt"\n'
    )
    result = pytester.runpytest("runs/fix.traj.json", "--substrate=broken",
                                "--rollout-json=report.json")  # fmt: skip
    result.assert_outcomes(errors=1)
    [rollout] = report_of(pytester).rollouts
    assert rollout["outcome"] == "infra_failed"
    assert rollout["replay"]["trajectory_id"] == "fix"
    assert rollout["replay"]["recorded_steps"] == 3


def test_exact_mode_runs_commands_in_bash_as_the_harnesses_did(pytester):
    write_jsonl(pytester.path / "bashisms.jsonl", [
        {"cmd": "[[ -n $BASH_VERSION ]] && echo bash", "exit_code": 0, "output_bytes": 5},
    ])  # fmt: skip
    result = pytester.runpytest("--rollout-replay", "bashisms.jsonl", "--rollout-json=report.json",
                                "--rollout-replay-mode=exact")  # fmt: skip
    result.assert_outcomes(passed=1)
    [rollout] = report_of(pytester).rollouts
    assert (column(rollout, "exit_code"), column(rollout, "output_bytes")) == ([0], [5])
    assert rollout["replay"]["divergent_steps"] == 0


def test_plain_pytest_in_a_project_with_trajectory_test_data_runs_as_without_the_plugin(pytester):
    """Acceptance; finding 2: test data named like trajectories is not collected."""
    data = pytester.path / "tests" / "data"
    write_layout(data / "local.traj.json", MINI_TEXT["messages"], "indented")  # bare messages
    write_json(data / "demo.traj", {"history": [], "replay_config": "{}"})
    (data / "empty.traj.json").write_text("")
    pytester.makepyfile(**{"tests/test_reader.py": (
        "import pathlib\n"
        "def test_data():\n"
        "    assert len(list((pathlib.Path(__file__).parent / 'data').iterdir())) == 3\n"
    )})  # fmt: skip
    for args in ((), ("tests",), ("-p", "no:rollout_tax")):
        result = pytester.runpytest_subprocess(*args)  # the installed plugin, as a user has it
        result.assert_outcomes(passed=1)
        assert result.ret == pytest.ExitCode.OK
    # the plugin was active: its options are checked
    active = pytester.runpytest_subprocess("--rollout-replay-mode=fast")
    assert active.ret == pytest.ExitCode.USAGE_ERROR


def test_a_named_file_that_is_no_trajectory_is_a_usage_error(pytester):
    write_layout(pytester.path / "local.traj.json", MINI_TEXT["messages"], "indented")
    for args in (["local.traj.json"], ["--rollout-replay", "local.traj.json"]):
        result = pytester.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [f"ERROR: {pytester.path}/local.traj.json: [[]0]: a chat message, not a trajectory*"]
        )


def test_a_mini_swe_agent_batch_folder_replays_one_rollout_per_trajectory(pytester):
    """Acceptance; finding 3: preds.json, the log and the statuses are skipped, counted once;
    finding 11: the run without an action starts no sandbox and has one note."""
    write_mini_batch(pytester.path / "output" / "run")
    result = pytester.runpytest("--rollout-replay", "output/run", "--rollout-json=report.json",
                                "-rs")  # fmt: skip
    result.assert_outcomes(passed=2, skipped=1)
    rollouts = report_of(pytester).rollouts
    assert sorted(r["replay"]["trajectory_id"] for r in rollouts) == ["calc-1", "calc-2"]
    assert report_of(pytester).substrates["local"].rollouts == 2  # no cold start for calc-3
    result.stdout.fnmatch_lines([
        "rollout-tax: skipped 3 file(s) in --rollout-replay folders that are not trajectories: "
        "output/run/exit_statuses_1700000000.yaml, output/run/minisweagent.log, "
        "output/run/preds.json",
        "rollout-tax: note: 1 trajectory(ies) recorded no action (the run ended before its "
        "first): not replayed, no cold start counted",
    ])  # fmt: skip
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *: no action recorded*"])


def test_compact_and_indented_copies_give_identical_reports(pytester):
    """Acceptance; finding 1: every format, compact and indented, replays alike."""
    for layout in ("compact", "indented"):
        for file_name, rows in FORMATS.values():
            write_layout(pytester.path / layout / file_name, rows, layout)
    result = pytester.runpytest("--rollout-replay", "compact", "--rollout-replay", "indented",
                                "--rollout-json=report.json", "--rollout-replay-mode=exact",
                                "-p", "no:cacheprovider")  # fmt: skip
    count = sum(len(rows) if name not in SINGLE else 1 for name, (_, rows) in FORMATS.items())
    result.assert_outcomes(passed=2 * count)
    seen = {}
    for rollout in report_of(pytester).rollouts:
        replay = dict(rollout["replay"])
        layout = replay.pop("source").split("/")[-2]
        steps = {
            name: column(rollout, name)
            for name in ("kind", "exit_code", "output_bytes", "think_s", "recorded_s")
        }
        seen.setdefault(layout, {})[replay["trajectory_id"]] = (replay, steps)  # fmt: skip
    assert seen["compact"] == seen["indented"]
    assert len(seen["compact"]) == count


def test_the_glob_collects_trajectories_and_skips_other_matches(pytester):
    write_mini_batch(pytester.path / "runs")
    pytester.makeini("[pytest]\nrollout_replay_glob =\n    runs/*.json\n")
    result = pytester.runpytest("--collect-only", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert ids == [
        "runs/calc-1/calc-1.traj.json::replay[local-1]",
        "runs/calc-2/calc-2.traj.json::replay[local-1]",
        "runs/calc-3/calc-3.traj.json::replay",
    ]
    result.stdout.fnmatch_lines(["rollout-tax: skipped 1 file(s) *: runs/preds.json"])


def test_exact_mode_counts_swe_agent_tool_steps_as_divergent_and_names_the_bundles(pytester):
    """Finding 7: SWE-agent's tools exit 127 in a plain image: divergent, counted by kind."""
    write_json(pytester.path / "tools.traj", SWE_AGENT_TOOLS)
    result = pytester.runpytest("tools.traj", "--rollout-replay-mode=exact",
                                "--rollout-json=report.json")  # fmt: skip
    result.assert_outcomes(passed=1)
    [rollout] = report_of(pytester).rollouts
    kinds = SWE_AGENT_TOOLS_STEPS["divergence"]
    assert rollout["replay"]["divergence"] == kinds
    # each divergent step here diverged in its exit code; one also in its output's size
    assert rollout["replay"]["divergent_steps"] == sum(kinds.values()) - kinds["output_size"]
    exit_codes = column(rollout, "exit_code")
    assert [exit_codes[i] for i in (0, 2, 3, 4, 5)] == [127, 127, 0, 127, 127]
    assert exit_codes[1] != 0  # 127, or Debian's open (openvt) where it is installed
    result.stdout.fnmatch_lines([
        "rollout-tax: note: 1 trajectory(ies) record no think time (swe-agent 1): unknown, "
        "not 0; the recorded think time comes from the others (or give --rollout-think-time)",
        "rollout-tax: note: 4 step(s) call SWE-agent tools (edit 1, find_file 1, open 1, "
        "submit 1): they run only in an image with SWE-agent's tool bundles tools/search, "
        "tools/submit, tools/windowed, tools/windowed_edit_linting; elsewhere they fail "
        "(127: not found) and count as harness_tool divergences",
    ])  # fmt: skip
    assert rollout["replay"]["think_time"] == "unknown"


def test_shape_mode_records_no_divergences_and_knows_think_time(pytester, trajectories):
    result = pytester.runpytest("runs/fix.traj.json", "--rollout-json=report.json")
    result.assert_outcomes(passed=1)
    [rollout] = report_of(pytester).rollouts
    assert rollout["replay"]["divergence"] is None
    assert rollout["replay"]["think_time"] == "recorded"
    assert "record no think time" not in result.stdout.str()


def test_the_notes_reach_the_summary_under_xdist(pytester):
    write_mini_batch(pytester.path / "runs")
    write_json(pytester.path / "runs" / "zero.traj.json", ZERO_ACTION)
    result = pytester.runpytest("-p", "xdist", "-n", "2", "--rollout-replay", "runs")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines([
        "rollout-tax: skipped 3 file(s) *",
        "rollout-tax: note: 2 trajectory(ies) recorded no action*",
    ])  # fmt: skip


def test_a_replay_alone_loads_no_conftest_under_testpaths(pytester):
    """Decision finding 6: ``--rollout-replay`` with no test paths is only a replay."""
    shutil.copytree(EXAMPLE_TRAJECTORIES, pytester.path / "example_trajectories")
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "conftest.py").write_text("import a_module_nobody_installed\n")
    (pytester.path / "tests" / "test_other.py").write_text("def test_other():\n    pass\n")
    result = pytester.runpytest_subprocess("--rollout-replay", "example_trajectories")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    assert "a_module_nobody_installed" not in result.stdout.str() + result.stderr.str()
    # with test paths given, the replay joins them, as before
    given = pytester.runpytest_subprocess("--rollout-replay", "example_trajectories", "tests")
    assert "a_module_nobody_installed" in given.stdout.str() + given.stderr.str()
