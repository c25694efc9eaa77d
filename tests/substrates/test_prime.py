"""The prime substrate against the local stand-in Prime service (tests/support/prime_server.py).

The stand-in answers the unmodified ``prime-sandboxes`` SDK through its own
``PRIME_API_BASE_URL`` and backs every sandbox with a real docker container. What every
substrate does (exec, files, timeouts, no secret in any output) is proved by tests/contract/;
here is what is particular to prime: its phases, labels, pacing, and the sandboxes a create
that never answered, or a delete that raced provisioning, would leave behind.
:class:`PrimeBehaviour` also runs against the real service in test_prime_live.py.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("prime_sandboxes", reason="the prime extra (scripts/ensure-prime)")

from prime_sandboxes import APIClient, CreateSandboxRequest, SandboxClient
from prime_sandboxes.core import client as sdk_client
from support.late_create import Cancelled, cancelled_once
from support.prime_server import StandInPrime

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
from pytest_rollout_tax.substrates.prime import (
    PUBLISHED_CREATES_PER_S,
    PrimeSubstrate,
    decode,
)
from pytest_rollout_tax.substrates.registry import Registry
from pytest_rollout_tax.summary.sections import burst_line

LIMITER = "hit the provider's limiter"
#: Polls the stand-in's statuses often: its sandboxes start in well under a second.
FAST = {"poll_interval": 0.05}

Factory = Callable[..., PrimeSubstrate]


@pytest.fixture
def prime_factory(prime_env: StandInPrime) -> Factory:
    """Make a prime substrate (options as keywords) that talks to the stand-in."""
    return lambda **options: PrimeSubstrate(**{**FAST, **options})


@pytest.fixture
def prime_substrate(prime_factory: Factory) -> Iterator[PrimeSubstrate]:
    substrate = prime_factory()
    yield substrate
    substrate.reap(substrate.session_id)


@pytest.fixture
def no_sdk_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK retries a 429 twice, after 10 s and 30 s: at once here (the refusal stays)."""
    monkeypatch.setattr(sdk_client._PLATFORM_RETRY_WAIT, "_rate_limit_delays", (0.0, 0.0))


def alive(server: StandInPrime, session_id: str) -> list[str]:
    """The ids of the stand-in's sandboxes of ``session_id`` not terminated (orphans too)."""
    label = f"{SESSION_LABEL}={session_id}"
    return [s.id for s in server.live() if label in s.request.labels]


class PrimeBehaviour:
    """What the prime substrate does on any Prime service: the stand-in or the real one."""

    @pytest.fixture
    def sb(self, prime_substrate: PrimeSubstrate) -> Iterator[Sandbox]:
        with prime_substrate.start(timeout=60) as sandbox:
            yield sandbox

    def test_sandboxes_carry_the_ownership_labels(
        self, sb: Sandbox, prime_substrate: PrimeSubstrate
    ) -> None:
        labels = decode(sb.handle.sdk.labels)
        assert labels[SESSION_LABEL] == prime_substrate.session_id
        assert len(labels[ROLLOUT_LABEL]) == 12
        assert labels[OWNER_LABEL] == prime_substrate.owner

    def test_a_step_runs_in_the_empty_workdir(self, sb: Sandbox) -> None:
        result = sb.exec("pwd; ls -A | wc -l; echo err >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "/workspace\n0\n", "err\n")

    def test_reap_deletes_the_labelled_sandboxes_of_one_session_only(
        self, prime_factory: Factory
    ) -> None:
        mine, other = prime_factory(), prime_factory()
        with mine.start(timeout=60), other.start(timeout=60):
            assert mine.reap(mine.session_id) == 1
            assert [one.id for one in other.listed(other.session_id)]
            assert mine.listed(mine.session_id) == []


class TestOnTheStandIn(PrimeBehaviour):
    def test_cold_start_is_the_statuses_prime_reports(
        self, prime_env: StandInPrime, prime_substrate: PrimeSubstrate
    ) -> None:
        prime_env.pending_s = 0.3  # longer than a poll: PENDING is seen
        with prime_substrate.start(timeout=60) as sandbox:
            assert list(sandbox.rollout.phases) == [
                "client",
                "create",
                "pending",
                "provisioning",
                "reachable",
                "workdir",
                "first_exec",
            ]
            assert sandbox.rollout.phases["pending"] >= 0.25

    def test_teardown_deletes_the_sandbox(
        self, prime_env: StandInPrime, prime_substrate: PrimeSubstrate
    ) -> None:
        with prime_substrate.start(timeout=60):
            assert len(alive(prime_env, prime_substrate.session_id)) == 1
        assert alive(prime_env, prime_substrate.session_id) == []


def test_the_registry_finds_it(prime_env: StandInPrime) -> None:
    substrate = Registry.discover().create("prime")
    assert isinstance(substrate, PrimeSubstrate)
    assert substrate.options.max_creates_per_s == pytest.approx(500 / 60)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"image": " "}, "image: must not be empty"),
        ({"timeout_minutes": 0}, "timeout_minutes=0: expected 1 to 1440"),
        ({"cpu_cores": 0}, "cpu_cores=0.0: must be > 0"),
        ({"labels": {"rollout-tax.io/x": "1"}}, "rollout-tax.io/* is reserved"),
        ({"max_creates_per_s": -1}, "max_creates_per_s=-1"),
    ],
)
def test_bad_options_are_config_errors(
    prime_env: StandInPrime, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=rf"^prime\..*{message.replace('*', '[*]')}"):
        PrimeSubstrate(**options)


def test_without_a_key_the_substrate_is_unavailable_in_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PRIME_API_KEY", raising=False)
    with pytest.raises(CredentialsMissing) as caught:
        PrimeSubstrate()
    assert "PRIME_API_KEY is not set" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_rejected_key_is_named_as_such_without_showing_it(
    prime_env: StandInPrime, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "pit_wrong_key_0123456789abcdef"
    monkeypatch.setenv("PRIME_API_KEY", wrong)
    with pytest.raises(SubstrateUnavailable) as caught:
        PrimeSubstrate(**FAST).start()
    assert "rejected the API key from PRIME_API_KEY (HTTP 401)" in str(caught.value)
    assert wrong not in str(caught.value)


def test_an_image_prime_cannot_pull_is_named_and_leaves_no_sandbox(
    prime_env: StandInPrime, prime_factory: Factory
) -> None:
    substrate = prime_factory(image="no/such-image:1")
    with pytest.raises(ConfigError, match=r"^prime\.image='no/such-image:1': Prime cannot pull"):
        substrate.start()
    assert alive(prime_env, substrate.session_id) == []


def test_a_call_the_stand_in_does_not_know_fails_naming_the_call(
    prime_substrate: PrimeSubstrate, prime_server: StandInPrime
) -> None:
    """A protocol drift: the SDK speaks a call the stand-in was not taught."""
    with prime_substrate.start(timeout=60) as sandbox:
        client = SandboxClient(APIClient())
        with pytest.raises(Exception, match=r"does not know the call GET /api/v1/sandbox/.*/logs"):
            client.get_logs(sandbox.id)
    [call] = prime_server.unknown[-1:]
    assert call == f"GET /api/v1/sandbox/{sandbox.id}/logs"
    prime_server.unknown.remove(call)  # this test's drift is on purpose


def test_a_burst_at_the_published_limit_is_paced_and_unpaced_it_is_rate_limited(
    prime_env: StandInPrime, no_sdk_backoff: None
) -> None:
    """Acceptance: 20 creates at once against Prime's 500 per minute (8.3/s)."""
    # Unpaced, the bucket holds 4: the 20 creates would have to spread over 2 s to pass, which
    # no loaded machine does to threads started together. Paced, it holds two seconds' worth,
    # as a per-minute window allows a burst: pacing at the limit stays under it however the
    # machine delays a request. One warm client: no rollout's own client spreads creates out.
    prime_env.limit_creates(PUBLISHED_CREATES_PER_S, burst=4)
    warm = {**FAST, "reuse_connection": True}
    unpaced = burst.run_level(PrimeSubstrate(**warm, max_creates_per_s=0), 20).to_dict()
    assert unpaced["rate_limited"] > 0 and unpaced["failures"] == unpaced["rate_limited"]
    assert LIMITER in burst_line("prime", [Burst.from_dict(unpaced)])
    prime_env.limit_creates(PUBLISHED_CREATES_PER_S, burst=2 * PUBLISHED_CREATES_PER_S)
    paced = burst.run_level(PrimeSubstrate(**warm), 20).to_dict()  # the default: published
    assert paced["rate_limited"] == 0 and prime_env.rate_limited == 0
    assert len(paced["cold_start_s"]) == 20
    assert LIMITER not in burst_line("prime", [Burst.from_dict(paced)])


def test_a_refused_create_is_rate_limited_with_the_providers_message(
    prime_env: StandInPrime, no_sdk_backoff: None
) -> None:
    prime_env.limit_creates(0, burst=0)
    with pytest.raises(RateLimited) as caught:
        PrimeSubstrate(**FAST).start()
    assert "Rate limit exceeded" in caught.value.provider_message


def test_a_create_answered_after_the_clients_timeout_leaves_no_sandbox(
    prime_env: StandInPrime, prime_factory: Factory
) -> None:
    """The service made the sandbox, but its answer came after the client gave up: the
    create's tag finds it, and it is deleted once provisioned (not while, which races)."""
    prime_env.answer_delay_s, prime_env.pending_s = 2.0, 0.5
    prime_env.orphan_early_deletes = True
    substrate = prime_factory(request_timeout=0.5)
    with pytest.raises(SubstrateUnavailable, match="did not answer in time while creating"):
        substrate.start()
    prime_env.settle()  # every provisioning over: an orphan would be RUNNING now
    assert alive(prime_env, substrate.session_id) == []


def test_a_create_cancelled_before_its_answer_leaves_no_sandbox(
    prime_env: StandInPrime, prime_factory: Factory
) -> None:
    """Ctrl-C (or a cancelled task) between the create's request and its answer: the create's
    tag finds the sandbox, deleted once provisioned."""
    prime_env.answer_delay_s, prime_env.pending_s = 5.0, 0.5
    prime_env.orphan_early_deletes = True
    substrate = prime_factory()
    with (
        cancelled_once(lambda: bool(alive(prime_env, substrate.session_id))),
        pytest.raises(Cancelled),
    ):
        substrate.start()
    prime_env.settle()
    assert alive(prime_env, substrate.session_id) == []


def test_a_delete_that_races_provisioning_orphans_a_sandbox_and_reap_waits_it_out(
    prime_env: StandInPrime, prime_factory: Factory
) -> None:
    """The stand-in's race is real: the SDK's delete of a sandbox still PENDING answers, and
    the sandbox runs on. The substrate's reap deletes a sandbox once it is provisioned."""
    prime_env.pending_s, prime_env.orphan_early_deletes = 0.5, True
    substrate = prime_factory()
    client = SandboxClient(APIClient())
    labels = [f"{SESSION_LABEL}={substrate.session_id}", f"{OWNER_LABEL}=x:1"]
    raced = client.create(CreateSandboxRequest(name="raced", docker_image="python:3.11-slim"))
    client.delete(raced.id)  # while PENDING
    prime_env.settle()
    assert client.get(raced.id).status == "RUNNING"  # the orphan
    client.delete(raced.id)
    made = client.create(
        CreateSandboxRequest(name="late", docker_image="python:3.11-slim", labels=labels)
    )
    assert made.status == "PENDING"
    assert substrate.reap(substrate.session_id) == 1
    prime_env.settle()
    assert alive(prime_env, substrate.session_id) == []


def test_the_sdk_missing_is_unavailable_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prime_sandboxes", None)
    monkeypatch.delitem(sys.modules, "pytest_rollout_tax.substrates.prime", raising=False)
    with pytest.raises(SubstrateUnavailable, match=r"pip install 'pytest-rollout-tax\[prime\]'"):
        importlib.import_module("pytest_rollout_tax.substrates.prime")
