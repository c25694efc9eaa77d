"""``local``: a fresh temporary directory per sandbox, commands as child processes.

The embedded default and the floor every other substrate is compared against: its overhead
is the cost of spawning a process (``exec``), or of a line to a shell it keeps (``session``).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..core.contract import file_error
from ..core.processes import process_alive
from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.shell import SHELL, STDERR, STDOUT, Duplex, ShellTransport
from ..core.substrate import (
    ROLLOUT_LABEL,
    SESSION_LABEL,
    Substrate,
    SubstrateOptions,
)
from ..core.transport import Output, RawResult, Transport, step_timeout
from ..errors import NotRegularFileError, SandboxStartError

#: The host's standard tools, plus the directory of the Python running the tests.
DEFAULT_PATH = os.pathsep.join(
    [
        os.path.dirname(sys.executable),
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ]
)


WORKDIR_PREFIX = "rollout-tax-"
#: Every command of a local sandbox has this variable, set to its workdir: reaping a workdir
#: left by a killed session kills every process that carries it, wherever it went.
SANDBOX_VARIABLE = "ROLLOUT_TAX_SANDBOX"
#: While a session's shell is silent, how often it is polled: a background child of a dead
#: shell can hold its pipes open, so they alone would not end.
LIVENESS_S = 0.5
#: A workdir's name: its labels (the session, the process, the rollout), then mkdtemp's part.
_WORKDIR = re.compile(re.escape(WORKDIR_PREFIX) + r"(?P<session>[0-9a-f]+)-(?P<pid>\d+)-[\w-]+")


@dataclass
class LocalOptions(SubstrateOptions):
    #: Where the per-sandbox directories are made (default: the system temp directory).
    root: str | None = None
    #: Extra environment variables for every command.
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class LocalHandle(Handle):
    """A sandbox's directory, the environment of its commands, and what they left running."""

    env: dict[str, str]
    leftovers: Leftovers


class LocalExec(Transport):
    """``exec``: each step a child process in a session of its own."""

    name = "exec"

    def __init__(self, handle: LocalHandle, *, substrate: str) -> None:
        self._handle = handle
        self._substrate = substrate

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        environment = self._handle.env | dict(env) if env else self._handle.env
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return _not_started(exc, cwd)
        try:
            stdout, stderr = _read_capped(process, timeout, self.output_cap)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            assert timeout is not None  # only a deadline expires
            raise step_timeout(self._substrate, timeout) from None
        except BaseException:  # Ctrl-C, SIGTERM: the step's processes go first
            _kill_group(process)
            raise
        self._handle.leftovers.step_ended(process.pid)
        code = process.returncode
        return RawResult.of(128 - code if code < 0 else code, stdout, stderr)  # signals as sh does

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        """Direct file I/O in the workdir on this host: nothing to time out."""
        target = Path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # a file where a directory is needed
            raise file_error(NotADirectoryError, path) from None
        target.write_bytes(data)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        # O_NONBLOCK: a FIFO opens at once (no writer needed); then only a file is read
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as opened:
            mode = os.fstat(opened.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise file_error(IsADirectoryError, path)
            if not stat.S_ISREG(mode):
                raise file_error(NotRegularFileError, path)
            return opened.read()


class LocalShell(Duplex):
    """``session``: one ``sh`` child in a session of its own, talked to over pipes."""

    def __init__(self, handle: LocalHandle) -> None:
        self._handle = handle
        self._process = subprocess.Popen(
            SHELL,
            cwd=handle.workdir,
            env=handle.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._stdin, stdout, stderr = pipes(self._process)
        self._selector = selectors.DefaultSelector()
        self._selector.register(stdout, selectors.EVENT_READ, STDOUT)
        self._selector.register(stderr, selectors.EVENT_READ, STDERR)

    def send(self, data: bytes) -> None:
        with contextlib.suppress(BrokenPipeError):  # the shell is gone: receive() says so
            self._stdin.write(data)
            self._stdin.flush()

    def receive(self, timeout: float | None) -> tuple[int, bytes]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._selector.get_map():
            left = LIVENESS_S if deadline is None else deadline - time.monotonic()
            ready = self._selector.select(max(min(left, LIVENESS_S), 0))
            if self._process.poll() is not None:
                return 0, b""  # the shell died (what its children still write is not its)
            if not ready:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError
                continue
            key = ready[0][0]
            chunk = os.read(key.fd, 1 << 16)
            if chunk:
                return key.data, chunk
            self._selector.unregister(key.fileobj)
        return 0, b""

    def close(self) -> None:
        # The session's commands and what they left share the shell's session: recorded now,
        # while the shell still holds the id, they are killed with the sandbox.
        process = self._process
        self._handle.leftovers.step_ended(process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        self._selector.close()
        for pipe in pipes(process):
            with contextlib.suppress(OSError):
                pipe.close()
        process.wait()


def pipes(process: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes], IO[bytes]]:
    """The stdin, stdout and stderr pipes of a child started with all three piped."""
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    assert stdin is not None and stdout is not None and stderr is not None  # all piped
    return stdin, stdout, stderr


def _not_started(exc: OSError, cwd: str) -> RawResult:
    """A command that could not start, reported as a shell does: 127 not found, 126 not run."""
    if exc.filename == cwd:
        return RawResult(127, b"", f"cwd {cwd}: {exc.strerror}\n".encode())
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    return RawResult(code, b"", f"{exc.filename}: {exc.strerror}\n".encode())


def _read_capped(
    process: subprocess.Popen[bytes], timeout: float | None, cap: int
) -> tuple[Output, Output]:
    """A child's stdout and stderr to their end, each kept up to ``cap`` bytes, then its exit;
    TimeoutExpired past ``timeout`` (checked between reads: a flood cannot outrun it)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    assert process.stdout is not None and process.stderr is not None  # both piped
    outputs = {process.stdout.fileno(): Output(cap), process.stderr.fileno(): Output(cap)}
    with selectors.DefaultSelector() as selector, contextlib.ExitStack() as closing:
        for pipe in (process.stdout, process.stderr):
            closing.enter_context(pipe)
            selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(process.args, timeout or 0.0)
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    outputs[key.fd].add(chunk)
                else:
                    selector.unregister(key.fileobj)
    left = None if deadline is None else max(deadline - time.monotonic(), 0)
    process.wait(left)
    stdout, stderr = outputs.values()
    return stdout, stderr


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a running child's process group (its leader is not reaped yet: the id is still
    the child's) and collect the child."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class Leftovers:
    """What a sandbox's steps left running, found and killed when it closes.

    A step's process group that outlives the step is remembered with the clock tick the step
    ended at. At close, a group with a member started by then is still the step's (a group
    id is not reused while the group lives) and is killed whole; so is any process whose
    working directory is inside the workdir (it left its group, but not the sandbox), and
    any process started since the sandbox was made that carries its :data:`SANDBOX_VARIABLE`
    (it left its group, its session and the workdir, as ``setsid`` and ``cd /`` do).
    """

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        #: The id of each group (and session) a step left running -> the tick the step ended.
        self.groups: dict[int, int] = {}
        #: The tick the sandbox was made at: no process of it started before.
        self.made = _ticks()

    def step_ended(self, group: int) -> None:
        try:
            os.killpg(group, 0)  # one syscall: does any process of the step still run?
        except ProcessLookupError:
            return
        self.groups[group] = _ticks() + 1

    def kill(self) -> None:
        proven, strays = set(), []
        try:
            processes = list(_processes())
        except FileNotFoundError:  # no /proc: the groups alone, on trust
            proven = set(self.groups)
            processes = []
        inside = os.path.join(self.workdir, "")
        processes = [p for p in processes if p[0] not in (os.getpid(), os.getppid())]
        for pid, group, session, started, cwd in processes:
            for owner in (group, session):
                if started <= self.groups.get(owner, -1):
                    proven.add(owner)
            if os.path.join(cwd, "").startswith(inside):
                strays.append(pid)
        strays += [pid for pid, group, session, *_ in processes if {group, session} & proven]
        escaped = (p for p in processes if p[3] >= self.made and p[0] not in strays)
        strays += [pid for pid, *_ in escaped if _marked(pid, self.workdir)]
        for group in proven:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def kill_marked(workdir: str) -> None:
    """SIGKILL every process of the sandbox at ``workdir``: those whose environment has its
    :data:`SANDBOX_VARIABLE` and those working inside it (for a session killed outright)."""
    inside = os.path.join(workdir, "")
    with contextlib.suppress(FileNotFoundError):  # no /proc: nothing to find them by
        for pid, _, _, _, cwd in _processes():
            if pid in (os.getpid(), os.getppid()):
                continue
            if os.path.join(cwd, "").startswith(inside) or _marked(pid, workdir):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)


def _marked(pid: int, workdir: str) -> bool:
    """Whether process ``pid``'s environment has the :data:`SANDBOX_VARIABLE` of ``workdir``."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            found = environ.read()
    except OSError:  # gone, or another user's
        return False
    return f"\0{SANDBOX_VARIABLE}={workdir}\0".encode() in b"\0" + found + b"\0"


def _ticks() -> int:
    """Now, in the clock ticks since boot that /proc/PID/stat gives start times in."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def _processes() -> Iterator[tuple[int, int, int, int, str]]:
    """(pid, group, session, start tick, cwd) of every process this user may look at."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:  # gone, or another user's
            continue
        yield int(entry.name), int(fields[2]), int(fields[3]), int(fields[19]), cwd


class LocalSubstrate(Substrate):
    kind = "local"
    Options = LocalOptions
    transports = ("exec", "session")

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> LocalHandle:
        prefix = f"{WORKDIR_PREFIX}{labels[SESSION_LABEL]}-{os.getpid()}-{labels[ROLLOUT_LABEL]}-"
        try:
            workdir = tempfile.mkdtemp(prefix=prefix, dir=self.root)
        except OSError as exc:
            raise SandboxStartError(
                f"{self.name}: cannot make a workdir in {self.root}: {exc.strerror}"
            ) from None
        clock.mark("create")
        env = {"PATH": DEFAULT_PATH, "HOME": workdir, "LANG": "C.UTF-8", "TMPDIR": workdir}
        env[SANDBOX_VARIABLE] = workdir
        return LocalHandle(
            id=workdir, workdir=workdir, env=env | self.options.env, leftovers=Leftovers(workdir)
        )

    def _transport(self, handle: LocalHandle) -> Transport:
        if self.options.transport == "session":
            return ShellTransport(lambda: LocalShell(handle), substrate=self.name, on_host=True)
        return LocalExec(handle, substrate=self.name)

    def destroy(self, handle: LocalHandle) -> None:
        handle.leftovers.kill()
        shutil.rmtree(handle.workdir, ignore_errors=True)

    @property
    def root(self) -> str:
        return os.path.abspath(self.options.root or tempfile.gettempdir())

    def reap(self, session_id: str | None = None) -> int:
        """Remove the workdirs of ``session_id``; with None, those of sessions no longer alive."""
        return self._remove(f"{WORKDIR_PREFIX}{session_id or '*'}-*", spare_live=not session_id)

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Remove the workdir (and kill the processes) of one create's ``labels``."""
        session, rollout = labels[SESSION_LABEL], labels[ROLLOUT_LABEL]
        return self._remove(f"{WORKDIR_PREFIX}{session}-*-{rollout}-*", spare_live=False)

    def _remove(self, pattern: str, *, spare_live: bool) -> int:
        """Remove the workdirs ``pattern`` matches, sparing those of a live process if
        ``spare_live``; how many."""
        removed = 0
        for path in Path(self.root).glob(pattern):
            labels = _WORKDIR.fullmatch(path.name)
            if not labels or not path.is_dir():
                continue
            if spare_live and process_alive(int(labels["pid"])):
                continue  # a running session's sandbox
            kill_marked(str(path))
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
        return removed
