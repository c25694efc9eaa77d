"""The modal substrate against the local stand-in Modal (tests/support/modal_server.py).

The stand-in answers the unmodified SDK over gRPC through its own knob (``MODAL_SERVER_URL``)
and backs every sandbox with a real docker container. What every substrate does (exec, files,
timeouts) is proved by tests/contract/; here is what is particular to modal.
:class:`ModalBehaviour` also runs against the real service in test_modal_live.py.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.late_create import Cancelled, cancelled_once
from support.modal_server import StandInModal

from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.substrate import ROLLOUT_LABEL, SESSION_LABEL, new_id
from pytest_rollout_tax.errors import (
    ConfigError,
    CredentialsMissing,
    RateLimited,
    SandboxError,
    SubstrateUnavailable,
)
from pytest_rollout_tax.substrates.hosted import OWNER_LABEL
from pytest_rollout_tax.substrates.modal import ModalSubstrate
from pytest_rollout_tax.substrates.registry import Registry

SMALL_WORKLOAD = """
def test_small(sandbox):
    assert sandbox.exec("echo hi").stdout == "hi\\n"
"""

Factory = Callable[..., ModalSubstrate]


@pytest.fixture
def modal_factory(modal_env: StandInModal) -> Iterator[Factory]:
    """Make modal substrates (options as keywords) that talk to the stand-in; closed after."""
    made: list[ModalSubstrate] = []

    def make(**options: object) -> ModalSubstrate:
        made.append(ModalSubstrate(**options))
        return made[-1]

    yield make
    for substrate in made:
        substrate.reap(substrate.session_id)
        substrate.close()


@pytest.fixture
def modal_substrate(modal_factory: Factory) -> ModalSubstrate:
    return modal_factory()


class ModalBehaviour:
    """What is particular to modal sandboxes, stand-in or real (the generic contract is
    tests/contract/'s); collected here as :class:`TestStandIn`, in test_modal_live.py as
    ``TestLive``."""

    @pytest.fixture
    def sb(self, modal_substrate: ModalSubstrate) -> Iterator[Sandbox]:
        with modal_substrate.start() as sandbox:
            yield sandbox

    def test_cold_start_is_create_then_first_exec(self, sb: Sandbox) -> None:
        phases = sb.rollout.phases
        assert list(phases) == ["create", "workdir", "first_exec"]  # workdir: not counted
        assert sb.rollout.cold_start_s == pytest.approx(phases["create"] + phases["first_exec"])
        assert sb.exec("pwd").stdout == "/workspace\n"

    def test_sandboxes_carry_the_ownership_labels_as_tags(
        self, modal_substrate: ModalSubstrate, sb: Sandbox
    ) -> None:
        [listed] = modal_substrate.list_sandboxes(modal_substrate.session_id)
        tags = listed.get_tags()
        assert listed.object_id == sb.id
        assert tags[SESSION_LABEL] == modal_substrate.session_id and tags[ROLLOUT_LABEL]

    def test_sandbox_wide_env_reaches_every_command(self, modal_factory: Factory) -> None:
        with modal_factory(env={"ROLLOUT_TAX_PROBE": "on"}).start() as sb:
            assert sb.exec("echo $ROLLOUT_TAX_PROBE").stdout == "on\n"
            step = sb.exec("echo $ROLLOUT_TAX_PROBE", env={"ROLLOUT_TAX_PROBE": "x"})
            assert step.stdout == "x\n"

    def test_teardown_terminates_the_sandbox(self, modal_substrate: ModalSubstrate) -> None:
        modal_substrate.start().close()
        assert modal_substrate.list_sandboxes(modal_substrate.session_id) == []

    def test_reap_terminates_the_tagged_sandboxes_of_one_session(
        self, modal_factory: Factory, modal_substrate: ModalSubstrate
    ) -> None:
        other = modal_factory(session_id=new_id())
        left = [modal_substrate.start(), modal_substrate.start(), other.start()]
        try:
            assert modal_substrate.reap(modal_substrate.session_id) == 2
            assert modal_substrate.list_sandboxes(modal_substrate.session_id) == []
            assert [s.object_id for s in other.list_sandboxes(other.session_id)] == [left[2].id]
        finally:
            for sb in left:
                sb.close()


class TestStandIn(ModalBehaviour):
    """:class:`ModalBehaviour` against the stand-in."""


# -- the stand-in only ---------------------------------------------------------------------------


def test_the_registry_finds_it_and_options_reach_the_service(modal_env: StandInModal) -> None:
    substrate = Registry.discover().create(
        "modal", timeout=42, cpu=0.5, memory=768, tags={"team": "rl"}, env={"A": "1"}
    )
    try:
        with substrate.start() as sb:
            [record] = [s for s in modal_env.sandboxes() if s.sandbox_id == sb.id]
            assert record.timeout_s == 42
            # cpu counts physical cores: 0.5 of one is 500 millicores (one vCPU)
            assert record.resources.milli_cpu == 500 and record.resources.memory_mb == 768
            assert record.tags == {
                "team": "rl", SESSION_LABEL: substrate.session_id,
                ROLLOUT_LABEL: record.tags[ROLLOUT_LABEL], OWNER_LABEL: substrate.owner,
            }  # fmt: skip
            assert record.env == {"A": "1"}
            output = sb.exec("env").stdout
            assert modal_env.token_secret not in output and modal_env.token_id not in output
        assert sb.id not in {s.sandbox_id for s in modal_env.sandboxes()}
    finally:
        substrate.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "modal.timeout=0: the sandbox lifetime must be >= 1 s"),
        ({"image": " "}, "image: must not be empty"),
        ({"cpu": "0"}, "cpu=0.0: physical cores, expected > 0"),
        ({"memory": "-1"}, "memory=-1: MiB, expected > 0"),
        (
            {"max_creates_per_s": "-1"},
            "max_creates_per_s=-1.0: expected 0 to 10,000 (0 or none: unpaced)",
        ),
        ({"tags": "rollout-tax.io/session=x"}, "rollout-tax.io/session: rollout-tax.io/*"),
        ({"workdir": "work"}, "workdir='work': must be an absolute path"),
        ({"transport": "session"}, "modal.transport='session': modal offers exec"),
        ({"template": "x"}, "modal.template: unknown option"),
    ],
)
def test_bad_options_are_config_errors(modal_env: StandInModal, options: dict, message: str):
    with pytest.raises(ConfigError, match=re.escape(message)):
        ModalSubstrate(**options)


@pytest.mark.parametrize("unset", [["MODAL_TOKEN_ID"], ["MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"]])
def test_without_a_token_the_substrate_is_unavailable_naming_the_variables(
    modal_env: StandInModal, monkeypatch: pytest.MonkeyPatch, unset: list[str]
) -> None:
    for variable in unset:
        monkeypatch.setenv(variable, " ")
    with pytest.raises(CredentialsMissing) as caught:
        ModalSubstrate()
    assert str(caught.value).startswith(f"modal: {' and '.join(unset)} not set;")
    assert "\n" not in str(caught.value)


def test_without_a_token_the_rollouts_are_skipped_with_that_reason(
    modal_env: StandInModal, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    monkeypatch.delenv("MODAL_TOKEN_SECRET")
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest("--substrate=modal,local", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *modal: MODAL_TOKEN_SECRET not set*"])
    assert "Traceback" not in result.stdout.str()


def test_a_rejected_token_is_named_as_such_without_showing_it(
    modal_env: StandInModal, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "as-this-secret-must-never-be-printed-42"
    monkeypatch.setenv("MODAL_TOKEN_SECRET", wrong)
    substrate = ModalSubstrate()
    with pytest.raises(SubstrateUnavailable) as caught:
        substrate.start()
    assert str(caught.value).startswith(
        f"modal: Modal at {modal_env.url} rejected the token from MODAL_TOKEN_ID/MODAL_TOKEN_SECRET"
    )
    assert wrong not in str(caught.value) and caught.value.__cause__ is None
    substrate.close()


def test_an_image_the_service_cannot_use_is_named(modal_factory: Factory) -> None:
    with pytest.raises(
        ConfigError, match=r"^modal.image='no/such:image': the image cannot be used"
    ):
        modal_factory(image="no/such:image").start()


def test_a_sandbox_whose_life_ended_gives_a_clear_error(
    modal_env: StandInModal, modal_factory: Factory
) -> None:
    sb = modal_factory(timeout=120).start()
    modal_env.expire(sb.id)
    with pytest.raises(SandboxError, match=r"no longer running.*modal.timeout=120 s"):
        sb.exec("true")
    sb.close()  # the sandbox is gone already: not an error


def test_a_call_the_stand_in_does_not_know_fails_loudly_naming_it(
    modal_env: StandInModal, modal_substrate: ModalSubstrate
) -> None:
    """A protocol drift after an SDK upgrade: the SDK speaks a call the stand-in lacks."""
    with modal_substrate.start() as sb:
        with pytest.raises(Exception, match=r"does not implement .*ModalClient/SandboxTagsSetV2"):
            sb.handle.sdk.set_tags({"more": "tags"})
        # the SDK words every failed fs-tools exec the same; the stand-in counts it by name
        with pytest.raises(Exception, match="unexpected error"):
            sb.handle.sdk.filesystem.list_files("/")
    assert modal_env.unknown_calls["SandboxTagsSetV2"] >= 1
    assert modal_env.unknown_calls["fs-tools ListFiles"] == 1


def test_the_stand_in_is_built_on_the_wheels_servicer_bases() -> None:
    from modal_proto import api_grpc, task_command_router_grpc
    from support import modal_server

    assert api_grpc.ModalClientBase in modal_server._ControlPlane.__mro__
    assert task_command_router_grpc.TaskCommandRouterBase in modal_server._Router.__mro__


def _burst(substrate: ModalSubstrate, count: int) -> list[BaseException | None]:
    """Start and close ``count`` sandboxes at once; each start's error, or None."""

    def one(_: int) -> BaseException | None:
        try:
            substrate.start().close()
        except Exception as exc:
            return exc
        return None

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.parametrize(("pace", "refused"), [(None, True), (5.0, False)], ids=["off", "5/s"])
def test_a_burst_above_the_limit_is_rate_limited_unless_paced(
    modal_env: StandInModal, modal_factory: Factory, pace: float | None, refused: bool
) -> None:
    modal_env.limit_creates(5, burst=10)  # 20 at once are beyond it; 20 at 5/s are not
    substrate = modal_factory(max_creates_per_s=pace, reuse_connection=True)
    errors = _burst(substrate, 20)
    limited = [e for e in errors if isinstance(e, RateLimited)]
    assert [e for e in errors if e is not None and e not in limited] == []
    assert bool(limited) is refused and len(limited) == modal_env.rate_limited
    for error in limited:
        assert str(error).startswith("modal: rate limit or quota exceeded (RESOURCE_EXHAUSTED)")
        assert "5 sandbox creations per second" in error.provider_message


def test_a_create_cancelled_before_its_answer_leaves_no_sandbox(
    modal_env: StandInModal, modal_factory: Factory
) -> None:
    """The stand-in makes the sandbox and holds back its answer; the rollout is cancelled
    then (as by Ctrl-C): the cancel goes on, and the sandbox is found by its tag and
    terminated."""
    substrate = modal_factory()

    def made() -> bool:
        return any(s.tags.get(SESSION_LABEL) == substrate.session_id for s in modal_env.sandboxes())

    modal_env.create_answer_delay_s = 8
    try:
        with pytest.raises(Cancelled), cancelled_once(made):
            substrate.start()
    finally:
        modal_env.create_answer_delay_s = 0
    assert not made()


def test_each_rollout_opens_its_own_connection_unless_reused(modal_factory: Factory) -> None:
    own, shared = modal_factory(), modal_factory(reuse_connection=True)
    assert (own.connection, shared.connection) == ("per-rollout", "reused")  # the row says it
    with own.start() as first, own.start() as second:
        assert first.handle.client is not None and first.handle.client is not second.handle.client
    with shared.start() as sb, shared.start() as other:
        assert sb.handle.client is shared.clients.shared  # the substrate's one connection
        assert other.handle.client is sb.handle.client


def test_rollout_reap_lists_and_terminates_leftovers_of_earlier_sessions(
    modal_env: StandInModal, modal_factory: Factory, pytester: pytest.Pytester
) -> None:
    crashed = modal_factory(session_id="crashed-session")
    leftovers = [crashed.start(), crashed.start()]
    result = pytester.runpytest("--rollout-reap", "--substrate=modal")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["rollout-tax: modal: removed 2 leftover sandbox(es)"])
    assert not {sb.id for sb in leftovers} & {s.sandbox_id for s in modal_env.sandboxes()}


def test_the_sdk_missing_is_unavailable_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "modal", None)
    monkeypatch.delitem(sys.modules, "pytest_rollout_tax.substrates.modal")
    with pytest.raises(SubstrateUnavailable, match=r"pip install 'pytest-rollout-tax\[modal\]'"):
        importlib.import_module("pytest_rollout_tax.substrates.modal")


def test_a_rejected_token_never_shows_in_output_logs_or_report(
    modal_env: StandInModal, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    wrong = "as-this-token-must-never-be-printed-42"
    monkeypatch.setenv("MODAL_TOKEN_SECRET", wrong)
    pytester.makepyfile(test_small=SMALL_WORKLOAD)
    result = pytester.runpytest(
        "--substrate=modal", "--rollout-json=report.json", "-rA", "--log-level=DEBUG", "-vv"
    )
    result.assert_outcomes(errors=1)
    output = result.stdout.str() + result.stderr.str()
    assert "rejected the token from MODAL_TOKEN_ID/MODAL_TOKEN_SECRET" in output
    assert "Traceback" not in output
    report = (pytester.path / "report.json").read_text()
    for secret in (wrong, modal_env.token_id):
        assert secret not in output + report
    assert json.loads(report)["substrates"]["modal"]["infra_failed"]["rollouts"] == 1
