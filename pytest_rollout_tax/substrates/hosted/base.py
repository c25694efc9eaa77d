"""The base every hosted substrate builds on: a provider writes its SDK calls, the base does
the rest the same way for every provider.

What the base does: the credentials read from their variables (:mod:`.credentials`); creates
paced to the provider's published limit, the wait recorded as phase ``paced`` (not counted);
the client per rollout or shared, and the ``connection`` row saying which (:mod:`.clients`);
the ownership labels written at the create request, the list, the reap by session and by
owner (:mod:`.labels`), and the lookup by tag of a create that failed, timed out or was
cancelled before it answered (``reap_tagged``); the empty workdir every sandbox starts in;
redaction of the credentials; the provider's exceptions mapped to ours through its table
(:mod:`.errors`).

What a provider writes (the ``_`` hooks below): ``_connect``/``_disconnect`` (its SDK
client, if it has one), ``_request`` (the create call, marking its phases), ``_delete``,
``_list`` and ``_delete_listed``, ``_transport``, and ``endpoint``/``where``.
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...core.record import PhaseClock
from ...core.sandbox import Handle
from ...core.substrate import SESSION_LABEL, Substrate
from ...core.transport import Transport, one_line
from ...errors import (
    ConfigError,
    RateLimited,
    RolloutTaxError,
    SandboxStartError,
    SubstrateUnavailable,
)
from ..pacing import CreatePacer
from .clients import PER_ROLLOUT, REUSED, Clients
from .credentials import Credentials, Secrets
from .errors import CREATING, ErrorTable, Mapped
from .labels import OWNER_LABEL, Listed, carries, reaped, this_owner

#: The phase a create held back by pacing records, not counted in the cold start.
PACED_PHASE = "paced"
#: The phase of a rollout's own client (``client_phase``), counted.
CLIENT_PHASE = "client"
#: Errors a provider's own code may raise that say nothing was made: no lookup follows.
NOTHING_MADE = (SubstrateUnavailable, RateLimited, ConfigError)
#: How much of the provider's message an error keeps.
DETAILS_LIMIT = 400


@dataclass
class HostedHandle(Handle):
    """One hosted sandbox: ``sdk`` the SDK's object for it; ``client`` the client that made it
    (the base sets it): the rollout's own, closed with the sandbox, or the shared one when
    connections are reused, which stays open."""

    sdk: Any
    client: Any = None


class HostedSubstrate(Substrate):
    """A hosted provider reached through its SDK. Subclasses declare ``kind``, ``Options``
    (extending :class:`~.options.HostedOptions`), ``credentials`` and ``errors``."""

    hosted = True
    #: The environment variables the credentials come from, and the hint when they are unset.
    credentials: ClassVar[Credentials]
    #: The provider's exceptions mapped to ours.
    errors: ClassVar[ErrorTable]
    #: ``reused`` when the SDK keeps one connection whatever the substrate does (E2B's pool);
    #: None: the ``reuse_connection`` option decides.
    fixed_connection: ClassVar[str | None] = None
    #: Whether making a rollout's client is its own cold-start phase (``client``).
    client_phase: ClassVar[bool] = False
    #: The verb of a delete in messages (``killing``, ``deleting``, ``terminating``).
    delete_verb: ClassVar[str] = "deleting"

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        #: The credentials by variable (never in any output: see ``secrets``).
        self.credential = self.credentials.read(self.name)
        self._secrets = Secrets(list(self.credential.values()))
        self.pacer = CreatePacer(self.options.max_creates_per_s)
        #: This process, as the owner label names it (``HOST:PID``).
        self.owner = this_owner()
        reuse = self.fixed_connection == REUSED or bool(
            getattr(self.options, "reuse_connection", False)
        )
        self.clients = Clients(self._connected, self._disconnect, reuse=reuse)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    # -- what a provider writes ---------------------------------------------------------------

    def _connect(self) -> Any:
        """A new SDK client (None: the SDK has none to hold; its calls take the credentials)."""
        return None

    def _disconnect(self, client: Any) -> None:
        """Close a client ``_connect`` made."""

    @abstractmethod
    def _request(self, client: Any, labels: dict[str, str], clock: PhaseClock) -> HostedHandle:
        """The SDK's create, the sandbox labelled ``labels`` in the request; its phases marked
        on ``clock`` (``create`` at least; the base marks it if the provider did not)."""

    @abstractmethod
    def _delete(self, handle: HostedHandle) -> None:
        """The SDK's delete of ``handle``, returning once it is gone (already gone: fine)."""

    @abstractmethod
    def _list(self, client: Any, labels: Mapping[str, str] | None) -> Iterable[Listed]:
        """The provider's sandboxes carrying ``labels`` (every one if None), in any state."""

    @abstractmethod
    def _delete_listed(self, client: Any, listed: Listed) -> bool:
        """Delete a listed sandbox; False if it was already gone."""

    @property
    @abstractmethod
    def where(self) -> str:
        """Where the control plane is, for messages: ``the E2B API at URL`` (no credential)."""

    def _setup_transport(self, handle: HostedHandle) -> Transport:
        """The transport the workdir is made through, before the rollout's is open."""
        return self._transport(handle)

    # -- the lifecycle --------------------------------------------------------------------------

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> HostedHandle:
        if self.pacer.wait() > 0:  # right before the request: later, not slower; not counted
            clock.mark(PACED_PHASE, cold_start=False)
        client = self._client_for_rollout()
        if self.client_phase:
            clock.mark(CLIENT_PHASE)
        tags = {**self.options.extra_labels, **labels, OWNER_LABEL: self.owner}
        try:
            handle = self._request(client, tags, clock)
        except BaseException as exc:  # a failure, a timeout, or a cancel before the answer
            self.clients.release(client)
            self._after_failed_create(exc, labels)
            if isinstance(exc, Exception):
                raise self.error(exc, CREATING) from None
            raise
        handle.client = client  # a rollout's own is closed with the sandbox, never the shared
        if "create" not in clock.phases:
            clock.mark("create")
        try:  # every sandbox starts in an empty workdir, not in the image user's home
            made = self._setup_transport(handle).run(
                ["mkdir", "-p", "--", handle.workdir], timeout=None, env=None, cwd="/"
            )
            if made.exit_code != 0:
                raise SandboxStartError(
                    f"{self.name}: cannot make the workdir {handle.workdir} "
                    f"({self.name}.workdir): {made.reason()[:120]}"
                )
        except BaseException:  # a failure or Ctrl-C: the sandbox must not outlive it
            with contextlib.suppress(Exception):  # the start error is the one to report
                self.destroy(handle)
            raise
        clock.mark("workdir", cold_start=False)  # our own setup, not the service's cold start
        return handle

    def _after_failed_create(self, exc: BaseException, labels: Mapping[str, str]) -> None:
        """A create that did not answer with a sandbox may still have made one (it timed out
        on the client, or was cancelled between request and answer): look it up by its tag
        and delete it. Not after the provider refused the request outright."""
        if isinstance(exc, NOTHING_MADE):  # the provider's own "no", raised as ours
            return
        sdk_error = isinstance(exc, Exception) and not isinstance(exc, RolloutTaxError)
        if sdk_error and self.errors_of(exc).refused:
            return
        with contextlib.suppress(Exception):  # the create's error is the one to report
            self.reap_tagged(labels)

    def _client_for_rollout(self) -> Any:
        return self.clients.for_rollout()

    def _connected(self) -> Any:
        try:
            return self._connect()
        except Exception as exc:
            raise self.error(exc, "connecting") from None

    def destroy(self, handle: Handle) -> None:
        if not isinstance(handle, HostedHandle):
            raise TypeError(f"{self.name}: {handle!r} is not a hosted sandbox's handle")
        try:
            self._delete(handle)
        except Exception as exc:
            raise self.error(exc, f"{self.delete_verb} the sandbox", handle.id) from None
        finally:
            self.clients.release(handle.client)

    def listed(self, session_id: str | None = None) -> list[Listed]:
        """The sandboxes a reap of ``session_id`` (every session if None) takes."""
        query = {SESSION_LABEL: session_id} if session_id else None
        try:
            found = self._list(self.clients.shared, query)
            return [one for one in found if reaped(one, session_id)]
        except Exception as exc:
            raise self.error(exc, "listing sandboxes") from None

    def reap(self, session_id: str | None = None) -> int:
        """Delete the sandboxes labelled by ``session_id`` (by any session if None, sparing a
        live session's of this host); return how many."""
        return self._delete_all(self.listed(session_id))

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Delete the sandboxes carrying every one of ``labels`` (a create's own), whatever
        their state; return how many. For a create that never answered with its sandbox."""
        try:
            found = [one for one in self._list(self.clients.shared, labels) if carries(one, labels)]
        except Exception as exc:
            raise self.error(exc, "listing sandboxes") from None
        return self._delete_all(found)

    def _delete_all(self, found: list[Listed]) -> int:
        removed = 0
        for one in found:
            try:
                removed += self._delete_listed(self.clients.shared, one)
            except Exception as exc:
                raise self.error(exc, f"{self.delete_verb} a leftover sandbox", one.id) from None
        return removed

    def ping(self) -> None:
        """List this session's sandboxes: a cheap authenticated call."""
        self.listed(self.session_id)

    @property
    def connection(self) -> str:
        """``per-rollout`` (each rollout's client connects, paid in its cold start) or
        ``reused`` (one warm client, or the SDK's own pool)."""
        return REUSED if self.clients.reuse else PER_ROLLOUT

    @property
    def paced(self) -> str:
        """How creates are paced, for messages: ``paced at 10/s`` or ``not paced``."""
        limit = self.pacer.max_creates_per_s
        return f"paced at {limit:g}/s" if limit else "not paced"

    def close(self) -> None:
        self.clients.close()

    # -- credentials and errors -----------------------------------------------------------------

    @property
    def secrets(self) -> list[str]:
        return list(self._secrets.values)

    def redact(self, value: object) -> str:
        """``str(value)`` without any credential in it."""
        return self._secrets.redact(value)

    def error(
        self, exc: BaseException, action: str, sandbox_id: str | None = None
    ) -> RolloutTaxError:
        """The error to raise for an SDK exception: one countable first line naming the
        cause, what the provider said (without credentials) on the second."""
        if isinstance(exc, RolloutTaxError):
            return exc
        return self.errors_of(exc, action, sandbox_id).error

    def errors_of(
        self, exc: BaseException, action: str = CREATING, sandbox_id: str | None = None
    ) -> Mapped:
        """The provider's table applied to ``exc``."""
        details = one_line(self.redact(exc), DETAILS_LIMIT)
        if sandbox_id:
            details = f"sandbox {sandbox_id}: {details}"
        fields = {
            "name": self.name,
            "where": self.where,
            "variables": self.credentials.named,
            "paced": self.paced,
            "o": self.options,
            "s": self,
        }
        return self.errors.map(exc, action, details, fields)
