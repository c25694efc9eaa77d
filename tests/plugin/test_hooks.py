"""The pytest surface, end to end through pytester: options, marker, fixtures, summary, JSON."""

import json
import os
import stat
from pathlib import Path

import pytest
from support.workloads import readme_workload

VARIANTS = """
[tool.rollout-tax.substrates.local-b]
kind = "local"

[tool.rollout-tax.substrates.local-broken]
kind = "local"
root = "/nonexistent/rollout-tax"
"""

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=150, rounds=2)
def test_loop(sandbox):
    for i in range(3):
        assert sandbox.exec(f"echo {i}").stdout == f"{i}\\n"
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyprojecttoml(VARIANTS)
    pytester.makepyfile(test_workload=WORKLOAD)
    return pytester


def report_of(pytester, name="report.json"):
    return json.loads((pytester.path / name).read_text())


def test_options_live_in_one_group_with_ini_twins(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["rollout tax (latency of execution substrates):"])
    text = result.stdout.str()
    for flag in (
        "--substrate=NAME[,NAME...]", "--substrate-opt=NAME.KEY=VALUE", "--rollout-rounds=N",
        "--rollout-probes=N", "--rollout-project=NxS", "--rollout-think-time=SECONDS",
        "--rollout-json=PATH", "--rollout-save=NAME", "--rollout-autosave",
        "--rollout-storage=DIR", "--rollout-compare=[NAME|PATH]",
        "--rollout-compare-fail=METRIC.STAT:THRESHOLD", "--rollout-reap",
    ):  # fmt: skip
        assert flag in text
    for ini in ("rollout_substrates", "rollout_substrate_opts", "rollout_project", "rollout_json"):
        result.stdout.fnmatch_lines([f"  {ini} (*"])


def test_marker_is_registered_for_strict_markers(suite):
    suite.runpytest("--strict-markers", "--markers").stdout.fnmatch_lines(
        ["@pytest.mark.trajectory(steps=None, rounds=1, timeout=None, substrates=None, prepare=*"]
    )


def test_rollouts_are_parametrized_over_substrates_and_rounds(suite):
    result = suite.runpytest("--collect-only", "-q", "--substrate=local,local-b")
    result.stdout.fnmatch_lines(
        [
            "test_workload.py::test_loop[[]local-1[]]",
            "test_workload.py::test_loop[[]local-2[]]",
            "test_workload.py::test_loop[[]local-b-1[]]",
            "test_workload.py::test_loop[[]local-b-2[]]",
        ]
    )


def test_marker_substrates_limit_where_a_workload_runs(pytester):
    pytester.makepyprojecttoml(VARIANTS)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.trajectory(substrates=["local-b"])
        def test_only_b(sandbox, substrate):
            assert substrate.name == "local-b"
        """
    )
    result = pytester.runpytest("--substrate", "local", "--substrate", "local-b", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_only_b[[]local-b-1[]] PASSED*"])


def test_command_line_rounds_override_markers_and_ini_rounds_are_a_default(pytester):
    pytester.makeini("[pytest]\nrollout_rounds = 3\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.trajectory(rounds=2)
        def test_marked(sandbox):
            pass

        def test_unmarked(sandbox):
            pass
        """
    )
    pytester.runpytest().assert_outcomes(passed=5)
    pytester.runpytest("--rollout-rounds=4").assert_outcomes(passed=8)


def test_summary_and_json_report(suite):
    result = suite.runpytest(
        "--substrate=local,local-b", "--rollout-json=report.json", "--rollout-probes=3"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*= rollout tax =*",
            "cheapest here: local*",
            "projected: 1,000,000 rollouts x 150 steps*",
            "substrate*rollouts*cold start*action*worker*tax",
            "local* 2 *",
            "spread: cold start p50 *x (*); worker-hours *x*",
            "report written to *report.json",
        ]
    )
    rows = [line.split()[:2] for line in result.outlines if line.startswith("local")]
    assert sorted(name for name, count in rows if count == "2") == ["local", "local-b"]
    report = report_of(suite)
    assert report["schema"] == "rollout-tax/2"
    assert set(report["substrates"]) == {"local", "local-b"}
    local = report["substrates"]["local"]
    assert (local["rollouts"], local["failures"], local["action"]["n"]) == (2, 0, 6)
    assert len(report["rollouts"]) == 4
    one = report["rollouts"][0]
    assert one["outcome"] == "passed" and one["round"] in (1, 2)
    assert one["steps"]["exit_code"] == [0, 0, 0]
    assert one["steps"]["kinds"] == ["exec"] and one["steps"]["kind"] == [0, 0, 0]
    assert len(one["steps"]["wall_us"]) == 3
    assert set(one["phases"]) == {"create", "first_exec"}


def test_projection_options_and_their_ini_twins(suite):
    suite.makeini("[pytest]\nrollout_project = 1000x10\nrollout_think_time = 2\n")
    suite.runpytest("--rollout-json=report.json").assert_outcomes(passed=2)
    assert report_of(suite)["projection"] == {
        "rollouts": 1000, "steps": 10, "think_time_s": 2.0, "think_time_source": "option",
        "fleet": None, "rank_by": "worker_hours", "steps_source": "option",
    }  # fmt: skip
    suite.runpytest("--rollout-json=report.json", "--rollout-project=5000")
    assert report_of(suite)["projection"]["steps"] == 150  # from the marker


def test_a_sandbox_that_fails_to_start_is_recorded_and_the_summary_still_prints(suite):
    result = suite.runpytest("--substrate=local,local-broken", "--rollout-json=report.json")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "local-broken: cannot make a workdir in /nonexistent/rollout-tax: No such file*",
            "*= rollout tax =*",
            "local-broken: 100% infra_failed (2 of 2: 2 start; not the workload's failures)",
        ]
    )
    assert "warning: every rollout failed on local-broken: nothing measured" in result.outlines
    assert "Traceback" not in result.stdout.str()
    broken = report_of(suite)["substrates"]["local-broken"]
    assert (broken["rollouts"], broken["failures"], broken["infra_failed"]["rollouts"]) == (2, 0, 2)
    assert list(broken["infra_failed"]["reasons"].values()) == [2]
    assert report_of(suite)["spread"] is None


def test_failing_workloads_and_step_timeouts_are_counted_with_reasons(pytester):
    pytester.makepyfile(
        """
        import pytest

        def test_wrong(sandbox):
            assert sandbox.exec("echo 1").stdout == "2"

        @pytest.mark.trajectory(timeout=0.2)
        def test_slow(sandbox):
            sandbox.exec("sleep 10")

        def test_fine(sandbox, rollout):
            sandbox.exec("true")
            assert len(rollout.steps) == 1 and rollout.cold_start_s > 0
        """
    )
    result = pytester.runpytest("--rollout-json=report.json")
    result.assert_outcomes(passed=1, failed=2)
    local = report_of(pytester)["substrates"]["local"]
    assert local["failures"] == 2
    assert local["failure_reasons"]["test failed: AssertionError"] == 1
    assert any(reason.startswith("StepTimeout: ") for reason in local["failure_reasons"])
    outcomes = {r["test"].split("::")[1]: r["outcome"] for r in report_of(pytester)["rollouts"]}
    assert outcomes == {
        "test_wrong[local-1]": "failed",
        "test_slow[local-1]": "failed",
        "test_fine[local-1]": "passed",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--substrate=nope"], "ERROR: unknown substrate 'nope'; available substrates: *local*"),
        (["--rollout-project=lots"], "ERROR: --rollout-project='lots': expected ROLLOUTSxSTEPS*"),
        (["--substrate-opt=local"], "ERROR: substrate option 'local': expected NAME.KEY=VALUE*"),
        (["--substrate-opt=local.nope=1"], "ERROR: local.nope: unknown option*"),
        (["--rollout-rounds=0"], "ERROR: --rollout-rounds='0': must be at least 1"),
        (["--rollout-think-time=soon"], "ERROR: --rollout-think-time='soon': expected seconds*"),
        (["--rollout-think-time=nan"], "ERROR: --rollout-think-time='nan': expected seconds*"),
        (["--rollout-json=."], "ERROR: --rollout-json=.: is a directory; name a file"),
    ],
)
def test_bad_options_are_usage_errors_that_name_the_value(suite, args, message):
    result = suite.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_device_as_json_path_is_a_usage_error_before_anything_runs(pytester):
    """No test file: even the old code, which replaced the device, would write nothing here."""
    result = pytester.runpytest("--rollout-json=/dev/full")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.startswith("ERROR:")] == [
        "ERROR: --rollout-json=/dev/full: not a regular file (a character device); "
        "name a regular file or a new one"
    ]
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_fifo_or_a_link_to_a_device_as_json_path_is_a_usage_error(suite):
    os.mkfifo(suite.path / "fifo")
    (suite.path / "null.json").symlink_to("/dev/null")
    for name, kind in (("fifo", "(a fifo)"), ("null.json", "/dev/null, a character device)")):
        result = suite.runpytest(f"--rollout-json={name}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: --rollout-json={name}: not a regular file *{kind}*"])
        assert "passed" not in result.stdout.str()
    assert stat.S_ISFIFO(os.lstat(suite.path / "fifo").st_mode)
    assert os.readlink(suite.path / "null.json") == "/dev/null"


def test_the_json_report_goes_through_a_symlink_with_the_umask_mode(suite):
    (suite.path / "reports").mkdir()
    (suite.path / "latest.json").symlink_to("reports/run-1.json")
    previous = os.umask(0o022)
    try:
        result = suite.runpytest("--rollout-json=latest.json")
    finally:
        os.umask(previous)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["report written to latest.json"])
    assert os.readlink(suite.path / "latest.json") == "reports/run-1.json"
    written = suite.path / "reports" / "run-1.json"
    assert report_of(suite, "reports/run-1.json")["schema"] == "rollout-tax/2"
    assert stat.S_IMODE(written.stat().st_mode) == 0o644


def assert_usage_error(result, *messages):
    """Exit 4, exactly ``messages`` as ``ERROR:`` lines, no traceback, nothing run."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.errlines if line.startswith("ERROR: ")]
    assert errors == [f"ERROR: {message}" for message in messages]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "passed" not in result.stdout.str()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("rounds=0", "@pytest.mark.trajectory(rounds=0) in test_m.py::test_x: expected an integer "
         "from 1 to 10,000"),
        ("steps='many'", "@pytest.mark.trajectory(steps='many') in test_m.py::test_x: expected an "
         "integer from 1 to 1,000,000"),
        ("wait=1", "@pytest.mark.trajectory in test_m.py::test_x: unknown argument(s) wait"),
        ("5", "@pytest.mark.trajectory in test_m.py::test_x: takes keyword arguments only, "
         "got (5,)"),
        ("substrates=3", "@pytest.mark.trajectory(substrates=3) in test_m.py::test_x: expected a "
         "list of names"),
        ("substrates=[]", "@pytest.mark.trajectory(substrates=[]) in test_m.py::test_x: expected "
         "at least one substrate name"),
    ],
)  # fmt: skip
def test_malformed_marker_arguments_are_usage_errors_naming_the_test(pytester, marker, message):
    pytester.makepyfile(
        test_m=f"""
        import pytest

        @pytest.mark.trajectory({marker})
        def test_x(sandbox):
            pass
        """
    )
    assert_usage_error(pytester.runpytest(), message)


@pytest.mark.parametrize(
    "timeout", ["float('nan')", "float('inf')", "0", "-1", "True", "'10'", "10**400"]
)
def test_a_marker_timeout_must_be_positive_finite_seconds(pytester, timeout):
    pytester.makepyfile(
        test_m=f"""
        import pytest

        @pytest.mark.trajectory(timeout={timeout})
        def test_x(sandbox):
            pass
        """
    )
    shown = {"float('nan')": "nan", "float('inf')": "inf", "10**400": str(10**400)}
    assert_usage_error(
        pytester.runpytest(),
        f"@pytest.mark.trajectory(timeout={shown.get(timeout, timeout)}) in test_m.py::test_x: "
        "expected a positive finite number of seconds",
    )


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_an_unknown_substrate_in_the_marker_is_a_usage_error(suite, workers):
    suite.makepyfile(
        test_typo="""
        import pytest

        @pytest.mark.trajectory(substrates=["dokcer"])
        def test_a(sandbox):
            pass

        class TestB:
            @pytest.mark.trajectory(substrates="local,locl-b", timeout=float("nan"))
            def test_b(self, sandbox):
                pass
        """
    )
    known = (
        "bwrap, bwrap-reset, bwrap-session, coreweave, daytona, docker, docker-gvisor, "
        "docker-pool, docker-reset, docker-session, docker-snap, e2b, ec2, ec2-session, k8s, "
        "k8s-claim, k8s-session, kubernetes, local, local-b, local-broken, modal, prime, runloop"
    )
    assert_usage_error(
        suite.runpytest(*workers, "--substrate=local,local-b"),
        "@pytest.mark.trajectory(substrates=['dokcer']) in test_typo.py::test_a: unknown "
        f"substrate 'dokcer' (did you mean 'docker'?); known substrates: {known}",
        "@pytest.mark.trajectory(timeout=nan) in test_typo.py::TestB::test_b: expected a "
        "positive finite number of seconds",
    )


def test_a_known_substrate_that_is_not_selected_just_does_not_run(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.trajectory(substrates=["docker"])
        def test_docker_only(sandbox):
            pass

        def test_anywhere(sandbox):
            pass
        """
    )
    result = pytester.runpytest("--substrate=local", "-rs")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=1)
    assert (
        ".py:3: @pytest.mark.trajectory(substrates=['docker']) matches none of the selected "
        "substrates (local)\n" in result.stdout.str()
    )
    assert "empty parameter set" not in result.stdout.str()


def test_aliases_of_one_substrate_run_once_under_the_first_name(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.trajectory(substrates=["kubernetes"])
        def test_named_by_its_alias(sandbox):
            pass

        def test_anywhere(sandbox):
            pass
        """
    )
    result = pytester.runpytest("--collect-only", "-q", "--substrate=k8s,local,kubernetes")
    assert result.ret == pytest.ExitCode.OK
    collected = [line for line in result.outlines if "::" in line]
    assert collected == [
        "test_aliases_of_one_substrate_run_once_under_the_first_name.py::"
        "test_named_by_its_alias[k8s-1]",
        "test_aliases_of_one_substrate_run_once_under_the_first_name.py::test_anywhere[k8s-1]",
        "test_aliases_of_one_substrate_run_once_under_the_first_name.py::test_anywhere[local-1]",
    ]
    again = pytester.runpytest("--collect-only", "-q", "--substrate=kubernetes,k8s")
    ids = [line.rsplit("[", 1)[1] for line in again.outlines if "::" in line]
    assert ids == ["kubernetes-1]", "kubernetes-1]"]


ALIAS_PLUGIN = """
from pytest_rollout_tax import hookimpl

@hookimpl
def rollout_tax_substrates():
    return {"here": "pytest_rollout_tax.substrates.local:LocalSubstrate"}  # the entry of local
"""


def install_plugin(pytester, monkeypatch, module: str, source: str, entry: str) -> None:
    """Install ``source`` as module ``module``, a plugin of entry point group rollout_tax."""
    pytester.makepyfile(**{module: source})
    dist = pytester.mkdir(f"{module}-1.0.dist-info")
    name = module.replace("_", "-")
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[rollout_tax]\n{entry} = {module}\n")
    monkeypatch.syspath_prepend(str(pytester.path))


def test_an_alias_gives_one_row_in_the_summary_and_report(pytester, monkeypatch):
    install_plugin(pytester, monkeypatch, "alias_substrate", ALIAS_PLUGIN, "here")
    pytester.makepyfile(
        test_w="""
        import pytest

        @pytest.mark.trajectory(substrates=["local"])
        def test_w(sandbox, substrate):
            assert substrate.name == "here"
        """
    )
    result = pytester.runpytest("--substrate=here,local", "--rollout-json=report.json")
    result.assert_outcomes(passed=1)
    assert list(report_of(pytester)["substrates"]) == ["here"]
    result.stdout.fnmatch_lines(["here *1 *"])
    assert not [line for line in result.outlines if line.startswith("local ")]


def test_secrets_passed_to_steps_stay_out_of_output_and_report(pytester):
    pytester.makepyfile(
        """
        def test_uses_a_key(sandbox):
            result = sandbox.exec("test -n \\"$API_KEY\\"", env={"API_KEY": "s3cr3t-value"})
            assert result.ok
        """
    )
    result = pytester.runpytest("--rollout-json=report.json")
    result.assert_outcomes(passed=1)
    assert "s3cr3t-value" not in result.stdout.str()
    assert "s3cr3t-value" not in (pytester.path / "report.json").read_text()


def test_the_plugin_can_be_disabled(suite):
    result = suite.runpytest("-p", "no:rollout_tax")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'sandbox' not found*"])


def test_reap_reports_per_substrate_and_exits(suite):
    result = suite.runpytest("--rollout-reap", "--substrate=local")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["rollout-tax: local: removed 0 leftover sandbox(es)"])
    assert "passed" not in result.stdout.str()


def test_sessions_without_workloads_print_no_summary(pytester):
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "rollout tax" not in result.stdout.str()


def rollout_keys(report):
    return sorted(
        (r["test"], r["substrate"], r["round"], r["outcome"], len(r["steps"]["wall_us"]))
        for r in report["rollouts"]
    )


def test_xdist_workers_hand_their_rollouts_to_the_controller(suite):
    serial = suite.runpytest("--substrate=local,local-b", "--rollout-json=serial.json")
    serial.assert_outcomes(passed=4)
    parallel = suite.runpytest(
        "-p", "xdist", "-n", "2", "--substrate=local,local-b", "--rollout-json=parallel.json"
    )
    parallel.assert_outcomes(passed=4)
    assert parallel.stdout.str().count("= rollout tax =") == 1
    serial_report, parallel_report = (
        report_of(suite, "serial.json"),
        report_of(suite, "parallel.json"),
    )
    assert rollout_keys(parallel_report) == rollout_keys(serial_report)
    for name in ("local", "local-b"):
        assert parallel_report["substrates"][name]["rollouts"] == 2


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_the_readme_workload_passes(pytester, workers):
    pytester.makepyfile(test_readme=readme_workload())
    result = pytester.runpytest(*workers, "--rollout-json=report.json")
    result.assert_outcomes(passed=3)
    rollouts = report_of(pytester)["rollouts"]
    assert len(rollouts) == 3
    assert sorted(len(r["steps"]["wall_us"]) for r in rollouts) == [1, 150, 150]


def test_an_interrupted_session_still_tears_down_records_and_summarizes(pytester):
    pytester.makepyfile(
        """
        import pathlib

        def test_first(sandbox):
            pathlib.Path("workdir.txt").write_text(sandbox.workdir)

        def test_second(sandbox):
            raise KeyboardInterrupt

        def test_never_runs(sandbox):
            pass
        """
    )
    result = pytester.runpytest_subprocess("--rollout-json=report.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    # 2 rollouts, none failed (a failure would show as "2 (1)")
    result.stdout.fnmatch_lines(["*= rollout tax =*", "local *2 *", "*KeyboardInterrupt*"])
    outcomes = [(r["test"].split("::")[1], r["outcome"]) for r in report_of(pytester)["rollouts"]]
    assert outcomes == [("test_first[local-1]", "passed"), ("test_second[local-1]", "interrupted")]
    assert all(r["teardown_s"] is not None for r in report_of(pytester)["rollouts"])
    assert not Path((pytester.path / "workdir.txt").read_text()).exists()


FLAKY_SUBSTRATE = """
from pytest_rollout_tax.errors import SandboxError, SubstrateUnavailable
from pytest_rollout_tax import hookimpl
from pytest_rollout_tax.substrates.local import LocalExec, LocalSubstrate

class FlakyExec(LocalExec):
    runs = 0

    def run(self, argv, **kwargs):
        FlakyExec.runs += 1
        if FlakyExec.runs == 2:  # the first probe, right after the cold start
            raise SandboxError("flaky: the sandbox went away")
        return super().run(argv, **kwargs)

class FlakySubstrate(LocalSubstrate):
    kind = "flaky"

    def _transport(self, handle):
        return FlakyExec(handle, substrate=self.name)

class BrokenSubstrate(LocalSubstrate):
    kind = "broken"

    def __init__(self, *args, **kwargs):
        raise SubstrateUnavailable("broken: the daemon is unreachable")

@hookimpl
def rollout_tax_substrates():
    return {"flaky": FlakySubstrate, "broken": BrokenSubstrate}
"""


@pytest.fixture
def plugged(pytester, monkeypatch):
    """pytester with the substrates of FLAKY_SUBSTRATE installed through the entry point."""
    install_plugin(pytester, monkeypatch, "flaky_substrate", FLAKY_SUBSTRATE, "flaky")
    return pytester


def test_a_sandbox_lost_during_its_probes_fails_in_one_line_and_is_deleted(plugged):
    pytester = plugged
    pytester.makepyfile(test_w="def test_w(sandbox):\n    pass\n")
    result = pytester.runpytest("--substrate=flaky", "--rollout-json=report.json")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["flaky: the sandbox went away", "*= rollout tax =*"])
    assert "Traceback" not in result.stdout.str()
    (rollout,) = report_of(pytester)["rollouts"]
    assert rollout["error"] == "SandboxError: flaky: the sandbox went away"
    assert rollout["outcome"] == "infra_failed" and rollout["teardown_s"] is not None
    assert rollout["infra_cause"] == "start"  # the infrastructure's, not the workload's


def test_an_unavailable_substrate_is_recorded_whichever_fixture_comes_first(plugged):
    plugged.makepyfile(
        test_w="""
        def test_substrate_first(substrate, sandbox):
            pass

        def test_sandbox_first(sandbox, substrate):
            pass
        """
    )
    result = plugged.runpytest("--substrate=broken", "--rollout-json=report.json")
    result.assert_outcomes(errors=2)
    assert "Traceback" not in result.stdout.str()
    broken = report_of(plugged)["substrates"]["broken"]
    assert (broken["rollouts"], broken["failures"]) == (2, 0)
    assert broken["infra_failed"]["reasons"] == {
        "SubstrateUnavailable: broken: the daemon is unreachable": 2
    }


def test_a_crashed_xdist_worker_loses_only_the_rollout_it_was_running(pytester):
    pytester.makepyfile(
        test_w="""
        import os
        import pytest

        @pytest.mark.parametrize("n", range(6))
        def test_fine(sandbox, n):
            pass

        def test_crash(sandbox):
            os._exit(1)
        """
    )
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--rollout-json=report.json")
    result.assert_outcomes(passed=6, failed=1)
    tests = sorted(r["test"].split("::")[1] for r in report_of(pytester)["rollouts"])
    assert tests == sorted(f"test_fine[local-1-{n}]" for n in range(6))


FAST_WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=1, rounds=1000)
@pytest.mark.parametrize("n", [1, 2])
def test_fast(sandbox, n):
    pass
"""

KEPT_RECORDS = """
def pytest_terminal_summary(terminalreporter):
    reports = [r for kind in terminalreporter.stats.values() for r in kind]
    kept = [r for r in reports if getattr(r, "rollout_tax", None) is not None]
    terminalreporter.write_line(f"records kept on reports: {len(kept)}")
"""


def test_xdist_over_2000_fast_rollouts_counts_what_a_serial_run_counts(pytester):
    pytester.makepyfile(test_fast=FAST_WORKLOAD)
    pytester.makeconftest(KEPT_RECORDS)
    common = ("--rollout-probes=0", "-p", "no:cacheprovider")
    # in a process of their own: 4000 rollouts in this worker's process paid for whatever
    # earlier tests left in it (50 minutes in one full run; alone, 25 s)
    serial = pytester.runpytest_subprocess(*common, "--rollout-json=serial.json")
    parallel = pytester.runpytest_subprocess(
        *common, "-p", "xdist", "-n", "2", "--rollout-json=xdist.json"
    )
    for result in (serial, parallel):
        result.assert_outcomes(passed=2000)
        result.stdout.fnmatch_lines(["records kept on reports: 0"])
        result.stdout.fnmatch_lines(["local *2000 *"])
    one, other = report_of(pytester, "serial.json"), report_of(pytester, "xdist.json")
    assert rollout_keys(one) == rollout_keys(other) and len(one["rollouts"]) == 2000
    counts = ("rollouts", "failures", "failure_reasons")
    assert [one["substrates"]["local"][c] for c in counts] == [
        other["substrates"]["local"][c] for c in counts
    ]
    for metric in ("cold_start", "teardown", "trajectory"):
        assert one["substrates"]["local"][metric]["n"] == other["substrates"]["local"][metric]["n"]


def test_json_steps_none_keeps_step_times_in_saved_runs_only(suite):
    suite.makeini("[pytest]\nrollout_json_steps = none\n")
    result = suite.runpytest("--rollout-json=report.json", "--rollout-save=main")
    result.assert_outcomes(passed=2)
    assert all("steps" not in r for r in report_of(suite)["rollouts"])
    saved = report_of(suite, ".rollout-tax/main.json")
    assert all(set(r["steps"]) == {"wall_us"} for r in saved["rollouts"])
    assert all(len(r["steps"]["wall_us"]) == 3 for r in saved["rollouts"])
    suite.runpytest("--rollout-json-steps=all", "--rollout-json=report.json").assert_outcomes(
        passed=2
    )
    steps = report_of(suite)["rollouts"][0]["steps"]
    assert set(steps) == {"kinds", "kind", "wall_us", "exit_code", "output_bytes", "at_us"}


def test_a_bad_json_steps_choice_is_a_usage_error(suite):
    result = suite.runpytest("--rollout-json-steps=some")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rollout-json-steps='some': expected all or none*"])


def test_a_mistyped_replay_path_is_one_usage_line_without_importing_conftests(
    pytester: pytest.Pytester,
) -> None:
    """Issue 47, finding 2: no test paths and a replay path that does not exist made pytest
    load the conftests of the invocation directory's ``test*`` folders (``testpaths``)."""
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    pytester.mkdir("tests")
    (pytester.path / "tests" / "conftest.py").write_text("import no_such_module_xyz\n")
    result = pytester.runpytest_subprocess("--rollout-replay=example_trajectorys")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines + result.outlines if line.strip()]
    assert errors == ["ERROR: --rollout-replay=example_trajectorys: no such file or directory"]


def test_a_missing_image_is_said_once_in_pytests_sections(pytester: pytest.Pytester) -> None:
    """Issue 47, finding 4: one cause (a missing image) was said at each rollout's setup
    error; now in full at the first, and each later one refers to it in a short line."""
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.trajectory(rounds=4)\n"
        "def test_x(sandbox):\n    sandbox.exec('true')\n"
    )
    result = pytester.runpytest_subprocess(
        "--substrate=docker", "--substrate-opt=docker.image=rollout-tax/absent:never",
        "--rollout-probes=0", "-p", "xdist", "-p", "no:randomly",
    )  # fmt: skip
    out = result.stdout.str()
    pytests = out[: out.index("= rollout tax =")]
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert pytests.count("image rollout-tax/absent:never is missing") == 1, pytests
    assert pytests.count("docker: unavailable, for the reason given at test_") == 3, pytests
    summary = " ".join(out[out.index("= rollout tax =") :].split())
    # the summary says the cause once, with the count of rollouts it hit (it said it 3 times)
    assert "no valid result (4 of 4 failed: SubstrateUnavailable: docker: image" in summary
    assert summary.count("is missing") == 1, summary
    assert "100% infra_failed (4 of 4: 4 unavailable; not the workload's failures)" in summary
