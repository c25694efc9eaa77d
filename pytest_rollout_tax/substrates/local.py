"""``local``: a fresh temporary directory per sandbox, commands as child processes.

The embedded default and the floor every other substrate is compared against: its overhead
is the cost of spawning a process.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..contract import file_error
from ..errors import SandboxStartError, StepTimeout
from ..record import PhaseClock, Rollout
from ..sandbox import RawResult, Sandbox, Substrate, process_alive

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
_WORKDIR = re.compile(re.escape(WORKDIR_PREFIX) + r"(?P<session>[0-9a-f]+)-(?P<pid>\d+)-\w+")


@dataclass
class LocalOptions:
    #: Where the per-sandbox directories are made (default: the system temp directory).
    root: str | None = None
    #: Extra environment variables for every command.
    env: dict[str, str] = field(default_factory=dict)


class LocalSandbox(Sandbox):
    """Each step is a child process in a session of its own; closing kills what they left."""

    def __init__(self, *, base_env: dict[str, str], **kwargs) -> None:
        super().__init__(**kwargs)
        self._base_env = base_env
        self._leftovers = Leftovers(kwargs["workdir"])

    def _run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        environment = self._base_env | dict(env) if env else self._base_env
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
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise StepTimeout(f"local: step ran past its {timeout:g} s timeout; killed") from None
        except BaseException:  # Ctrl-C, SIGTERM: the step's processes go first
            _kill_group(process)
            raise
        self._leftovers.step_ended(process.pid)
        code = process.returncode
        return RawResult(128 - code if code < 0 else code, stdout, stderr)  # signals as sh does

    def _write(self, path: str, data: bytes) -> None:
        target = Path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # a file where a directory is needed
            raise file_error(NotADirectoryError, path) from None
        target.write_bytes(data)

    def _read(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def _destroy(self) -> None:
        self._leftovers.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _not_started(exc: OSError, cwd: str) -> RawResult:
    """A command that could not start, reported as a shell does: 127 not found, 126 not run."""
    if exc.filename == cwd:
        return RawResult(127, b"", f"cwd {cwd}: {exc.strerror}\n".encode())
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    return RawResult(code, b"", f"{exc.filename}: {exc.strerror}\n".encode())


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a running step's process group (its leader is not reaped yet: the id is still
    the step's) and collect the step."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


class Leftovers:
    """What a sandbox's steps left running, found and killed when it closes.

    A step's process group that outlives the step is remembered with the clock tick the step
    ended at. At close, a group with a member started by then is still the step's (a group
    id is not reused while the group lives) and is killed whole; so is any process whose
    working directory is inside the workdir (it left its group, but not the sandbox).
    """

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        #: The id of each group (and session) a step left running -> the tick the step ended.
        self.groups: dict[int, int] = {}

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
        for group in proven:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


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

    def _create(self, *, rollout: Rollout, labels: dict[str, str], clock: PhaseClock) -> Sandbox:
        prefix = f"{WORKDIR_PREFIX}{self.session_id}-{os.getpid()}-"  # the labels of a workdir
        try:
            workdir = tempfile.mkdtemp(prefix=prefix, dir=self.root)
        except OSError as exc:
            raise SandboxStartError(
                f"{self.name}: cannot make a workdir in {self.root}: {exc.strerror}"
            ) from None
        clock.mark("create")
        base_env = {"PATH": DEFAULT_PATH, "HOME": workdir, "LANG": "C.UTF-8", "TMPDIR": workdir}
        return LocalSandbox(workdir=workdir, rollout=rollout, base_env=base_env | self.options.env)

    @property
    def root(self) -> str:
        return os.path.abspath(self.options.root or tempfile.gettempdir())

    def reap(self, session_id: str | None = None) -> int:
        """Remove the workdirs of ``session_id``; with None, those of sessions no longer alive."""
        removed = 0
        for path in Path(self.root).glob(f"{WORKDIR_PREFIX}{session_id or '*'}-*"):
            labels = _WORKDIR.fullmatch(path.name)
            if not labels or not path.is_dir():
                continue
            if session_id is None and process_alive(int(labels["pid"])):
                continue  # a running session's sandbox
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
        return removed
