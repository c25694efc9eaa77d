"""The Sandbox / Substrate interface every backend implements; every step is timed here.

A backend implements four small methods on its Sandbox (``_run``, ``_write``, ``_read``,
``_destroy``) and one on its Substrate (``_create``). The public methods around them resolve
paths, time each call and record it in the sandbox's :class:`~pytest_rollout_tax.record.Rollout`.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from . import contract
from .errors import RolloutTaxError, SandboxError, SandboxStartError
from .options import parse_options
from .record import PhaseClock, Rollout, Step, StepKind

SESSION_LABEL = "rollout-tax.io/session"
ROLLOUT_LABEL = "rollout-tax.io/rollout"
NOOP = ("true",)


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one ``exec``: a non-zero exit is a result, not an exception."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class RawResult:
    """What a backend's ``_run`` returns: exit code and undecoded output."""

    exit_code: int
    stdout: bytes
    stderr: bytes


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a zombie counts as dead).

    Reaping uses it to spare the sandboxes of a session that is still running here.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):  # no procfs: trust kill()
        return True


def new_id() -> str:
    """A short random id for sessions and rollouts, valid as a label value everywhere."""
    return uuid.uuid4().hex[:12]


def shell_command(argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str) -> list[str]:
    """``argv`` as one ``sh -c`` command that changes to ``cwd`` and adds ``env``.

    For backends whose exec API takes only an argv (Kubernetes, SSH). A ``cwd`` it cannot
    enter is exit 127, as on every substrate; ``env`` names need not be shell identifiers.
    """
    assignments = [f"{name}={value}" for name, value in (env or {}).items()]
    run = shlex.join(["env", "--", *assignments, *argv] if assignments else argv)
    return ["sh", "-c", f"cd -- {shlex.quote(cwd)} || exit 127; exec {run}"]


class Sandbox(ABC):
    """One live environment for one rollout: run commands and move files, every call timed."""

    def __init__(self, *, workdir: str, rollout: Rollout, timeout: float | None = None) -> None:
        self.workdir = workdir
        self.rollout = rollout
        self.timeout = timeout
        self._trajectory_started = time.perf_counter()
        self._closed = False

    # -- the backend interface -------------------------------------------------------------

    @abstractmethod
    def _run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        """Run ``argv`` in absolute ``cwd``; on timeout kill it and raise :class:`StepTimeout`."""

    @abstractmethod
    def _write(self, path: str, data: bytes) -> None:
        """Write ``data`` to absolute ``path``, creating parent directories."""

    @abstractmethod
    def _read(self, path: str) -> bytes:
        """Read absolute ``path``; raise FileNotFoundError when it does not exist."""

    @abstractmethod
    def _destroy(self) -> None:
        """Delete the environment and return once it is gone."""

    def _after_cold_start(self) -> None:  # noqa: B027 - an optional hook
        """Called once the cold start is measured, untimed: for lookups that must not slow it."""

    # -- the public API --------------------------------------------------------------------

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
        argv = contract.check_command(cmd)
        timeout = self.timeout if timeout is None else contract.check_timeout(timeout)
        env = contract.check_env(env)
        workdir = contract.resolve_path(self.workdir, cwd or ".", "cwd")
        self._check_open()
        started = time.perf_counter()
        raw = None
        try:
            raw = self._run(argv, timeout=timeout, env=env, cwd=workdir)
        finally:
            wall = time.perf_counter() - started
            self._record("exec", wall, raw.exit_code if raw else None)
        return ExecResult(
            exit_code=raw.exit_code,
            stdout=raw.stdout.decode("utf-8", "replace"),
            stderr=raw.stderr.decode("utf-8", "replace"),
            duration_s=wall,
        )

    def write_file(self, path: str, data: str | bytes) -> None:
        """Write text (UTF-8) or bytes to ``path``, creating parent directories. One step."""
        payload = contract.payload(data)
        target = contract.check_file_path(self.workdir, path)
        self._check_open()
        with self._step("write_file"), self._file_errors(target, contract.WHY_NOT_WRITE):
            self._write(target, payload)

    def read_file(self, path: str, binary: bool = False) -> str | bytes:
        """Read ``path``: text (UTF-8, invalid bytes replaced), or bytes if ``binary``. One step."""
        target = self.path(path)
        self._check_open()
        with self._step("read_file"), self._file_errors(target, contract.WHY_NOT_READ):
            payload = self._read(target)
        return payload if binary else payload.decode("utf-8", "replace")

    def probe(self, count: int) -> list[float]:
        """Time ``count`` no-op execs (the substrate's per-action tax); not recorded as steps."""
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            result = self._run(list(NOOP), timeout=self.timeout, env=None, cwd=self.workdir)
            samples.append(time.perf_counter() - started)
            if result.exit_code != 0:
                raise SandboxError(
                    f"the no-op probe exited {result.exit_code}: {_first_line(result)}"
                )
        self.rollout.action_probes_s.extend(samples)
        return samples

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Delete the environment (timed as teardown); safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        started = time.perf_counter()
        self._destroy()
        ended = time.perf_counter()
        self.rollout.teardown_s = ended - started
        self.rollout.trajectory_s = ended - self._trajectory_started

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------------

    def _record(self, kind: StepKind, wall_s: float, exit_code: int | None = None) -> None:
        self.rollout.steps.append(Step(kind=kind, wall_s=wall_s, exit_code=exit_code))

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"{self.rollout.substrate or 'sandbox'}: the sandbox is closed")

    @contextlib.contextmanager
    def _file_errors(self, path: str, why_script: str) -> Iterator[None]:
        """Give a backend's unspecific OSError the contract's type, asking the sandbox why."""
        try:
            yield
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            raise
        except OSError as exc:
            argv = ["sh", "-c", why_script, "sh", path]
            why = self._run(argv, timeout=self.timeout, env=None, cwd="/")
            error = contract.file_error_for(why.exit_code, path)
            if error is None:
                raise
            raise error from exc

    @contextlib.contextmanager
    def _step(self, kind: StepKind) -> Iterator[None]:
        """Record one file step, whether it succeeds or raises."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self._record(kind, time.perf_counter() - started)


def _first_line(result: RawResult) -> str:
    """The first line of a result's stderr, for one-line messages."""
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0][:160] if lines else "no output"


class Substrate(ABC):
    """A kind of execution environment; one object per name per process holds the client."""

    #: The registry name of this implementation (``docker``); instances may be named variants.
    kind: ClassVar[str]
    #: A dataclass of the options this substrate accepts (``--substrate-opt NAME.KEY=VALUE``).
    Options: ClassVar[type]
    #: Dollars per hour one sandbox costs, if known (``ec2.price_per_hour``); shown as cost.
    price_per_hour: float | None = None

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        self.name = name or self.kind
        self.session_id = session_id or new_id()
        self.options = parse_options(self.Options, options, owner=self.name)
        self._prepare_lock = threading.Lock()
        self._prepared: RolloutTaxError | bool = False

    def _prepare(self) -> None:  # noqa: B027 - most substrates need nothing more
        """Check, once, what starting a sandbox needs beyond a client (an image, a network).

        Not called for reaping, which needs none of it. Raise a RolloutTaxError if unusable.
        """

    @abstractmethod
    def _create(self, *, rollout: Rollout, labels: dict[str, str], clock: PhaseClock) -> Sandbox:
        """Create and start one sandbox, marking phases on ``clock``; clean up if it fails."""

    def start(self, rollout: Rollout | None = None, *, timeout: float | None = None) -> Sandbox:
        """Create a fresh sandbox and wait for its first no-op exec (the cold start)."""
        timeout = contract.check_timeout(timeout)
        self._ensure_prepared()
        rollout = rollout or Rollout(substrate=self.name)
        rollout.price_per_hour = self.price_per_hour
        labels = {SESSION_LABEL: self.session_id, ROLLOUT_LABEL: new_id()}
        clock = PhaseClock(rollout.phases)
        try:
            sandbox = self._create(rollout=rollout, labels=labels, clock=clock)
        except RolloutTaxError:
            raise
        except Exception as exc:
            raise SandboxStartError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        sandbox.timeout = timeout
        sandbox._trajectory_started = clock.started
        try:
            first = sandbox._run(list(NOOP), timeout=timeout, env=None, cwd=sandbox.workdir)
            if first.exit_code != 0:
                raise SandboxStartError(
                    f"{self.name}: the first no-op exec exited {first.exit_code}: "
                    f"{_first_line(first)}"
                )
            clock.mark("first_exec")
            rollout.cold_start_s = clock.cold_start()
            sandbox._after_cold_start()
        except BaseException:
            with contextlib.suppress(Exception):  # the start error is the one to report
                sandbox.close()
            raise
        return sandbox

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

    def reap(self, session_id: str | None = None) -> int:
        """Remove environments labelled by ``session_id`` (any session if None); return how many."""
        return 0

    def close(self) -> None:  # noqa: B027 - most substrates hold nothing to release
        """Release the client connection."""
