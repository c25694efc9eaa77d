"""The e2b substrate against the local stand-in E2B service (tests/support/e2b_server.py).

The stand-in answers the unmodified SDK through its own knobs (``E2B_API_URL``,
``E2B_SANDBOX_URL``) and backs every sandbox with a real docker container. What every
substrate does (exec, files, timeouts) is proved by tests/contract/; here is what is particular
to e2b. :class:`E2BBehaviour` also runs against the real service in test_e2b_live.py.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.e2b_server import FAULT_KEY, FORBIDDEN_KEY, StandInE2B

from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.substrate import ROLLOUT_LABEL, SESSION_LABEL, new_id
from pytest_rollout_tax.errors import (
    ConfigError,
    CredentialsMissing,
    SandboxError,
    SandboxStartError,
    StepTimeout,
    SubstrateUnavailable,
)
from pytest_rollout_tax.substrates.e2b import E2BCommands, E2BSubstrate
from pytest_rollout_tax.substrates.hosted import OWNER_LABEL
from pytest_rollout_tax.substrates.registry import Registry

EXAMPLE_SUITE = Path(__file__).resolve().parents[2] / "example_suite"
#: A small bug-fix loop of 150 planned steps, five rounds, as a user would first write it.
USER_WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=150, rounds=5)
def test_bugfix_loop(sandbox):
    sandbox.write_file("calc.py", "def add(a, b):\\n    return a - b\\n")
    r = sandbox.exec("python -c 'import calc; print(calc.add(2, 2))'")
    assert r.exit_code == 0 and r.stdout.strip() == "0"
"""
SMALL_WORKLOAD = """
def test_small(sandbox):
    assert sandbox.exec("echo hi").stdout == "hi\\n"
"""

Factory = Callable[..., E2BSubstrate]


@pytest.fixture
def e2b_factory(e2b_env: StandInE2B) -> Factory:
    """Make an e2b substrate (options as keywords) that talks to the stand-in."""
    return E2BSubstrate


@pytest.fixture
def e2b_substrate(e2b_factory: Factory) -> E2BSubstrate:
    return e2b_factory()


class E2BBehaviour:
    """What is particular to e2b sandboxes, stand-in or real (the generic contract is
    tests/contract/'s); collected here as :class:`TestStandIn`, in test_e2b_live.py as
    ``TestLive``."""

    @pytest.fixture
    def sb(self, e2b_substrate: E2BSubstrate) -> Iterator[Sandbox]:
        with e2b_substrate.start() as sandbox:
            yield sandbox

    def test_cold_start_is_create_then_first_exec(self, sb: Sandbox) -> None:
        phases = sb.rollout.phases
        assert list(phases) == ["create", "workdir", "first_exec"]  # workdir: not counted
        assert sb.rollout.cold_start_s == pytest.approx(phases["create"] + phases["first_exec"])
        assert sb.exec("pwd").stdout == "/home/user/workspace\n"

    def test_sandboxes_carry_the_ownership_labels_as_metadata(
        self, e2b_substrate: E2BSubstrate, sb: Sandbox
    ) -> None:
        listed = {i.sandbox_id: i for i in e2b_substrate.list_sandboxes(e2b_substrate.session_id)}
        metadata = listed[sb.id].metadata
        assert metadata[SESSION_LABEL] == e2b_substrate.session_id
        assert metadata[ROLLOUT_LABEL]

    def test_directories_made_by_write_file_are_writable_by_commands(self, sb: Sandbox) -> None:
        sb.write_file("deep/er/still/blob.bin", b"x")  # the files API makes the directories
        assert sb.exec("touch deep/er/still/new && echo writable").stdout == "writable\n"

    def test_a_timeout_is_one_reason_that_never_shows_the_command(self, sb: Sandbox) -> None:
        with pytest.raises(StepTimeout) as caught:
            sb.exec("TOKEN=hunter2-secret; sleep 300 & sleep 301; echo never", timeout=2)
        # the same reason for every such step, and never the command line (it may hold secrets)
        assert str(caught.value) == "e2b: step ran past its 2 s timeout; killed"
        assert sb.rollout.steps[-1].exit_code is None

    def test_sandbox_wide_envs_reach_every_command(self, e2b_factory: Factory) -> None:
        with e2b_factory(envs={"ROLLOUT_TAX_PROBE": "on"}).start() as sb:
            assert sb.exec("echo $ROLLOUT_TAX_PROBE").stdout == "on\n"
            assert sb.exec("echo $ROLLOUT_TAX_PROBE", env={"ROLLOUT_TAX_PROBE": "x"}).stdout == (
                "x\n"
            )

    def test_teardown_kills_the_sandbox(self, e2b_substrate: E2BSubstrate) -> None:
        sb = e2b_substrate.start()
        sb.close()
        assert e2b_substrate.list_sandboxes(e2b_substrate.session_id) == []

    def test_reap_kills_the_labelled_sandboxes_of_one_session(
        self, e2b_factory: Factory, e2b_substrate: E2BSubstrate
    ) -> None:
        other = e2b_factory(session_id=new_id())
        left = [e2b_substrate.start(), e2b_substrate.start(), other.start()]
        try:
            assert e2b_substrate.reap(e2b_substrate.session_id) == 2
            assert e2b_substrate.list_sandboxes(e2b_substrate.session_id) == []
            assert [i.sandbox_id for i in other.list_sandboxes(other.session_id)] == [left[2].id]
            assert other.reap(other.session_id) == 1
        finally:
            for sb in left:
                sb.close()


class TestStandIn(E2BBehaviour):
    """:class:`E2BBehaviour` against the stand-in."""


# -- the stand-in only ---------------------------------------------------------------------------


def test_the_registry_finds_it_and_options_reach_the_service(e2b_env: StandInE2B) -> None:
    substrate = Registry.discover().create(
        "e2b", timeout=42, metadata={"team": "rl"}, envs={"A": "1"}, request_timeout=30
    )
    with substrate.start() as sb:
        [record] = [s for s in e2b_env.sandboxes() if s.sandbox_id == sb.id]
        assert record.timeout_s == 42 and record.template_id == "base"
        assert record.metadata == {
            "team": "rl", SESSION_LABEL: substrate.session_id,
            ROLLOUT_LABEL: record.metadata[ROLLOUT_LABEL], OWNER_LABEL: substrate.owner,
        }  # fmt: skip
        assert record.env_vars == {"A": "1"}
        assert e2b_env.api_key not in sb.exec("env").stdout
    assert sb.id not in {s.sandbox_id for s in e2b_env.sandboxes()}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "e2b.timeout=0: the sandbox lifetime must be >= 1 s"),
        ({"template": " "}, "template: must not be empty"),
        ({"request_timeout": "0"}, "request_timeout=0.0: must be > 0 s"),
        ({"metadata": "rollout-tax.io/session=x"}, "rollout-tax.io/session: rollout-tax.io/*"),
        ({"workdir": "work"}, "workdir='work': must be an absolute path"),
        ({"image": "x"}, "e2b.image: unknown option"),
    ],
)
def test_bad_options_are_config_errors(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        E2BSubstrate(**options)


def test_without_a_key_the_substrate_is_unavailable_naming_the_variable(
    e2b_env: StandInE2B, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("E2B_API_KEY")
    with pytest.raises(CredentialsMissing, match=r"^e2b: E2B_API_KEY is not set"):
        E2BSubstrate()


def test_without_a_key_the_rollouts_are_skipped_with_that_reason(
    e2b_env: StandInE2B, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    monkeypatch.setenv("E2B_API_KEY", " ")
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest("--substrate=e2b,local", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *e2b: E2B_API_KEY is not set*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("key", "status"), [("e2b_wrong_key_0123456789abcdef", 401), (FORBIDDEN_KEY, 403)]
)
def test_a_rejected_key_is_named_as_such_without_showing_it(
    e2b_env: StandInE2B, monkeypatch: pytest.MonkeyPatch, key: str, status: int
) -> None:
    monkeypatch.setenv("E2B_API_KEY", key)
    with pytest.raises(SubstrateUnavailable) as caught:
        E2BSubstrate().start()
    assert str(caught.value).startswith(
        f"e2b: the E2B API at {e2b_env.url} (domain e2b.app) rejected the API key from "
        f"E2B_API_KEY (HTTP {status})"
    )
    assert key not in str(caught.value) and caught.value.__cause__ is None


def test_an_unreachable_service_names_the_domain_and_url(
    e2b_env: StandInE2B, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed once the block ends
    monkeypatch.setenv("E2B_API_URL", url)
    with pytest.raises(SubstrateUnavailable) as caught:
        E2BSubstrate(domain="e2b.example.test").start()
    assert str(caught.value).startswith(
        f"e2b: cannot reach the E2B API at {url} (domain e2b.example.test) while creating a sandbox"
    )


def test_a_service_that_does_not_answer_is_a_request_timeout(
    e2b_env: StandInE2B, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setenv("E2B_API_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        with pytest.raises(SubstrateUnavailable, match=r"did not answer in time.*request_timeout"):
            E2BSubstrate(request_timeout=0.3).start()


def test_a_missing_template_is_named(e2b_env: StandInE2B) -> None:
    with pytest.raises(ConfigError, match=r"^e2b.template='no-such-tpl': template not found"):
        E2BSubstrate(template="no-such-tpl").start()


def test_a_rate_limit_is_named_after_the_sdk_retried(e2b_env: StandInE2B) -> None:
    before = e2b_env.requests["POST /v2/sandboxes"]
    with pytest.raises(SandboxStartError, match=r"^e2b: rate limit or quota exceeded \(HTTP 429\)"):
        E2BSubstrate(metadata={FAULT_KEY: "429"}).start()
    assert e2b_env.requests["POST /v2/sandboxes"] - before == 4  # the SDK's 3 retries


def test_a_sandbox_whose_life_ended_gives_a_clear_error(e2b_env: StandInE2B) -> None:
    substrate = E2BSubstrate(timeout=120)
    sb = substrate.start()
    e2b_env.expire(sb.id)
    with pytest.raises(SandboxError, match=r"no longer running.*e2b.timeout=120 s"):
        sb.exec("true")
    sb.close()  # the sandbox is gone already: not an error


def test_a_command_timing_out_before_it_reported_its_pid_is_still_killed(
    e2b_env: StandInE2B,
) -> None:
    with E2BSubstrate().start() as sb:
        e2b_env.start_event_delay_s = 0.8  # the process runs; its start event is late
        try:
            with pytest.raises(StepTimeout):
                sb.exec("sleep 300", timeout=0.3)
        finally:
            e2b_env.start_event_delay_s = 0.0
        assert "sleep 300" not in sb.exec(["ps", "-eo", "args"]).stdout


_RUN = E2BCommands.run


def _mkdir_interrupted(self: E2BCommands, argv: list[str], **kwargs: object) -> object:
    if argv[0] == "mkdir":  # Ctrl-C while the start makes the workdir
        raise KeyboardInterrupt
    return _RUN(self, argv, **kwargs)


@pytest.mark.parametrize(
    ("interrupt", "options", "error", "message"),
    [
        (True, {}, KeyboardInterrupt, None),
        (
            False,
            {"workdir": "/proc/no-such/workdir"},
            SandboxStartError,
            r"^e2b: cannot make the workdir /proc/no-such/workdir \(e2b\.workdir\): ",
        ),
    ],
    ids=["ctrl-c-during-mkdir", "mkdir-fails"],
)
def test_a_start_that_fails_making_the_workdir_kills_its_sandbox(
    e2b_env: StandInE2B,
    monkeypatch: pytest.MonkeyPatch,
    interrupt: bool,
    options: dict,
    error: type[BaseException],
    message: str | None,
) -> None:
    substrate = E2BSubstrate(session_id=new_id(), **options)
    if interrupt:
        monkeypatch.setattr(E2BCommands, "run", _mkdir_interrupted)
    try:
        with pytest.raises(error, match=message):
            substrate.start()
        assert substrate.list_sandboxes(substrate.session_id) == []
    finally:
        substrate.reap(substrate.session_id)  # only if the assertion above failed


def test_reap_any_session_pages_through_and_spares_unlabelled_sandboxes(
    e2b_env: StandInE2B,
) -> None:
    from e2b import Sandbox as SDKSandbox

    stranger = SDKSandbox.create(metadata={"owner": "someone else"})
    try:
        leftovers = [E2BSubstrate(session_id=new_id()).start() for _ in range(3)]
        substrate = E2BSubstrate()
        substrate.list_page_size = 1
        assert substrate.reap(None) == 3
        assert {s.sandbox_id for s in e2b_env.sandboxes()} == {stranger.sandbox_id}
        for sb in leftovers:
            sb.close()
    finally:
        stranger.kill()


def test_a_create_answered_after_the_client_gave_up_leaves_no_sandbox(
    e2b_env: StandInE2B,
) -> None:
    """The stand-in makes the sandbox, then answers only after the client's request timeout:
    the create fails, and the sandbox it made is found by its tag and killed."""
    substrate = E2BSubstrate(request_timeout=3)
    e2b_env.create_answer_delay_s = 6
    try:
        with pytest.raises(SubstrateUnavailable, match="did not answer in time"):
            substrate.start()
    finally:
        e2b_env.create_answer_delay_s = 0
    mine = [s for s in e2b_env.sandboxes() if s.metadata.get(SESSION_LABEL) == substrate.session_id]
    assert e2b_env.requests["POST /v2/sandboxes"] >= 1 and mine == []


def test_a_reap_of_every_session_spares_a_live_process_of_this_host(
    e2b_env: StandInE2B,
) -> None:
    """Reap by owner: a sandbox whose owner label names another live process here (a session
    still running) outlives a reap of every session; a reap of its own session takes it."""
    running = E2BSubstrate()
    running.owner = f"{socket.gethostname()}:{os.getppid()}"  # a live process, not this one
    running.start()
    assert E2BSubstrate().reap(None) == 0
    assert E2BSubstrate().reap(running.session_id) == 1
    assert running.list_sandboxes(running.session_id) == []


def test_rollout_reap_lists_and_kills_leftovers_of_earlier_sessions(
    e2b_env: StandInE2B, pytester: pytest.Pytester
) -> None:
    crashed = E2BSubstrate(session_id="crashed-session")
    leftovers = [crashed.start(), crashed.start()]
    result = pytester.runpytest("--rollout-reap", "--substrate=e2b")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["rollout-tax: e2b: removed 2 leftover sandbox(es)"])
    assert not {sb.id for sb in leftovers} & {s.sandbox_id for s in e2b_env.sandboxes()}


def test_the_sdk_missing_is_unavailable_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "e2b", None)
    monkeypatch.delitem(sys.modules, "pytest_rollout_tax.substrates.e2b")
    with pytest.raises(SubstrateUnavailable, match=r"pip install 'pytest-rollout-tax\[e2b\]'"):
        importlib.import_module("pytest_rollout_tax.substrates.e2b")


def test_rate_limits_are_their_own_outcome_never_a_failure(
    e2b_env: StandInE2B, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest(
        "--substrate=e2b",
        "--rollout-rounds=2",
        f"--substrate-opt=e2b.metadata={FAULT_KEY}=429",
        "--rollout-json=report.json",
    )
    result.assert_outcomes(skipped=2)
    assert "Traceback" not in result.stdout.str()
    assert "e2b: 2 rollout(s) rate_limited" in result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    entry = report["substrates"]["e2b"]
    assert entry["failures"] == 0 and entry["failure_reasons"] == {}
    assert entry["rate_limited"]["rollouts"] == 2
    assert {r["outcome"] for r in report["rollouts"]} == {"rate_limited"}


def test_the_example_suite_and_the_user_workload_pass_and_the_key_never_shows(
    e2b_env: StandInE2B, pytester: pytest.Pytester
) -> None:
    for module in EXAMPLE_SUITE.glob("test_*.py"):
        shutil.copy(module, pytester.path / module.name)
    pytester.makepyfile(test_user_workload=USER_WORKLOAD)
    result = pytester.runpytest(
        "--substrate=e2b",
        "--rollout-rounds=1",
        "--rollout-json=report.json",
        "-rA",
        "--log-level=DEBUG",
    )
    result.assert_outcomes(passed=len(list(EXAMPLE_SUITE.glob("test_*.py"))) + 1)
    report_text = (pytester.path / "report.json").read_text()
    e2b = json.loads(report_text)["substrates"]["e2b"]
    assert e2b["failures"] == 0 and set(e2b["phases"]) == {"create", "workdir", "first_exec"}
    output = result.stdout.str() + result.stderr.str()
    assert e2b_env.api_key not in output + report_text
    assert "rollout tax" in output and not e2b_env.sandboxes()


def test_a_rejected_key_never_shows_in_output_logs_or_report(
    e2b_env: StandInE2B, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    wrong = "e2b_this_key_must_never_be_printed_42"
    monkeypatch.setenv("E2B_API_KEY", wrong)
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest(
        "--substrate=e2b", "--rollout-json=report.json", "-rA", "--log-level=DEBUG", "-vv"
    )
    result.assert_outcomes(errors=1)
    output = result.stdout.str() + result.stderr.str()
    assert "rejected the API key from E2B_API_KEY (HTTP 401)" in output
    assert "Traceback" not in output
    assert wrong not in output + (pytester.path / "report.json").read_text()


def test_options_in_pyproject_define_a_named_variant(
    e2b_env: StandInE2B, pytester: pytest.Pytester
) -> None:
    pytester.makepyprojecttoml(
        '[tool.rollout-tax.substrates.e2b-short]\nkind = "e2b"\ntimeout = 77\n'
        'metadata = {purpose = "variant"}\n'
    )
    pytester.makepyfile(
        test_variant="""
        def test_variant(sandbox, substrate):
            assert substrate.name == "e2b-short" and substrate.options.timeout == 77
            assert sandbox.exec("true").ok
        """
    )
    pytester.runpytest("--substrate=e2b-short").assert_outcomes(passed=1)


def test_the_stand_in_is_built_on_the_sdks_own_generated_stubs() -> None:
    from e2b.envd.process import process_connect
    from support import e2b_server

    assert process_connect.Process in e2b_server._ProcessService.__mro__
    server = StandInE2B()
    assert isinstance(server._rpc_apps["/process.Process"], process_connect.ProcessASGIApplication)
