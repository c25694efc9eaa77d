"""The data plane of a sandbox, and the step policy every backend shares.

A :class:`Transport` runs commands and moves files in one live sandbox; the Sandbox times
every call to it. Backends write the transport primitives; what a timeout, a killed step, a
command that cannot start or an error message look like is decided here, once.
"""

from __future__ import annotations

import re
import shlex
import signal
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ..errors import StepTimeout
from .record import PhaseClock

#: The command timed as the per-action tax, and run once as the last step of a cold start.
NOOP = ("true",)
#: The exit code of a step killed by ``timeout -s KILL`` (128 + SIGKILL), as a shell reports it.
KILLED = 128 + signal.SIGKILL
#: The default cap on each stream of one step's output, in bytes: what comes past it is
#: counted and discarded (``--rollout-output-cap``).
OUTPUT_CAP = 64 << 20
#: How runc reports a command that cannot start, whichever runtime relays it.
_OCI_FAILED = re.compile(r"OCI runtime exec failed: (?P<reason>.*)", re.S)
_OCI_NOT_FOUND = ("executable file not found", "no such file or directory", "chdir to cwd")


class Output:
    """One stream of a step's output as it arrives: kept up to ``cap`` bytes, the rest counted."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        #: Bytes that came, those past the cap included.
        self.size = 0

    def add(self, chunk: bytes | bytearray | memoryview) -> None:
        self.size += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]


@dataclass(frozen=True)
class RawResult:
    """What a transport's ``run`` returns: exit code and undecoded output."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    #: Bytes of output that came on both streams, past the cap included (None: all are kept).
    output_bytes: int | None = None

    @classmethod
    def of(cls, exit_code: int, stdout: Output, stderr: Output) -> RawResult:
        """The result of streams read through :class:`Output`."""
        return cls(exit_code, bytes(stdout.data), bytes(stderr.data), stdout.size + stderr.size)

    @classmethod
    def capped(cls, exit_code: int, stdout: bytes, stderr: bytes, cap: int) -> RawResult:
        """The result of streams a client read whole, cut to ``cap`` bytes each."""
        return cls(exit_code, stdout[:cap], stderr[:cap], len(stdout) + len(stderr))

    @property
    def size(self) -> int:
        """Bytes of output that came."""
        kept = len(self.stdout) + len(self.stderr)
        return kept if self.output_bytes is None else self.output_bytes

    @property
    def truncated(self) -> bool:
        """Whether output past the cap was discarded."""
        return self.size > len(self.stdout) + len(self.stderr)

    def reason(self) -> str:
        """Its stderr on one line, for an error message."""
        return one_line(self.stderr.decode("utf-8", "replace"), 160) or "no output"


class Transport(ABC):
    """How steps reach one live sandbox: run a command, write and read files.

    Every step has a timeout in seconds (None: no limit of the step's own). ``run`` kills a
    command past it (its whole process group) and raises StepTimeout; a file step past it is
    abandoned with StepTimeout, or with SandboxError where that leaves the transport unusable.
    """

    #: The name users select it by (``docker.transport=session``).
    name: ClassVar[str]
    #: Bytes of each output stream a step keeps (the substrate sets it when it starts one).
    output_cap: int = OUTPUT_CAP
    #: What serves the steps of a transport with a step helper (``session``), once open: the
    #: helper, ``prebuilt`` or ``built`` (``core/stepper.py``), or the shell's ``relay``, and
    #: then why (``relay_reason``). None elsewhere.
    step_path: str | None = None
    relay_reason: str | None = None

    def open(self, clock: PhaseClock) -> None:  # noqa: B027 - most transports open nothing
        """Called during the cold start, before the first no-op; mark a phase if it costs."""

    @abstractmethod
    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        """Run ``argv`` in ``cwd`` with ``env`` added; exit status and output as a result,
        each stream kept up to :attr:`output_cap` bytes (read through :class:`Output`)."""

    @abstractmethod
    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        """Write ``data`` to absolute ``path``, creating parent directories."""

    @abstractmethod
    def read(self, path: str, *, timeout: float | None) -> bytes:
        """The bytes of absolute ``path``."""

    def close(self) -> None:  # noqa: B027 - most transports hold nothing open
        """Release what :meth:`open` holds; the sandbox is deleted right after."""


# -- the step policy -------------------------------------------------------------------------


def timeout_limit(timeout: float | None) -> str:
    """A step's timeout as ``timeout(1)`` and the step helper take it (``0``: no limit)."""
    return "0" if timeout is None else f"{max(timeout, 0.001):.3f}"


def timeout_wrapped(argv: Sequence[str], timeout: float | None) -> list[str]:
    """``argv`` under ``timeout -s KILL``, which kills the step's whole process group inside
    the sandbox at the deadline: every timed step, the no-op probe's too (what it costs is
    part of the tax)."""
    if timeout is None:
        return list(argv)
    return ["timeout", "-s", "KILL", timeout_limit(timeout), *argv]


def with_env(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    """``argv`` run through ``env(1)`` with ``env`` added (names need not be shell words)."""
    if not env:
        return list(argv)
    return ["env", "--", *(f"{name}={value}" for name, value in env.items()), *argv]


def shell_line(argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str) -> str:
    """One shell line that enters ``cwd`` (exit 127 if it cannot) and execs ``argv`` with
    ``env`` added: for data planes that take a command line (Kubernetes, SSH, a session)."""
    return f"cd -- {shlex.quote(cwd)} || exit 127; exec {shlex.join(with_env(argv, env))}"


def was_timed_out(timeout: float | None, code: int, elapsed: float) -> bool:
    """Whether a wrapped step's exit ``code`` is the wrapper's kill at the deadline (a step
    killed with 137 for another reason, before its deadline, is a result)."""
    return code == KILLED and timeout is not None and elapsed >= timeout


def step_timeout(substrate: str, timeout: float, fate: str = "killed") -> StepTimeout:
    """The error of a step past its timeout. It names no command (commands may carry secrets)
    and reads the same for every step with this timeout, so the summary counts it as one."""
    return StepTimeout(f"{substrate}: step ran past its {timeout:g} s timeout; {fate}")


def not_started(output: bytes) -> RawResult | None:
    """A runtime's "OCI runtime exec failed" as a shell reports it: 127 for what does not
    exist (program, cwd), 126 for what cannot run; None for any other output."""
    match = _OCI_FAILED.search(output.decode("utf-8", "replace"))
    if match is None:
        return None
    reason = match["reason"]
    code = 127 if any(marker in reason for marker in _OCI_NOT_FOUND) else 126
    return RawResult(code, b"", one_line(match[0]).encode() + b"\n")


def one_line(text: object, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters: for error messages."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
