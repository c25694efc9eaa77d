"""The lifecycle side of a backend: a Substrate creates, deletes and reaps sandboxes.

A backend implements :meth:`Substrate._create` (make one environment tagged with the labels
it is given, marking the phases of its cold start), :meth:`Substrate.destroy`,
:meth:`Substrate.reap_tagged` (delete what carries a create's labels: a late create),
:meth:`Substrate.reap` and :meth:`Substrate._transport` (the data plane of one environment).
:meth:`Substrate.start` turns those into a timed cold start within its budgets
(:mod:`.budgets`, :mod:`.late_create`); the :class:`~.sandbox.Sandbox` it returns times
every step.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import ConfigError, PrepareFailed, RolloutTaxError, SandboxStartError
from . import contract, prices
from .budgets import BUDGET_OPTIONS, charged, ready_within
from .control_plane import ControlPlane, is_loopback
from .late_create import LateCreates
from .limits import LIMITS
from .options import parse_options
from .pool_stats import PoolStats
from .price import PriceOptions, Rate, Resources
from .record import PhaseClock, Rollout
from .sandbox import Handle, Sandbox
from .transport import OUTPUT_CAP, Transport
from .urls import redact_url

#: What a backend's primitives take: its own Handle subclass (``DockerHandle``, ``PodHandle``).
BackendHandle = Any
SESSION_LABEL = "rollout-tax.io/session"
#: The phase a warm pool's claimed sandbox records as its cold start (``pool=K``).
CLAIM_PHASE = "claim"
RESET_PHASE = "reset"  #: the phase of a reused sandbox's cold start (``reuse="reset"``)
ROLLOUT_LABEL = "rollout-tax.io/rollout"


@dataclass
class SubstrateOptions:
    """The options every substrate has; a backend's ``Options`` dataclass extends it."""

    #: How steps reach a sandbox: ``exec`` (one exec API call per step) or ``session``
    #: (one long-lived shell per sandbox, opened during the cold start).
    transport: str = "exec"
    #: Sandboxes kept started in the background for rollouts to claim (0: no warm pool).
    pool: int = 0
    #: ``fresh`` (a new sandbox per rollout) or ``reset`` (a used one reset: phase ``reset``).
    reuse: str = "fresh"
    #: What a sandbox costs (``NAME.price.KEY=VALUE``), over the shipped rate sheet's.
    price: PriceOptions = field(default_factory=PriceOptions)
    #: Seconds (None: no bound) a create may take, its request to the backend's handle; the
    #: transport's opening and first no-op; a delete: the budgets of :mod:`.budgets`.
    create_timeout: float | None = None
    ready_timeout: float | None = None
    teardown_timeout: float | None = None


@dataclass(frozen=True)
class Prepare:
    """A workload's setup (marker ``prepare=FUNC``): FUNC(sandbox) runs on a fresh sandbox
    before the rollout's steps and is not one of them."""

    #: What one prepared snapshot serves: the test (its rounds share it).
    key: str
    run: Callable[[Sandbox], object]

    def __call__(self, sandbox: Sandbox) -> None:
        """Run the setup, its steps unrecorded; a failure is one line naming the function,
        without the secrets its steps were given."""
        __tracebackhide__ = True
        try:
            with sandbox.unrecorded():
                self.run(sandbox)
        except RolloutTaxError:
            raise
        except Exception as exc:
            name = getattr(self.run, "__name__", repr(self.run))
            failed = f"{type(exc).__name__}: {exc}"
            message = f"{sandbox.substrate.name}: prepare={name} failed: {failed}"
            raise PrepareFailed(sandbox.rollout.redact(message)) from None


def command_env_values(options: object) -> list[str]:
    """The values of the variables a substrate's options give every command (``docker.env``,
    ``local.env``, ``e2b.envs``): secrets, as every ``exec(env=)`` value is."""
    values: list[str] = []
    for name in ("env", "envs"):
        given = getattr(options, name, None)
        if isinstance(given, dict):
            values += [str(value) for value in given.values()]
    return values


def new_id() -> str:
    """A short random id for sessions and rollouts, valid as a label value everywhere."""
    return uuid.uuid4().hex[:12]


class Substrate(ABC):
    """A kind of execution environment; one object per name per process holds the client."""

    #: The registry name of this implementation (``docker``); instances may be named variants.
    kind: ClassVar[str]
    #: A dataclass of the options this substrate accepts (``--substrate-opt NAME.KEY=VALUE``),
    #: extending :class:`SubstrateOptions`.
    Options: ClassVar[type]
    #: The transports it offers, the default first.
    transports: ClassVar[tuple[str, ...]] = ("exec",)
    resets: ClassVar[bool] = False  #: whether it can reset a used sandbox (:meth:`_reset`)
    #: The real service runs elsewhere (E2B, AWS): a control plane on this machine is a stand-in.
    hosted: ClassVar[bool] = False
    #: The OCI runtime sandboxes run under (``runc``, ``runsc``), where the substrate has one.
    runtime: str | None = None
    #: That runtime's release and platform (gVisor's ``20240729.0`` and ``systrap``), if known.
    runtime_release: str | None = None
    runtime_platform: str | None = None
    #: Bytes of each output stream a step keeps (``--rollout-output-cap``).
    output_cap: int = OUTPUT_CAP

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        self.name = name or self.kind
        self.session_id = session_id or new_id()
        self.options = self.parse(options, owner=self.name)
        self._prepare_lock = threading.Lock()
        self._prepared: RolloutTaxError | bool = False
        self._snapshot_locks: dict[str, threading.Lock] = {}
        self._snapshots: dict[str, Any] = {}
        #: The creates abandoned past their budget or interrupted, until cleaned up.
        self.late_creates = LateCreates()

    @classmethod
    def parse(cls, options: dict[str, Any], *, owner: str) -> Any:
        """``options`` as this substrate's Options, checked: a ConfigError names ``owner.key``."""
        parsed = parse_options(cls.Options, options, owner=owner)
        if parsed.transport not in cls.transports:
            raise ConfigError(
                f"{owner}.transport={parsed.transport!r}: {cls.kind} offers "
                f"{' and '.join(cls.transports)}"
            )
        pool = LIMITS["SUBSTRATE.pool"]
        if not pool.low <= parsed.pool <= pool.high:
            raise ConfigError(f"{owner}.pool={parsed.pool}: expected {pool.text()} (0: no pool)")
        if parsed.reuse not in ("fresh", "reset") or (parsed.reuse == "reset" and not cls.resets):
            can = "fresh or reset" if cls.resets else f"fresh ({cls.kind} cannot reset a sandbox)"
            raise ConfigError(f"{owner}.reuse={parsed.reuse!r}: expected {can}")
        if parsed.reuse == "reset" and parsed.pool:
            raise ConfigError(f"{owner}.reuse='reset': not with a warm pool (pool={parsed.pool})")
        for key in BUDGET_OPTIONS.values():
            budget = getattr(parsed, key)
            if budget is not None and not budget > 0:
                raise ConfigError(f"{owner}.{key}={budget!r}: expected seconds > 0")
        return parsed

    @classmethod  # noqa: B027 - most substrates check nothing more
    def check_usage(cls, options: Any, *, owner: str) -> None:
        """Before any rollout: what parsed ``options`` need of the service, where checking is
        cheap; a ConfigError is a usage error. Anything else is left for the rollouts."""

    # -- the backend interface -------------------------------------------------------------

    def _prepare(self) -> None:  # noqa: B027 - most substrates need nothing more
        """Check, once, what starting a sandbox needs beyond a client (an image, a network).

        Not called for reaping, which needs none of it. Raise a RolloutTaxError if unusable.
        """

    @abstractmethod
    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> Handle:
        """Create and start one environment, marking phases on ``clock``; clean up if it fails."""

    @abstractmethod
    def _transport(self, handle: BackendHandle) -> Transport:
        """The data plane of ``handle``, as ``self.options.transport`` selects (not opened)."""

    @abstractmethod
    def destroy(self, handle: BackendHandle) -> None:
        """Delete the environment and return once it is gone."""

    @property
    def snapshots(self) -> bool:
        """Whether prepared sandboxes are restored from a checkpoint (``docker.snapshot``)
        instead of prepared in every rollout."""
        return False

    def _checkpoint(self, sandbox: Sandbox) -> Any:
        """Checkpoint a prepared sandbox (which it may stop); what :meth:`_restore` needs."""
        raise NotImplementedError(f"{self.kind} has no snapshots")

    def _restore(self, snapshot: Any, *, labels: dict[str, str], clock: PhaseClock) -> Handle:
        """A new environment restored from ``snapshot``, marking its phases on ``clock``."""
        raise NotImplementedError(f"{self.kind} has no snapshots")

    def _reset(self, handle: BackendHandle, clock: PhaseClock) -> None:
        """Reset a used environment to the clean image (``reuse="reset"``)."""
        raise NotImplementedError(f"{self.kind} cannot reset a sandbox")

    def after_cold_start(self, handle: BackendHandle, rollout: Rollout) -> None:  # noqa: B027
        """Called once the cold start is measured, untimed: for lookups that must not slow it."""

    def reap(self, session_id: str | None = None) -> int:
        """Remove environments labelled by ``session_id`` (any session if None); return how many."""
        return 0

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Delete every environment carrying ``labels`` (one create's: the session and a
        rollout id), whatever its state, one still being created included; how many.
        :mod:`.late_create` calls it after a create that returned no handle, at once and when
        the request ends. ``_create`` writes the labels on the environment at its request."""
        return 0

    @functools.cached_property
    def rate(self) -> Rate | None:
        """The billing in force: ``NAME.price.*`` over the shipped rate sheet, on the
        resources this substrate bills for; None without a price."""
        return prices.rate_for(self.kind, self.resources, self.options.price)

    @property
    def resources(self) -> Resources:
        """What one sandbox is billed for, from this substrate's own options (unknown: none;
        ``price.vcpus``, ``price.gib`` and ``price.share`` say it)."""
        return Resources()

    @property
    def template(self) -> str | None:
        """What each sandbox is made from, as the provider names it: its ``template`` option
        (E2B's, an agent-sandbox claim's) or else its ``image`` (docker, k8s, Daytona); None
        when it has neither (local, bwrap, EC2, Modal)."""
        for name in ("template", "image"):
            value = getattr(self.options, name, None)
            if isinstance(value, str) and value:
                return value
        return None

    @property
    def secrets(self) -> list[str]:
        """The credentials this substrate holds (API keys, tokens), kept out of every report."""
        return []

    @property
    def connection(self) -> str | None:
        """Whether each rollout's first request paid connection setup: ``per-rollout`` (a
        client, and a connection, of its own) or ``reused`` (one warm client); None: a
        substrate without a hosted control plane."""
        return None

    @property
    def endpoint(self) -> str | None:
        """The control plane's URL (never with credentials); None: there is none (local)."""
        return None

    def ping(self) -> None:  # noqa: B027 - no control plane, nothing to call
        """One cheap control-plane API call (docker ping, k8s version, ...); raise if it fails."""

    def control_plane(self, calls: int = 3) -> ControlPlane | None:
        """The median round trip of ``calls`` pings from this client; None without an endpoint."""
        endpoint = self.endpoint
        if endpoint is None:
            return None
        times = []
        try:
            for _ in range(calls):
                start = time.perf_counter()
                self.ping()
                times.append(time.perf_counter() - start)
        except Exception:  # reported as an unknown round trip, never as a session failure
            times = []
        rtt = statistics.median(times) if times else None
        return ControlPlane(
            redact_url(endpoint),
            rtt,
            self.hosted and is_loopback(endpoint),
            self.connection,
        )

    def close_own_pool(self) -> PoolStats | None:
        """End the warm pool the substrate's service keeps for its sandboxes (k8s claim mode's
        SandboxWarmPool); what it did, in a ``pool=K`` warm pool's figures, or None (none)."""
        return None

    def close(self) -> None:  # noqa: B027 - most substrates hold nothing to release
        """Release the client connection."""

    # -- the cold start --------------------------------------------------------------------

    def start(
        self,
        rollout: Rollout | None = None,
        *,
        timeout: float | None = None,
        prepare: Prepare | None = None,
    ) -> Sandbox:
        """Create a fresh sandbox and wait for its first no-op exec (the cold start).

        With ``prepare``, the sandbox is prepared too: by running it (phase ``prepare``), or,
        on a substrate with :attr:`snapshots`, by restoring its test's prepared checkpoint
        (made on first use: phases ``template`` and ``checkpoint``, not counted).
        """
        timeout = contract.check_timeout(timeout)
        self._ensure_prepared()
        restore = prepare is not None and self.snapshots
        return self._start(rollout, timeout, prepare, restore=restore)

    def _start(
        self,
        rollout: Rollout | None,
        timeout: float | None,
        prepare: Prepare | None,
        *,
        restore: bool,
    ) -> Sandbox:
        rollout = self.describe(rollout or Rollout(substrate=self.name))
        labels = {SESSION_LABEL: self.session_id, ROLLOUT_LABEL: new_id()}
        clock = PhaseClock(rollout.phases)
        rollout.stamp("create")
        try:
            if restore and prepare is not None:
                snapshot = self._snapshot_of(prepare, timeout, clock)
                handle = self._create_within(rollout, labels, clock, snapshot)
            else:
                handle = self._create_within(rollout, labels, clock)
        except RolloutTaxError:
            raise
        except Exception as exc:
            raise SandboxStartError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        transport = self._transport(handle)
        transport.output_cap = self.output_cap
        sandbox = self._sandbox(handle, transport, rollout, timeout, clock)
        with _closed_on_failure(sandbox):
            ready_within(sandbox, clock, opening=True)
            if prepare is not None and not restore:
                prepare(sandbox)
                clock.mark("prepare")
            rollout.snapshot = restore
            self._ready(rollout, clock)
            self.after_cold_start(handle, rollout)
        return sandbox

    def claim(
        self, pooled: Sandbox, rollout: Rollout, *, timeout: float | None, requested: float
    ) -> Sandbox:
        """``pooled``, started for no rollout, as the sandbox of ``rollout`` (a warm pool's
        claim, asked for at ``requested``): its cold start runs from then until its first
        no-op exec returns, phase ``claim``."""
        self.describe(rollout)
        clock = PhaseClock(rollout.phases, started=requested)
        sandbox = self._sandbox(pooled.handle, pooled.transport, rollout, timeout, clock)
        with _closed_on_failure(sandbox):
            ready_within(sandbox, clock, opening=False, phase=CLAIM_PHASE)
            self._ready(rollout, clock)
        return sandbox

    def reuse(
        self, handle: Handle, rollout: Rollout, *, timeout: float | None, kept: Any = None
    ) -> Sandbox:
        """``handle``, a sandbox an earlier rollout used, reset for ``rollout``: its cold start
        is the reset (phase ``reset``), its transport's opening (none if ``kept``, a session
        the reset spared) and the first no-op."""
        rollout = self.describe(rollout)
        clock = PhaseClock(rollout.phases)
        rollout.stamp("create")
        try:
            self._reset(handle, clock)
        except Exception as exc:
            raise SandboxStartError(f"{self.name}: reset: {type(exc).__name__}: {exc}") from exc
        clock.mark(RESET_PHASE)
        transport = kept or self._transport(handle)
        transport.output_cap = self.output_cap
        sandbox = self._sandbox(handle, transport, rollout, timeout, clock)
        with _closed_on_failure(sandbox):
            ready_within(sandbox, clock, opening=kept is None)
            self._ready(rollout, clock)
        return sandbox

    def keeps_session(self, handle: BackendHandle) -> bool:
        """Whether a reset of ``handle`` spares its session's shell (``reuse="reset"``)."""
        return False

    def describe(self, rollout: Rollout) -> Rollout:
        """``rollout`` with this substrate's kind, transport, runtime and price filled in, and
        its credentials among the secrets no text of the report may hold."""
        rollout.kind, rollout.transport = self.kind, self.options.transport
        rollout.runtime = self.runtime
        rollout.template = self.template
        rollout.runtime_release = self.runtime_release
        rollout.runtime_platform = self.runtime_platform
        if self.rate is not None:
            rollout.price_per_hour, rollout.rate = self.rate.sandbox_hour, self.rate.to_dict()
        rollout.secrets.update(self.secrets)
        rollout.secrets.update(command_env_values(self.options))
        return rollout

    def _sandbox(
        self,
        handle: Handle,
        transport: Transport,
        rollout: Rollout,
        timeout: float | None,
        clock: PhaseClock,
    ) -> Sandbox:
        """The Sandbox of ``handle`` for ``rollout``, timed from the clock's start."""
        rollout.sandbox_id = handle.id
        return Sandbox(
            substrate=self,
            handle=handle,
            transport=transport,
            rollout=rollout,
            timeout=timeout,
            started=clock.started,
            ready_timeout=self.options.ready_timeout,
            teardown_timeout=self.options.teardown_timeout,
        )

    def _create_within(
        self, rollout: Rollout, labels: dict[str, str], clock: PhaseClock, snapshot: Any = None
    ) -> Handle:
        """The backend's create (a restore from ``snapshot`` if given) of a sandbox tagged
        ``labels``, within ``create_timeout``; a late create is deleted (:mod:`.late_create`)."""
        forked = clock.fork()  # an abandoned create's marks are not the rollout's
        budget = self.options.create_timeout

        def make() -> Handle:
            if snapshot is not None:
                return self._restore(snapshot, labels=labels, clock=forked)
            return self._create(labels=labels, clock=forked)

        with charged(rollout):
            handle: Handle = self.late_creates.create(self, make, labels, budget)
        clock.adopt(forked)
        return handle

    @staticmethod
    def _ready(rollout: Rollout, clock: PhaseClock) -> None:
        """The rollout's sandbox is ready: its cold start ends now."""
        rollout.stamp("ready")
        rollout.cold_start_s = clock.cold_start()

    def _snapshot_of(self, prepare: Prepare, timeout: float | None, clock: PhaseClock) -> Any:
        """The checkpoint of ``prepare.key``'s prepared sandbox, made once per process: a
        template sandbox is started and prepared (phase ``template``), then checkpointed
        (phase ``checkpoint``), both on the rollout that made it and not counted as its cold
        start. A failure is remembered: every later rollout of the test fails the same way."""
        with self._prepare_lock:
            lock = self._snapshot_locks.setdefault(prepare.key, threading.Lock())
        with lock:
            if prepare.key not in self._snapshots:
                try:
                    template_record = Rollout(substrate=self.name, test=prepare.key)
                    template = self._start(template_record, timeout, prepare, restore=False)
                    clock.mark("template", cold_start=False)
                    self._snapshots[prepare.key] = self._checkpoint(template)
                    clock.mark("checkpoint", cold_start=False)
                except RolloutTaxError as exc:  # without the template's secrets
                    self._snapshots[prepare.key] = type(exc)(template_record.redact(str(exc)))
            found = self._snapshots[prepare.key]
        if isinstance(found, RolloutTaxError):
            raise type(found)(str(found))
        return found

    def _ensure_prepared(self) -> None:
        """Run :meth:`_prepare` once per substrate; its error fails every later start too."""
        with self._prepare_lock:
            if self._prepared is False:
                try:
                    self._prepare()
                    self._prepared = True
                except RolloutTaxError as exc:
                    self._prepared = exc
        if isinstance(self._prepared, RolloutTaxError):
            raise type(self._prepared)(str(self._prepared))


@contextlib.contextmanager
def _closed_on_failure(sandbox: Sandbox) -> Iterator[None]:
    """Close ``sandbox`` if what runs inside raises; the start's error is the one reported."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            sandbox.close()
        raise
