"""The daytona substrate against the local stand-in Daytona service
(tests/support/daytona_server.py).

The stand-in answers the unmodified SDK through its own ``DAYTONA_API_URL`` and backs every
sandbox with a real docker container. What every substrate does (exec, files, timeouts) is
proved by tests/contract/ on both transports; here is what is particular to daytona, and the
pacing of creates. :class:`DaytonaBehaviour` also runs against the real service in
test_daytona_live.py.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Iterator

import pytest
from support.daytona_server import StandInDaytona

from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.substrate import ROLLOUT_LABEL, SESSION_LABEL
from pytest_rollout_tax.errors import (
    ConfigError,
    CreateTimeout,
    CredentialsMissing,
    RateLimited,
    SubstrateUnavailable,
)
from pytest_rollout_tax.fleet import burst
from pytest_rollout_tax.report.document import Report, SubstrateEntry
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.report.records import Burst
from pytest_rollout_tax.substrates.daytona import DaytonaSubstrate
from pytest_rollout_tax.substrates.pacing import CreatePacer
from pytest_rollout_tax.substrates.registry import Registry
from pytest_rollout_tax.summary.sections import burst_line, control_plane_lines

SMALL_WORKLOAD = """
def test_small(sandbox):
    assert sandbox.exec("echo hi").stdout == "hi\\n"
"""
LIMITER = "hit the provider's limiter"

Factory = Callable[..., DaytonaSubstrate]


@pytest.fixture
def daytona_factory(daytona_env: StandInDaytona) -> Factory:
    """Make a daytona substrate (options as keywords) that talks to the stand-in."""
    return DaytonaSubstrate


@pytest.fixture
def daytona_substrate(daytona_factory: Factory) -> Iterator[DaytonaSubstrate]:
    substrate = daytona_factory()
    yield substrate
    substrate.reap(substrate.session_id)


class DaytonaBehaviour:
    """What the daytona substrate does on any Daytona service: the stand-in or the real one."""

    @pytest.fixture
    def sb(self, daytona_substrate: DaytonaSubstrate) -> Iterator[Sandbox]:
        with daytona_substrate.start(timeout=60) as sandbox:
            yield sandbox

    def test_cold_start_is_create_then_started_then_first_exec(self, sb: Sandbox) -> None:
        phases = sb.rollout.phases
        assert list(phases) == ["client", "create", "started", "workdir", "first_exec"]
        counted = sum(phases[p] for p in ("client", "create", "started", "first_exec"))
        assert sb.rollout.cold_start_s == pytest.approx(counted)

    def test_sandboxes_carry_the_ownership_labels(
        self, sb: Sandbox, daytona_substrate: DaytonaSubstrate
    ) -> None:
        labels = sb.handle.sdk.labels
        assert labels[SESSION_LABEL] == daytona_substrate.session_id and labels[ROLLOUT_LABEL]
        assert daytona_substrate.list_sandboxes(daytona_substrate.session_id) == [sb.id]

    def test_teardown_deletes_the_sandbox(self, daytona_substrate: DaytonaSubstrate) -> None:
        sandbox = daytona_substrate.start(timeout=60)
        sandbox.close()
        assert sandbox.id not in daytona_substrate.list_sandboxes(daytona_substrate.session_id)

    def test_reap_deletes_the_labelled_sandboxes_of_one_session_only(
        self, daytona_factory: Factory
    ) -> None:
        mine, other = daytona_factory(), daytona_factory()
        mine.start(timeout=60)
        kept = other.start(timeout=60)
        try:
            assert mine.reap(mine.session_id) == 1
            assert mine.list_sandboxes(mine.session_id) == []
            assert other.list_sandboxes(other.session_id) == [kept.id]
        finally:
            kept.close()


class TestStandIn(DaytonaBehaviour):
    """Every daytona-specific test, against the stand-in."""


def test_the_registry_finds_it_with_both_transports(daytona_env: StandInDaytona) -> None:
    substrate = Registry.discover().create("daytona", transport="session", max_creates_per_s="0")
    assert isinstance(substrate, DaytonaSubstrate)
    assert substrate.options.transport == "session" and substrate.pacer.max_creates_per_s is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"snapshot": "s", "image": "debian:12"}, "snapshot and image: give one, not both"),
        ({"cpu": 2}, "apply to a sandbox made from an image only"),
        ({"max_creates_per_s": -1}, "max_creates_per_s=-1.0: expected 0 to 10,000"),
        ({"labels": {"rollout-tax.io/x": "1"}}, "rollout-tax.io/* is reserved"),
        ({"workdir": "rel"}, "must be an absolute path"),
    ],
)
def test_bad_options_are_config_errors(
    daytona_env: StandInDaytona, options: dict, message: str
) -> None:
    with pytest.raises(ConfigError, match=rf"^daytona\..*{message.replace('*', '[*]')}"):
        DaytonaSubstrate(**options)


def test_without_a_key_the_substrate_is_unavailable_in_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    with pytest.raises(CredentialsMissing) as caught:
        DaytonaSubstrate()
    assert "DAYTONA_API_KEY is not set" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_rejected_key_is_named_as_such_without_showing_it(
    daytona_env: StandInDaytona, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "dtn_wrong_key_0123456789abcdef"
    monkeypatch.setenv("DAYTONA_API_KEY", wrong)
    with pytest.raises(SubstrateUnavailable, match="rejected the API key from DAYTONA_API_KEY"):
        DaytonaSubstrate().start()
    with pytest.raises(SubstrateUnavailable) as caught:
        DaytonaSubstrate().start()
    assert wrong not in str(caught.value)


def test_a_missing_snapshot_is_named(daytona_env: StandInDaytona) -> None:
    with pytest.raises(ConfigError, match=r"^daytona\.snapshot='nope': not found \(HTTP 404\)"):
        DaytonaSubstrate(snapshot="nope").start()


def test_a_call_the_stand_in_does_not_know_fails_naming_the_call(
    daytona_substrate: DaytonaSubstrate, daytona_server: StandInDaytona
) -> None:
    """A protocol drift: the SDK speaks a call the stand-in was not taught."""
    with (
        daytona_substrate.start(timeout=60) as sandbox,
        pytest.raises(Exception, match=r"does not know the call GET /toolbox/.*/process/session"),
    ):
        sandbox.handle.sdk.process.list_sessions()
    [call] = daytona_server.unknown[-1:]
    assert call.startswith("GET /toolbox/") and call.endswith("/process/session")
    daytona_server.unknown.remove(call)  # this test's drift is on purpose


def test_a_client_per_rollout_unless_reuse_connection_and_the_row_says_which(
    daytona_factory: Factory,
) -> None:
    fresh, reused = daytona_factory(), daytona_factory(reuse_connection=True)
    with fresh.start(timeout=60) as one, fresh.start(timeout=60) as two:
        assert one.handle.client is not two.handle.client
    with reused.start(timeout=60) as one, reused.start(timeout=60) as two:
        assert one.handle.client is two.handle.client
    planes = {
        name: substrate.control_plane()
        for name, substrate in (("fresh", fresh), ("reused", reused))
    }
    assert planes["fresh"].connection == "per-rollout"
    assert planes["reused"].connection == "reused"
    entries = {n: SubstrateEntry(control_plane=p) for n, p in planes.items()}
    lines = control_plane_lines(
        Report(projection=Scale(), substrates=entries, ranking=[], plugin_version="t", machine={})
    )
    assert any(line.startswith("fresh: each rollout opened its own connection") for line in lines)
    assert any(line.startswith("reused: rollouts reused one warm connection") for line in lines)


def test_a_create_answered_after_the_client_gave_up_leaves_no_sandbox(
    daytona_env: StandInDaytona, daytona_factory: Factory
) -> None:
    """The stand-in makes the sandbox, then answers ``POST /sandbox`` only after the client's
    timeout (``create_timeout``): the create fails, and its sandbox is found by its tag and
    deleted."""
    substrate = daytona_factory(create_timeout=2)
    before = daytona_env.requests["POST /api/sandbox"]
    daytona_env.create_answer_delay_s = 5
    try:
        with pytest.raises(CreateTimeout, match=r"create ran past its 2 s budget \(daytona.create"):
            substrate.start()
    finally:
        daytona_env.create_answer_delay_s = 0
    mine = [
        s for s in daytona_env.sandboxes() if s.labels.get(SESSION_LABEL) == substrate.session_id
    ]
    assert daytona_env.requests["POST /api/sandbox"] - before == 1 and mine == []


def test_a_burst_above_the_limit_is_rate_limited_unpaced_and_never_paced(
    daytona_env: StandInDaytona,
) -> None:
    """Acceptance: 20 creates at once against a limit of 5 a second."""
    # The stand-in's bucket holds two seconds' worth, as providers allow a burst: pacing at
    # the limit stays under it however this loaded machine delays a request.
    daytona_env.limit_creates(5, burst=10)
    unpaced = burst.run_level(DaytonaSubstrate(max_creates_per_s=0), 20).to_dict()
    assert unpaced["rate_limited"] > 0 and unpaced["failures"] == unpaced["rate_limited"]
    assert LIMITER in burst_line("daytona", [Burst.from_dict(unpaced)])
    daytona_env.limit_creates(5, burst=10)
    paced = burst.run_level(DaytonaSubstrate(max_creates_per_s=5), 20).to_dict()
    assert paced["rate_limited"] == 0 and daytona_env.rate_limited == 0
    assert len(paced["cold_start_s"]) == 20
    assert LIMITER not in burst_line("daytona", [Burst.from_dict(paced)])


def test_a_refused_create_is_rate_limited_with_the_providers_message(
    daytona_env: StandInDaytona,
) -> None:
    daytona_env.limit_creates(0)
    with pytest.raises(RateLimited) as caught:
        DaytonaSubstrate().start()
    assert "Too Many Requests" in caught.value.provider_message


def test_rate_limited_rollouts_are_their_own_outcome_never_a_failure(
    daytona_env: StandInDaytona, pytester: pytest.Pytester
) -> None:
    daytona_env.limit_creates(0)
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest(
        "--substrate=daytona", "--rollout-rounds=2", "--rollout-json=report.json"
    )
    result.assert_outcomes(skipped=2)
    assert "daytona: 2 rollout(s) rate_limited" in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    entry = report["substrates"]["daytona"]
    assert entry["failures"] == 0 and entry["rate_limited"]["rollouts"] == 2
    assert {r["outcome"] for r in report["rollouts"]} == {"rate_limited"}


def test_the_pacer_spaces_creates_across_threads() -> None:
    pacer = CreatePacer(20.0)
    waits = [pacer.wait() for _ in range(3)]
    assert waits[0] == 0.0 and all(0 < w <= 0.05 for w in waits[1:])
    assert CreatePacer(None).wait() == CreatePacer(0).wait() == 0.0
    with pytest.raises(ValueError, match="max_creates_per_s=-1"):
        CreatePacer(-1)


def test_the_sdk_missing_is_unavailable_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "daytona", None)
    for name in [m for m in sys.modules if m.startswith("pytest_rollout_tax.substrates.daytona")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(SubstrateUnavailable, match=r"pip install 'pytest-rollout-tax\[daytona\]'"):
        importlib.import_module("pytest_rollout_tax.substrates.daytona")
