"""``local``: a fresh temporary directory per sandbox, commands as child processes.

The embedded default and the floor every other substrate is compared against: its overhead
is the cost of spawning a process.
"""

from __future__ import annotations

import os
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
from ..sandbox import RawResult, Sandbox, Substrate

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
            raise StepTimeout(f"local: {argv!r} ran past its {timeout} s timeout") from None
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
        try:
            workdir = tempfile.mkdtemp(
                prefix=f"rollout-tax-{self.session_id}-", dir=self.options.root
            )
        except OSError as exc:
            where = self.options.root or tempfile.gettempdir()
            raise SandboxStartError(
                f"{self.name}: cannot make a workdir in {where}: {exc.strerror}"
            ) from None
        clock.mark("create")
        base_env = {"PATH": DEFAULT_PATH, "HOME": workdir, "LANG": "C.UTF-8", "TMPDIR": workdir}
        return LocalSandbox(workdir=workdir, rollout=rollout, base_env=base_env | self.options.env)
