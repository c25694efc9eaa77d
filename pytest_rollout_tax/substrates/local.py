"""``local``: a fresh temporary directory per sandbox, commands as child processes.

The embedded default and the floor every other substrate is compared against: its overhead
is the cost of spawning a process.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

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
    def __init__(self, *, base_env: dict[str, str], **kwargs) -> None:
        super().__init__(**kwargs)
        self._base_env = base_env

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
        except FileNotFoundError as exc:
            missing = exc.filename if exc.filename != cwd else f"directory {cwd}"
            return RawResult(127, b"", f"{missing}: not found\n".encode())
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise StepTimeout(f"local: step ran past its {timeout:g} s timeout; killed") from None
        return RawResult(process.returncode, stdout, stderr)

    def _write(self, path: str, data: bytes) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def _read(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def _destroy(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


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
        return self.options.root or tempfile.gettempdir()

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
