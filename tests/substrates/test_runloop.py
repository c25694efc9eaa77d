"""The runloop substrate against the local stand-in Runloop service
(tests/support/runloop_server.py).

The stand-in answers the unmodified SDK through its own ``RUNLOOP_BASE_URL`` and backs every
devbox with a real docker container. What every substrate does (exec, files, timeouts) is
proved by tests/contract/ on both transports; here is what is particular to runloop: its
devbox states as phases, metadata, pacing, late creates, errors. :class:`RunloopBehaviour`
also runs against the real service in test_runloop_live.py.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from runloop_api_client import Runloop
from support.runloop_server import StandInRunloop

from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.substrate import ROLLOUT_LABEL, SESSION_LABEL
from pytest_rollout_tax.errors import (
    ConfigError,
    CredentialsMissing,
    RateLimited,
    SubstrateUnavailable,
)
from pytest_rollout_tax.fleet import burst
from pytest_rollout_tax.report.records import Burst
from pytest_rollout_tax.substrates.hosted import OWNER_LABEL
from pytest_rollout_tax.substrates.registry import Registry
from pytest_rollout_tax.substrates.runloop import RunloopSubstrate
from pytest_rollout_tax.summary.sections import burst_line

SMALL_WORKLOAD = """
def test_small(sandbox):
    assert sandbox.exec("echo hi").stdout == "hi\\n"
"""
LIMITER = "hit the provider's limiter"
CANARY_KEY = "ak_canary-4e1d9b7a20c3"
#: The cold start's phases, in order: the devbox's own states between create and first_exec.
PHASES = ["client", "create", "provisioning", "initializing", "workdir", "first_exec"]

Factory = Callable[..., RunloopSubstrate]


@pytest.fixture
def runloop_factory(runloop_env: StandInRunloop) -> Factory:
    """Make a runloop substrate (options as keywords) that talks to the stand-in."""
    return RunloopSubstrate


@pytest.fixture
def runloop_substrate(runloop_factory: Factory) -> Iterator[RunloopSubstrate]:
    substrate = runloop_factory()
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


class RunloopBehaviour:
    """What the runloop substrate does on any Runloop service: the stand-in or the real one."""

    @pytest.fixture
    def sb(self, runloop_substrate: RunloopSubstrate) -> Iterator[Sandbox]:
        with runloop_substrate.start(timeout=60) as sandbox:
            yield sandbox

    def test_cold_start_is_create_then_the_devbox_states_then_first_exec(self, sb: Sandbox) -> None:
        phases = sb.rollout.phases
        assert list(phases) == PHASES
        counted = sum(phases[p] for p in PHASES if p != "workdir")
        assert sb.rollout.cold_start_s == pytest.approx(counted)

    def test_devboxes_carry_the_ownership_labels_as_metadata(
        self, sb: Sandbox, runloop_substrate: RunloopSubstrate
    ) -> None:
        metadata = sb.handle.client.devboxes.retrieve(sb.id).metadata
        assert metadata[SESSION_LABEL] == runloop_substrate.session_id
        assert metadata[ROLLOUT_LABEL] and metadata[OWNER_LABEL] == runloop_substrate.owner
        assert [one.id for one in runloop_substrate.listed(runloop_substrate.session_id)] == [sb.id]

    def test_teardown_shuts_the_devbox_down(self, runloop_substrate: RunloopSubstrate) -> None:
        sandbox = runloop_substrate.start(timeout=60)
        client = sandbox.handle.client
        devbox_id = sandbox.id
        sandbox.close()
        assert runloop_substrate.listed(runloop_substrate.session_id) == []
        status = runloop_substrate.clients.shared.devboxes.retrieve(devbox_id).status
        assert status == "shutdown" and client is not runloop_substrate.clients.shared

    def test_reap_shuts_down_the_labelled_devboxes_of_one_session_only(
        self, runloop_factory: Factory
    ) -> None:
        mine, other = runloop_factory(), runloop_factory()
        mine.start(timeout=60)
        kept = other.start(timeout=60)
        try:
            assert mine.reap(mine.session_id) == 1
            assert mine.listed(mine.session_id) == []
            assert [one.id for one in other.listed(other.session_id)] == [kept.id]
        finally:
            kept.close()


class TestStandIn(RunloopBehaviour):
    """Every runloop-specific test, against the stand-in."""


def test_the_registry_finds_it_with_both_transports(runloop_env: StandInRunloop) -> None:
    substrate = Registry.discover().create("runloop", transport="session", size="MEDIUM")
    assert isinstance(substrate, RunloopSubstrate)
    assert substrate.options.transport == "session" and substrate.pacer.max_creates_per_s is None
    assert (substrate.resources.vcpus, substrate.resources.gib) == (2.0, 4.0)
    assert substrate.rate is not None and substrate.rate.sandbox_hour == pytest.approx(
        2 * 0.108 + 4 * 0.0252
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"size": "HUGE"}, "size='HUGE': expected one of X_SMALL"),
        ({"keep_alive": 0}, "keep_alive=0: expected 1 to 172800 s"),
        ({"max_creates_per_s": -1}, "max_creates_per_s=-1.0: expected 0 to 10,000"),
        ({"metadata": {"rollout-tax.io/x": "1"}}, "rollout-tax.io/* is reserved"),
        ({"workdir": "rel"}, "must be an absolute path"),
    ],
)
def test_bad_options_are_config_errors(
    runloop_env: StandInRunloop, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        RunloopSubstrate(**options)
    assert str(caught.value).startswith(f"runloop.{next(iter(options))}")
    assert message in str(caught.value)


def test_without_a_key_the_substrate_is_unavailable_in_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RUNLOOP_API_KEY", raising=False)
    with pytest.raises(CredentialsMissing) as caught:
        RunloopSubstrate()
    assert str(caught.value).startswith("runloop: RUNLOOP_API_KEY is not set; export")
    assert "\n" not in str(caught.value)


def test_a_rejected_key_is_named_as_such_without_showing_it(
    runloop_env: StandInRunloop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNLOOP_API_KEY", CANARY_KEY)
    with pytest.raises(SubstrateUnavailable) as caught:
        RunloopSubstrate().start()
    assert str(caught.value).startswith(
        f"runloop: the Runloop API at {runloop_env.url} rejected the API key from "
        "RUNLOOP_API_KEY (HTTP 401)"
    )
    assert CANARY_KEY not in str(caught.value)


def test_a_rejected_key_never_shows_in_output_logs_or_report(
    runloop_env: StandInRunloop, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    """The canary: the key the service refused reaches no output, DEBUG logs included."""
    monkeypatch.setenv("RUNLOOP_API_KEY", CANARY_KEY)
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest(
        "--substrate=runloop", "--rollout-json=r.json", "--log-level=DEBUG", "-rA"
    )
    assert "rejected the API key from RUNLOOP_API_KEY" in result.stdout.str()
    texts = [result.stdout.str(), result.stderr.str(), (pytester.path / "r.json").read_text()]
    assert all(CANARY_KEY not in text for text in texts)


def test_a_missing_blueprint_is_named(runloop_env: StandInRunloop) -> None:
    with pytest.raises(ConfigError, match=r"^runloop\.blueprint='nope': not found \(HTTP 404\)"):
        RunloopSubstrate(blueprint="nope").start()
    assert runloop_env.devboxes() == []


def test_a_call_the_stand_in_does_not_know_fails_naming_the_call(
    runloop_substrate: RunloopSubstrate, runloop_server: StandInRunloop
) -> None:
    """A protocol drift: the SDK speaks a call the stand-in was not taught."""
    with (
        runloop_substrate.start(timeout=60) as sandbox,
        pytest.raises(Exception, match=r"does not know the call POST /v1/devboxes/.*/keep_alive"),
    ):
        sandbox.handle.client.with_options(max_retries=0).devboxes.keep_alive(sandbox.id)
    [call] = runloop_server.unknown[-1:]
    assert call.startswith("POST /v1/devboxes/") and call.endswith("/keep_alive")
    runloop_server.unknown.remove(call)  # this test's drift is on purpose


def test_a_client_per_rollout_unless_reuse_connection_and_the_row_says_which(
    runloop_factory: Factory,
) -> None:
    fresh, reused = runloop_factory(), runloop_factory(reuse_connection=True)
    with fresh.start(timeout=60) as one, fresh.start(timeout=60) as two:
        assert one.handle.client is not two.handle.client
    with reused.start(timeout=60) as one, reused.start(timeout=60) as two:
        assert one.handle.client is two.handle.client
    assert fresh.connection == "per-rollout" and reused.connection == "reused"


def test_a_burst_above_the_limit_is_rate_limited_unpaced_and_never_paced(
    runloop_env: StandInRunloop,
) -> None:
    """Acceptance: 20 creates at once against a limit of 5 a second. Runloop publishes no
    create limit, so the limit is the account's, given as ``max_creates_per_s``. One client
    for the burst: making 20 of the SDK's clients at once would spread the creates out."""
    runloop_env.limit_creates(5, burst=10)
    unpaced_substrate = RunloopSubstrate(max_creates_per_s=0, reuse_connection=True)
    unpaced = burst.run_level(unpaced_substrate, 20).to_dict()
    assert unpaced["rate_limited"] > 0 and unpaced["failures"] == unpaced["rate_limited"]
    assert LIMITER in burst_line("runloop", [Burst.from_dict(unpaced)])
    runloop_env.limit_creates(5, burst=10)
    paced_substrate = RunloopSubstrate(max_creates_per_s=5, reuse_connection=True)
    paced = burst.run_level(paced_substrate, 20).to_dict()
    assert paced["rate_limited"] == 0 and runloop_env.rate_limited == 0
    assert len(paced["cold_start_s"]) == 20
    assert LIMITER not in burst_line("runloop", [Burst.from_dict(paced)])
    assert runloop_env.devboxes() == []


def test_a_refused_create_is_rate_limited_with_the_providers_message_never_retried(
    runloop_env: StandInRunloop,
) -> None:
    runloop_env.limit_creates(0)
    with pytest.raises(RateLimited) as caught:
        RunloopSubstrate().start()
    assert "rate limit exceeded" in caught.value.provider_message
    assert runloop_env.rate_limited == 1  # the SDK's retries of a 429 are off for creates


def test_rate_limited_rollouts_are_their_own_outcome_never_a_failure(
    runloop_env: StandInRunloop, pytester: pytest.Pytester
) -> None:
    runloop_env.limit_creates(0)
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest(
        "--substrate=runloop", "--rollout-rounds=2", "--rollout-json=report.json"
    )
    result.assert_outcomes(skipped=2)
    assert "runloop: 2 rollout(s) rate_limited" in result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    assert {r["outcome"] for r in report["rollouts"]} == {"rate_limited"}


def test_a_create_answered_after_the_clients_timeout_leaves_no_devbox(
    runloop_env: StandInRunloop,
) -> None:
    """The late create: the service made the devbox but answered past request_timeout; the
    substrate finds it by its rollout's label and shuts it down."""
    before = {devbox.id for devbox in runloop_env.devboxes(live=False)}
    runloop_env.create_delay = 2.0
    with pytest.raises(SubstrateUnavailable, match=r"did not answer within .*request_timeout=1"):
        RunloopSubstrate(request_timeout=1).start()
    [late] = [d for d in runloop_env.devboxes(live=False) if d.id not in before]
    assert late.status == "shutdown" and runloop_env.devboxes() == []
    deadline = time.monotonic() + 30  # its container, booting meanwhile, is removed after it
    while late.container is None or _exists(late.container):
        assert time.monotonic() < deadline, "the late devbox's container outlived it"
        time.sleep(0.1)


def _exists(container: object) -> bool:
    try:
        container.reload()  # type: ignore[attr-defined]
    except Exception:
        return False
    return True


def test_a_session_steps_through_the_attached_shell_and_files_through_the_sdk(
    runloop_factory: Factory, runloop_server: StandInRunloop
) -> None:
    substrate = runloop_factory(transport="session")
    with substrate.start(timeout=60) as sandbox:
        assert "session" in sandbox.rollout.phases
        before = runloop_server.requests["POST /v1/devboxes/{devbox_id}/execute"]
        assert sandbox.exec(["printf", "%s", "a b"]).stdout == "a b"
        sandbox.write_file("f.bin", bytes(range(256)))
        assert sandbox.read_file("f.bin", binary=True) == bytes(range(256))
        assert runloop_server.requests["POST /v1/devboxes/{devbox_id}/execute"] == before
    substrate.close()


def test_the_stand_in_runs_standalone_and_the_unmodified_sdk_talks_to_it(
    sandbox_image: str,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    server = subprocess.Popen(
        [sys.executable, "-m", "support.runloop_server", "--port", "0", "--image", sandbox_image],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        exported = dict(
            line.removeprefix("export ").strip().split("=", 1)
            for line in (server.stdout.readline(), server.stdout.readline())
        )
        client = Runloop(
            bearer_token=exported["RUNLOOP_API_KEY"], base_url=exported["RUNLOOP_BASE_URL"]
        )
        assert client.devboxes.list().devboxes == []
    finally:
        server.terminate()
        server.wait(30)


def test_the_sdk_missing_is_unavailable_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "runloop_api_client", None)
    for name in [m for m in sys.modules if m.startswith("pytest_rollout_tax.substrates.runloop")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(SubstrateUnavailable, match=r"pip install 'pytest-rollout-tax\[runloop\]'"):
        importlib.import_module("pytest_rollout_tax.substrates.runloop")
