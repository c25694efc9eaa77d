"""The coreweave substrate against the local stand-in CoreWeave gateway
(tests/support/coreweave_server.py).

The stand-in answers the unmodified ``cwsandbox`` SDK over gRPC through its own knob
(``CWSANDBOX_BASE_URL``) and backs every sandbox with a real docker container. What every
substrate does (exec, files, timeouts) is proved by tests/contract/; here is what is particular
to coreweave. :class:`CoreWeaveBehaviour` also runs against the real service in
test_coreweave_live.py.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.coreweave_server import DEFAULT_REGISTRY_IMAGE, StandInCoreWeave

from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.substrate import ROLLOUT_LABEL, SESSION_LABEL, new_id
from pytest_rollout_tax.errors import (
    ConfigError,
    CredentialsMissing,
    RateLimited,
    SandboxError,
    SandboxStartError,
    SubstrateUnavailable,
)
from pytest_rollout_tax.substrates.coreweave import CoreWeaveSubstrate
from pytest_rollout_tax.substrates.hosted import OWNER_LABEL
from pytest_rollout_tax.substrates.registry import Registry

SMALL_WORKLOAD = """
def test_small(sandbox):
    assert sandbox.exec("echo hi").stdout == "hi\\n"
"""

Factory = Callable[..., CoreWeaveSubstrate]


@pytest.fixture
def coreweave_factory(coreweave_env: StandInCoreWeave) -> Iterator[Factory]:
    """Make coreweave substrates (options as keywords) that talk to the stand-in; reaped
    after."""
    made: list[CoreWeaveSubstrate] = []

    def make(**options: object) -> CoreWeaveSubstrate:
        made.append(CoreWeaveSubstrate(**options))
        return made[-1]

    yield make
    for substrate in made:
        substrate.reap(substrate.session_id)
        substrate.close()


@pytest.fixture
def coreweave_substrate(coreweave_factory: Factory) -> CoreWeaveSubstrate:
    return coreweave_factory()


def _tags(spec: object) -> dict[str, str]:
    """A sandbox spec's tags (``KEY=VALUE`` strings) as a dict."""
    return dict(tag.split("=", 1) for tag in spec.tags)  # type: ignore[attr-defined]


class CoreWeaveBehaviour:
    """What is particular to coreweave sandboxes, stand-in or real (the generic contract is
    tests/contract/'s); collected here as :class:`TestStandIn`, in test_coreweave_live.py as
    ``TestLive``."""

    @pytest.fixture
    def sb(self, coreweave_substrate: CoreWeaveSubstrate) -> Iterator[Sandbox]:
        with coreweave_substrate.start() as sandbox:
            yield sandbox

    def test_cold_start_is_create_then_the_services_states_then_first_exec(
        self, sb: Sandbox
    ) -> None:
        phases = sb.rollout.phases
        assert next(iter(phases)) == "create" and list(phases)[-2:] == ["workdir", "first_exec"]
        states = list(phases)[1:-2]
        assert states and set(states) <= {"pending", "creating", "preparing"}, phases
        counted = sum(v for k, v in phases.items() if k != "workdir")
        assert sb.rollout.cold_start_s == pytest.approx(counted)
        assert sb.exec("pwd").stdout == "/workspace\n"

    def test_sandboxes_carry_the_ownership_labels_as_tags(
        self, coreweave_substrate: CoreWeaveSubstrate, sb: Sandbox
    ) -> None:
        [listed] = coreweave_substrate.listed(coreweave_substrate.session_id)
        assert listed.id == sb.id and listed.labels[OWNER_LABEL] == coreweave_substrate.owner
        assert listed.labels[SESSION_LABEL] == coreweave_substrate.session_id
        assert listed.labels[ROLLOUT_LABEL]

    def test_sandbox_wide_env_reaches_every_command(self, coreweave_factory: Factory) -> None:
        with coreweave_factory(env={"ROLLOUT_TAX_PROBE": "on"}).start() as sb:
            assert sb.exec("echo $ROLLOUT_TAX_PROBE").stdout == "on\n"
            step = sb.exec("echo $ROLLOUT_TAX_PROBE", env={"ROLLOUT_TAX_PROBE": "x"})
            assert step.stdout == "x\n"

    def test_teardown_deletes_the_sandbox(self, coreweave_substrate: CoreWeaveSubstrate) -> None:
        coreweave_substrate.start().close()
        assert coreweave_substrate.listed(coreweave_substrate.session_id) == []

    def test_reap_deletes_the_tagged_sandboxes_of_one_session(
        self, coreweave_factory: Factory, coreweave_substrate: CoreWeaveSubstrate
    ) -> None:
        other = coreweave_factory(session_id=new_id())
        left = [coreweave_substrate.start(), coreweave_substrate.start(), other.start()]
        try:
            assert coreweave_substrate.reap(coreweave_substrate.session_id) == 2
            assert coreweave_substrate.listed(coreweave_substrate.session_id) == []
            assert [s.id for s in other.listed(other.session_id)] == [left[2].id]
        finally:
            for sb in left:
                sb.close()


class TestStandIn(CoreWeaveBehaviour):
    """:class:`CoreWeaveBehaviour` against the stand-in."""


# -- the stand-in only ---------------------------------------------------------------------------


def test_the_registry_finds_it_and_options_reach_the_service(
    coreweave_env: StandInCoreWeave,
) -> None:
    substrate = Registry.discover().create(
        "coreweave", max_lifetime=42, cpu="2", memory="512Mi", tags={"team": "rl"}, env={"A": "1"}
    )
    try:
        with substrate.start() as sb:
            [record] = [s for s in coreweave_env.sandboxes() if s.sandbox_id == sb.id]
            assert record.spec.max_lifetime_seconds == 42
            [container] = record.spec.containers
            assert container.image == DEFAULT_REGISTRY_IMAGE
            requested = container.resource_requirements.requests
            assert (requested.cpu, requested.memory) == ("2", "512Mi")
            assert _tags(record.spec) == {
                "team": "rl", SESSION_LABEL: substrate.session_id,
                ROLLOUT_LABEL: _tags(record.spec)[ROLLOUT_LABEL], OWNER_LABEL: substrate.owner,
            }  # fmt: skip
            assert dict(container.environment_variables) == {"A": "1"}
            assert (substrate.resources.vcpus, substrate.resources.gib) == (2.0, 0.5)
            output = sb.exec("env").stdout
            assert coreweave_env.api_key not in output
        assert sb.id not in {s.sandbox_id for s in coreweave_env.sandboxes()}
    finally:
        substrate.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_lifetime": 0}, "max_lifetime=0: must be >= 1 s"),
        ({"image": " "}, "image: must not be empty"),
        ({"data_plane": "tcp"}, "data_plane='tcp': expected auto, gateway or direct"),
        ({"request_timeout": "0"}, "request_timeout=0.0: must be > 0 s"),
        ({"poll_interval": "0"}, "poll_interval=0.0: expected > 0 and <= 10 s"),
        ({"max_sandboxes": "-1"}, "max_sandboxes=-1: must be >= 0 (0: no limit)"),
        ({"max_creates_per_s": "-1"}, "max_creates_per_s=-1.0: expected 0 to 10,000"),
        ({"memory": "2Gi", "template": "x"}, "coreweave.template: unknown option"),
        ({"tags": "rollout-tax.io/session=x"}, "tags: rollout-tax.io/session: rollout-tax.io/*"),
        ({"workdir": "work"}, "workdir='work': must be an absolute path"),
        ({"transport": "session"}, "coreweave.transport='session': coreweave offers exec"),
    ],
)
def test_bad_options_are_config_errors(
    coreweave_env: StandInCoreWeave, options: dict, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        CoreWeaveSubstrate(**options)


def test_without_a_key_the_substrate_is_unavailable_naming_the_variable(
    coreweave_env: StandInCoreWeave, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CWSANDBOX_API_KEY", " ")
    with pytest.raises(CredentialsMissing) as caught:
        CoreWeaveSubstrate()
    assert str(caught.value).startswith("coreweave: CWSANDBOX_API_KEY is not set; export")
    assert "\n" not in str(caught.value)


def test_without_a_key_the_rollouts_are_skipped_with_that_reason(
    coreweave_env: StandInCoreWeave, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    monkeypatch.delenv("CWSANDBOX_API_KEY")
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest("--substrate=coreweave,local", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *coreweave: CWSANDBOX_API_KEY is not set*"])
    assert "Traceback" not in result.stdout.str()


def test_a_rejected_key_is_named_as_such_without_showing_it(
    coreweave_env: StandInCoreWeave, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "cwsb-this-key-must-never-be-printed-42"
    monkeypatch.setenv("CWSANDBOX_API_KEY", wrong)
    substrate = CoreWeaveSubstrate()
    with pytest.raises(SubstrateUnavailable) as caught:
        substrate.start()
    assert str(caught.value).startswith(
        f"coreweave: CoreWeave at {coreweave_env.url} rejected the key from CWSANDBOX_API_KEY"
    )
    assert wrong not in str(caught.value) and caught.value.__cause__ is None
    substrate.close()


def test_an_image_the_service_cannot_pull_fails_the_start_naming_the_reason(
    coreweave_env: StandInCoreWeave, coreweave_factory: Factory
) -> None:
    with pytest.raises(SandboxStartError, match=r"is failed instead of running: ErrImagePull"):
        coreweave_factory(image="no/such:image").start()
    assert coreweave_env.sandboxes() == []


def test_a_sandbox_whose_life_ended_gives_a_clear_error(
    coreweave_env: StandInCoreWeave, coreweave_factory: Factory
) -> None:
    sb = coreweave_factory(max_lifetime=120).start()
    coreweave_env.expire(sb.id)
    with pytest.raises(SandboxError, match=r"coreweave.max_lifetime=120 s"):
        sb.exec("true")
    sb.close()  # the sandbox is gone already: not an error


def test_a_call_the_stand_in_does_not_know_fails_loudly_naming_it(
    coreweave_env: StandInCoreWeave, coreweave_substrate: CoreWeaveSubstrate
) -> None:
    """A protocol drift after an SDK upgrade: the SDK speaks a call the stand-in lacks."""
    import cwsandbox

    streams = r"does not implement .*SandboxService/StreamLogs"
    with coreweave_substrate.start() as sb, pytest.raises(Exception, match=streams):
        list(sb.handle.sdk.stream_logs())
    with pytest.raises(Exception, match=r"does not implement .*DiscoveryService/"):
        cwsandbox.list_runners()
    assert coreweave_env.unknown_calls["coreweave.sandbox.v1.SandboxService/StreamLogs"] >= 1


def test_the_stand_in_is_built_on_the_wheels_servicer_base() -> None:
    from cwsandbox._proto import sandbox_pb2_grpc
    from support import coreweave_server

    assert sandbox_pb2_grpc.SandboxServiceServicer in coreweave_server._Gateway.__mro__


def _burst(substrate: CoreWeaveSubstrate, count: int) -> list[BaseException | None]:
    """Start and close ``count`` sandboxes at once; each start's error, or None."""

    def one(_: int) -> BaseException | None:
        try:
            substrate.start().close()
        except Exception as exc:
            return exc
        return None

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.parametrize(("limit", "refused"), [(0, True), (None, False)], ids=["off", "10"])
def test_a_burst_above_the_published_quota_is_rate_limited_unless_paced(
    coreweave_env: StandInCoreWeave, coreweave_factory: Factory, limit: int | None, refused: bool
) -> None:
    """20 creates at once against CoreWeave's published default quota (10 live sandboxes):
    refused past the tenth unless paced by ``max_sandboxes`` (its default, the quota)."""
    coreweave_env.max_sandboxes = 10
    substrate = coreweave_factory(**({} if limit is None else {"max_sandboxes": limit}))
    errors = _burst(substrate, 20)
    limited = [e for e in errors if isinstance(e, RateLimited)]
    assert [e for e in errors if e is not None and e not in limited] == []
    assert bool(limited) is refused and len(limited) == coreweave_env.rate_limited
    for error in limited:
        assert str(error).startswith("coreweave: rate limit or quota exceeded (RESOURCE_EXHAUSTED)")
        assert "concurrent sandbox quota exceeded: 10" in error.provider_message
    assert coreweave_env.sandboxes() == []


def test_creates_are_paced_to_a_rate_when_one_is_set(
    coreweave_env: StandInCoreWeave, coreweave_factory: Factory
) -> None:
    coreweave_env.limit_creates(5, burst=2)  # 4 at once are beyond it; 4 at 5/s are not
    unpaced = _burst(coreweave_factory(), 4)
    assert any(isinstance(e, RateLimited) for e in unpaced), unpaced
    coreweave_env.limit_creates(5, burst=2)
    paced = coreweave_factory(max_creates_per_s=5)
    assert _burst(paced, 4) == [None] * 4 and coreweave_env.rate_limited == 0


def test_a_create_answered_after_the_clients_timeout_leaves_no_sandbox(
    coreweave_env: StandInCoreWeave, coreweave_factory: Factory
) -> None:
    """The service made the sandbox, but answered after the client gave up: found by its
    rollout's tag and deleted."""
    coreweave_env.create_answer_delay_s = 3.0
    substrate = coreweave_factory(request_timeout=1.0)
    with pytest.raises(SandboxStartError, match=r"did not answer the create within"):
        substrate.start()
    assert coreweave_env.requests["CreateSandbox"] >= 1
    assert coreweave_env.sandboxes() == []


def test_an_interrupted_create_leaves_no_sandbox(
    coreweave_env: StandInCoreWeave, coreweave_factory: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the sandbox is still starting: it is found by its tag and deleted."""
    substrate = coreweave_factory()
    polled = threading.Event()

    def interrupted(sdk: object, clock: object) -> None:  # while it is pending
        polled.set()
        raise KeyboardInterrupt

    monkeypatch.setattr(substrate, "_wait_running", interrupted)
    with pytest.raises(KeyboardInterrupt):
        substrate.start()
    assert polled.is_set() and coreweave_env.sandboxes() == []


def test_each_rollout_opens_its_own_connection(coreweave_substrate: CoreWeaveSubstrate) -> None:
    assert coreweave_substrate.connection == "per-rollout"  # the SDK shares no client
    with coreweave_substrate.start() as first, coreweave_substrate.start() as second:
        assert first.handle.sdk._channel is not second.handle.sdk._channel


def test_rollout_reap_lists_and_deletes_leftovers_of_earlier_sessions(
    coreweave_env: StandInCoreWeave, coreweave_factory: Factory, pytester: pytest.Pytester
) -> None:
    crashed = coreweave_factory(session_id="crashed-session")
    leftovers = [crashed.start(), crashed.start()]
    result = pytester.runpytest("--rollout-reap", "--substrate=coreweave")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["rollout-tax: coreweave: removed 2 leftover sandbox(es)"])
    assert not {sb.id for sb in leftovers} & {s.sandbox_id for s in coreweave_env.sandboxes()}


def test_the_sdk_missing_is_unavailable_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cwsandbox", None)
    monkeypatch.delitem(sys.modules, "pytest_rollout_tax.substrates.coreweave")
    with pytest.raises(
        SubstrateUnavailable, match=r"pip install 'pytest-rollout-tax\[coreweave\]'"
    ):
        importlib.import_module("pytest_rollout_tax.substrates.coreweave")


def test_a_rejected_key_never_shows_in_output_logs_or_report(
    coreweave_env: StandInCoreWeave, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    """The canary: a key the service refuses reaches no output, log line or report."""
    wrong = "cwsb-canary-this-key-must-never-be-printed-42"
    monkeypatch.setenv("CWSANDBOX_API_KEY", wrong)
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest(
        "--substrate=coreweave", "--rollout-json=report.json", "-rA", "--log-level=DEBUG", "-vv"
    )
    result.assert_outcomes(errors=1)
    output = result.stdout.str() + result.stderr.str()
    assert "rejected the key from CWSANDBOX_API_KEY" in output
    assert "Traceback" not in output
    report = (pytester.path / "report.json").read_text()
    assert wrong not in output + report and coreweave_env.api_key not in output + report
    entry = json.loads(report)["substrates"]["coreweave"]
    assert (entry["failures"], entry["infra_failed"]["rollouts"]) == (0, 1)  # the service's


@pytest.mark.parametrize(("plane", "asked"), [("auto", True), ("gateway", False)])
def test_the_data_plane_option_reaches_the_sdk(
    coreweave_env: StandInCoreWeave, coreweave_factory: Factory, plane: str, asked: bool
) -> None:
    """``auto`` asks for a direct connection first (the stand-in declines: the gateway
    serves); ``gateway`` never asks."""
    before = coreweave_env.requests["ConnectSandbox"]
    with coreweave_factory(data_plane=plane).start() as sb:
        assert sb.exec("echo via").stdout == "via\n"
    assert (coreweave_env.requests["ConnectSandbox"] > before) is asked
