"""The one Sandbox: every step of every backend is checked, timed and recorded here.

A Sandbox joins what a substrate created (a :class:`Handle`) with the transport that reaches
it. Its public methods check their arguments against the contract (:mod:`.contract`), time
each call to the transport and record it in the rollout's :class:`~.record.Rollout`. It knows
its substrate only as an :class:`Owner`: a name, and a way to delete what it created.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, overload

from ..errors import RolloutTaxError, SandboxError, SandboxStartError, StepTimeout, TeardownTimeout
from . import contract, infra
from .bounded import Overrun, bounded
from .record import Rollout, Step, StepKind
from .transport import NOOP, Transport


@dataclass
class Handle:
    """What a substrate created for one sandbox; a backend adds what it needs to reach it."""

    #: The sandbox's own name: container id, pod name, instance id, E2B id, local directory.
    id: str
    #: Its working directory, where relative paths resolve.
    workdir: str


class Owner(Protocol):
    """What a Sandbox needs of the substrate that created it."""

    name: str

    def destroy(self, handle: Handle) -> None:
        """Delete the environment and return once it is gone."""


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one ``exec``: a non-zero exit is a result, not an exception."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    #: Whether output past the cap (``--rollout-output-cap``, per stream) was discarded.
    truncated: bool = False
    #: Bytes of output that came on both streams, those past the cap included.
    output_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class Sandbox:
    """One live environment for one rollout: run commands and move files, every call timed.

    Steps are serialized: a step called from a second thread waits for the running one to end
    (the wait is not part of its time), so threads may share a sandbox on every transport.
    """

    def __init__(
        self,
        *,
        substrate: Owner,
        handle: Handle,
        transport: Transport,
        rollout: Rollout,
        timeout: float | None = None,
        started: float | None = None,
        ready_timeout: float | None = None,
        teardown_timeout: float | None = None,
    ) -> None:
        self.substrate = substrate
        self.handle = handle
        self.transport = transport
        self.rollout = rollout
        #: The default timeout of every step, in seconds (None: none).
        self.timeout = timeout
        #: The budgets, in seconds (None: none), of its first no-op and of its delete.
        self.ready_timeout = ready_timeout
        self.teardown_timeout = teardown_timeout
        self._started = time.perf_counter() if started is None else started
        self._closed = False
        self._step_lock = threading.Lock()

    @property
    def id(self) -> str:
        """The environment's own name: container id, pod name, instance id, ..."""
        return self.handle.id

    @property
    def workdir(self) -> str:
        return self.handle.workdir

    @property
    def started(self) -> float:
        """When its create request was sent (``time.perf_counter``): steps' ``at_s`` count
        from here."""
        return self._started

    def path(self, path: str) -> str:
        """``path`` resolved against :attr:`workdir` (absolute paths are kept as they are)."""
        return contract.resolve_path(self.workdir, path)

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run ``cmd``: a string through ``sh -c``, a list as it is. One recorded step."""
        __tracebackhide__ = True  # pytest's traceback shows no frame of ours, nor its arguments
        argv = contract.check_command(cmd)
        timeout = self.timeout if timeout is None else contract.check_timeout(timeout)
        env = contract.check_env(env)
        if env:
            self.rollout.secrets.update(env.values())
        workdir = contract.resolve_path(self.workdir, cwd or ".", "cwd")
        with self._step_lock:
            self._check_open()
            started = time.perf_counter()
            raw = None
            try:
                raw = self.transport.run(argv, timeout=timeout, env=env, cwd=workdir)
            except RolloutTaxError as exc:  # raised here: the transport's frames hold ``env``
                if isinstance(exc, StepTimeout):
                    self.rollout.budget_exceeded = exc.budget
                infra.note(self.rollout, exc, "step")
                raise exc.with_traceback(None) from None
            finally:
                wall = time.perf_counter() - started
                if raw is None:
                    self._record("exec", started, wall)
                else:
                    self._record("exec", started, wall, raw.exit_code, raw.size)
        return ExecResult(
            exit_code=raw.exit_code,
            stdout=raw.stdout.decode("utf-8", "replace"),
            stderr=raw.stderr.decode("utf-8", "replace"),
            duration_s=wall,
            truncated=raw.truncated,
            output_bytes=raw.size,
        )

    def write_file(self, path: str, data: str | bytes) -> None:
        """Write text (UTF-8) or bytes to ``path``, creating parent directories. One step."""
        __tracebackhide__ = True
        payload = contract.payload(data)
        target = contract.check_file_path(self.workdir, path)
        with self._step("write_file"), self._file_errors(target, contract.WHY_NOT_WRITE):
            self.transport.write(target, payload, timeout=self.timeout)

    @overload
    def read_file(self, path: str, binary: Literal[False] = False) -> str: ...
    @overload
    def read_file(self, path: str, binary: Literal[True]) -> bytes: ...
    def read_file(self, path: str, binary: bool = False) -> str | bytes:
        """Read ``path``: text (UTF-8, invalid bytes replaced), or bytes if ``binary``. One step."""
        __tracebackhide__ = True
        target = self.path(path)
        with self._step("read_file"), self._file_errors(target, contract.WHY_NOT_READ):
            payload = self.transport.read(target, timeout=self.timeout)
        return payload if binary else payload.decode("utf-8", "replace")

    def probe(self, count: int) -> list[float]:
        """Time ``count`` no-op execs (the substrate's per-action tax); not recorded as steps."""
        with self._step_lock:
            samples = [self._probe_once() for _ in range(count)]
        self.rollout.action_probes_s.extend(samples)
        return samples

    def _probe_once(self) -> float:
        """One no-op exec, timed."""
        started = time.perf_counter()
        result = self.transport.run(list(NOOP), timeout=self.timeout, env=None, cwd=self.workdir)
        elapsed = time.perf_counter() - started
        if result.exit_code != 0:
            raise SandboxError(f"the no-op probe exited {result.exit_code}: {result.reason()}")
        return elapsed

    def first_exec(self, timeout: float | None = None) -> None:
        """Run the no-op that ends a cold start (not a step) within ``timeout`` (the ready
        budget, never a step's); SandboxStartError if it fails."""
        first = self.transport.run(list(NOOP), timeout=timeout, env=None, cwd=self.workdir)
        if first.exit_code != 0:
            raise SandboxStartError(
                f"{self.substrate.name}: the first no-op exec exited {first.exit_code}: "
                f"{first.reason()}"
            )

    @contextlib.contextmanager
    def unrecorded(self) -> Iterator[None]:
        """Steps made inside are not the rollout's (a ``prepare`` function's setup)."""
        count = len(self.rollout.steps)
        try:
            yield
        finally:
            del self.rollout.steps[count:]

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Delete the environment (timed as teardown) within its teardown budget (past it,
        TeardownTimeout: the delete goes on, and the session's reap is the backstop); safe to
        call more than once."""
        if self._closed:
            return
        self._closed = True
        self.rollout.stamp("teardown")
        started = time.perf_counter()
        try:
            with contextlib.suppress(Exception):  # the environment goes, whatever its shell did
                self.transport.close()
            name = self.substrate.name
            try:
                bounded(
                    lambda: self.substrate.destroy(self.handle),
                    self.teardown_timeout,
                    late=lambda _: None,
                    name=f"rollout-tax-teardown-{name}",
                )
            except Overrun:
                self.rollout.budget_exceeded = TeardownTimeout.budget
                raise TeardownTimeout(
                    f"{name}: the delete ran past its {self.teardown_timeout:g} s budget "
                    f"({name}.teardown_timeout); the session's reap removes the sandbox"
                ) from None
        except RolloutTaxError as exc:
            infra.note(self.rollout, exc, "teardown")
            raise
        finally:
            ended = time.perf_counter()
            self.rollout.stamp("gone")
            self.rollout.teardown_s = ended - started
            self.rollout.trajectory_s = ended - self._started

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------------

    def _record(
        self,
        kind: StepKind,
        started: float,
        wall_s: float,
        exit_code: int | None = None,
        output_bytes: int | None = None,
    ) -> None:
        """Append one step that began at ``started`` (``time.perf_counter``)."""
        step = Step(
            kind=kind,
            wall_s=wall_s,
            exit_code=exit_code,
            output_bytes=output_bytes,
            at_s=started - self._started,
        )
        self.rollout.steps.append(step)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"{self.rollout.substrate or 'sandbox'}: the sandbox is closed")

    @contextlib.contextmanager
    def _file_errors(self, path: str, why_script: str) -> Iterator[None]:
        """Give a backend's unspecific OSError the contract's type, asking the sandbox why."""
        try:
            yield
        except tuple(contract.FILE_ERRORS.values()):
            raise
        except OSError as exc:
            argv = ["sh", "-c", why_script, "sh", path]
            why = self.transport.run(argv, timeout=self.timeout, env=None, cwd="/")
            error = contract.file_error_for(why.exit_code, path)
            if error is None:
                raise
            raise error from exc

    @contextlib.contextmanager
    def _step(self, kind: StepKind) -> Iterator[None]:
        """Hold the step lock and record one file step, whether it succeeds or raises."""
        with self._step_lock:
            self._check_open()
            started = time.perf_counter()
            try:
                yield
            except RolloutTaxError as exc:
                infra.note(self.rollout, exc, "step")
                raise
            finally:
                self._record(kind, started, time.perf_counter() - started)
