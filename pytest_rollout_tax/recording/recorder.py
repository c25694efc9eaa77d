"""Record mode: the rollouts of a live agent or training run, timed as the plugin times them.

    with record("docker-session", out="runs/") as recorder:
        with recorder.rollout("django__django-11099") as sandbox:
            sandbox.exec("git status")          # a timed step; the gap before it is think time

A :class:`Recorder` holds one substrate for its process and starts a fresh sandbox per rollout
(the cold start and the probes as under pytest). Each step is timed by the sandbox itself; the
gap between one step's return and the next step's call is the agent's think time, measured
live. When a rollout ends its record goes to the process's journal (:mod:`.journal`), which
``python -m pytest_rollout_tax summarize DIR`` turns into the usual summary, JSON, page and
saved run. A recorder is safe to share between threads (and so asyncio tasks that call it
through ``asyncio.to_thread``); each process makes its own (a Ray task, a worker) and writes
its own journal in the same directory.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core import infra
from ..core.limits import LIMITS
from ..core.record import RATE_LIMITED, UNBOUND, Rollout, rollout_param
from ..core.sandbox import Sandbox
from ..core.substrate import Substrate, new_id
from ..errors import RateLimited, RolloutTaxError, SandboxUnbound, UsageError, reason_of
from ..report.machine import commit_info, machine_info
from ..substrates.registry import Registry
from ..substrates.selection import resolve, variant_tables
from .journal import BEGIN, END, Journal

#: No-op execs timed per sandbox after its cold start, as ``--rollout-probes`` defaults.
PROBES = 5


class Recorder:
    """Starts, times and records the rollouts of one process on one substrate (or variant)."""

    def __init__(
        self,
        substrate: str,
        out: str | os.PathLike[str],
        *,
        probes: int = PROBES,
        timeout: float | None = None,
        **options: Any,
    ) -> None:
        self.probes = int(LIMITS["--rollout-probes"].check(probes, f"probes={probes!r}"))
        self.timeout = timeout
        self.session = new_id()
        self.substrate = _substrate(substrate, options, self.session)
        directory = Path(out)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"out={str(out)!r}: cannot make it: {exc.strerror or exc}") from None
        header = {
            "machine": machine_info(),
            "commit": commit_info(),
            "started": time.time(),
        }
        self.journal = Journal(directory, self.session, header)
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self._open: dict[int, Sandbox] = {}
        self._handed: dict[int, float] = {}
        self._closed = False

    def start(self, task: str = "rollout") -> Sandbox:
        """A fresh sandbox for one rollout of ``task`` (its cold start and probes timed).

        A sandbox that does not start is recorded as a failed rollout and its error raised.
        End the rollout with :meth:`end`.
        """
        rollout = self._new_rollout(task)
        try:
            sandbox = self.substrate.start(rollout, timeout=self.timeout)
        except RolloutTaxError as exc:
            start_failed(rollout, exc)
            self.journal.write(END, rollout.to_dict())
            raise
        try:
            sandbox.probe(self.probes)
        except RolloutTaxError as exc:
            self._end(sandbox, exc)
            raise
        with self._lock:
            self._open[id(sandbox)] = sandbox
            self._handed[id(sandbox)] = time.perf_counter()
        self.journal.write(BEGIN, rollout.to_dict())
        return sandbox

    def end(self, sandbox: Sandbox, error: BaseException | str | None = None) -> None:
        """End the rollout ``sandbox`` served: delete the sandbox (teardown timed) and record
        it, ``passed`` or, with ``error``, ``failed`` with its reason. Safe to call twice."""
        with self._lock:
            if self._open.pop(id(sandbox), None) is None:
                return
        self._end(sandbox, error)

    @contextlib.contextmanager
    def rollout(self, task: str = "rollout") -> Iterator[Sandbox]:
        """:meth:`start`, then :meth:`end` however the block ends (an exception fails it)."""
        sandbox = self.start(task)
        try:
            yield sandbox
        except BaseException as exc:
            self.end(sandbox, exc)
            raise
        self.end(sandbox)

    def close(self) -> None:
        """End every rollout still open as ``interrupted``, remove whatever this recorder's
        session left on the substrate, and release its client."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            still_open = list(self._open.values())
            self._open.clear()
        for sandbox in still_open:
            self._end(sandbox, None, outcome="interrupted")
        try:
            self.substrate.reap(self.session)
        finally:
            self.substrate.close()
            self.journal.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _new_rollout(self, task: str) -> Rollout:
        """A record for the next attempt of ``task`` by this recorder (1, 2, ...)."""
        with self._lock:
            if self._closed:
                raise UsageError("this recorder is closed: start rollouts inside its block")
            attempt = self._attempts[task] = self._attempts.get(task, 0) + 1
        name = self.substrate.name
        test = f"{task}[{rollout_param(name, attempt)}]"  # as pytest names a test's rounds
        return Rollout(test=test, substrate=name, round=attempt)

    def _end(
        self, sandbox: Sandbox, error: BaseException | str | None, outcome: str | None = None
    ) -> None:
        rollout = sandbox.rollout
        with self._lock:
            handed = self._handed.pop(id(sandbox), None)
        try:
            sandbox.close()
        except RolloutTaxError as exc:
            rollout.fail(f"teardown: {reason_of(exc, limit=None)}")
        if handed is not None:
            measure_think(rollout, handed - sandbox.started)
        if error is not None:
            rollout.fail(failure_reason(error))
        rollout.outcome = outcome or ("failed" if rollout.error else "passed")
        infra.settle(rollout)
        self.journal.write(END, rollout.to_dict())


def record(
    substrate: str,
    out: str | os.PathLike[str],
    *,
    probes: int = PROBES,
    timeout: float | None = None,
    **options: Any,
) -> Recorder:
    """A :class:`Recorder` of rollouts on ``substrate`` (a name or a variant, as
    ``--substrate`` takes it, with ``options`` as ``--substrate-opt`` gives them) into the
    directory ``out``; use it as a context manager so that it closes."""
    return Recorder(substrate, out, probes=probes, timeout=timeout, **options)


def measure_think(rollout: Rollout, handed_at: float) -> None:
    """Give each step its think time: the gap since the previous step returned, or, for the
    first, since the sandbox was handed over (``handed_at``: seconds after its create request)."""
    ready = handed_at
    for step in rollout.steps:
        if step.at_s is None:
            continue
        step.think_s = max(step.at_s - ready, 0.0)
        ready = step.at_s + step.wall_s


def start_failed(rollout: Rollout, error: RolloutTaxError) -> None:
    """Record why ``rollout``'s sandbox did not start, with the plugin's outcomes: a create
    the provider's limiter refused is ``rate_limited`` (not a failure), a claim its controller
    never bound ``unbound``, anything else ``error``."""
    if isinstance(error, RateLimited):
        rollout.outcome = RATE_LIMITED
        rollout.error = rollout.redact(error.provider_message) or None
        return
    rollout.outcome = UNBOUND if isinstance(error, SandboxUnbound) else "error"
    rollout.fail(reason_of(error, limit=None))
    infra.note(rollout, error, "start")
    infra.settle(rollout)


def failure_reason(error: BaseException | str) -> str:
    """Why a rollout failed: a reason given as text, our errors' one line, or the type of any
    other exception (its message may hold what no report should: the plugin records a failed
    test the same way)."""
    if isinstance(error, str):
        return error
    if isinstance(error, RolloutTaxError):
        return reason_of(error, limit=None)
    return f"failed: {type(error).__name__}"


def _substrate(name: str, options: dict[str, Any], session: str) -> Substrate:
    """The substrate ``name`` (a registry name, a built-in variant or one of the current
    directory's pyproject.toml) with ``options`` over its own."""
    registry = Registry.discover()
    tables = variant_tables(Path("pyproject.toml"))
    (spec,) = resolve([name], [], tables, registry.names(), registry.aliases())
    merged = spec.options | options
    return registry.create(spec.name, spec.kind, session_id=session, **merged)
