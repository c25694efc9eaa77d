"""A SWE-ReX deployment and runtime backed by any substrate (``pip install
'pytest-rollout-tax[swerex]'``): SWE-agent, and the RL environments built on SWE-ReX, run
their commands in our sandboxes, each one a recorded step.

    with record("docker-session", out="runs/") as recorder:
        deployment = RecordedDeployment(recorder, task="django__django-11099")
        await deployment.start()                  # a fresh sandbox: the cold start
        runtime = deployment.runtime
        await runtime.create_session(CreateBashSessionRequest())
        await runtime.run_in_session(BashAction(command="cd /repo && git status"))
        await deployment.stop()                   # teardown; the rollout is recorded

Inside pytest, ``SandboxRuntime(sandbox)`` wraps the ``sandbox`` fixture's sandbox.

A SWE-ReX bash session is a shell that lives between commands. Here every command is one
step of its own (as on the exec transport), and the session's state is carried from one to
the next in a file in the sandbox: the exported variables, the shell functions and the working
directory persist; unexported variables, aliases and shell options do not. Interactive
commands (``is_interactive_command``) are refused, naming the command.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

from swerex.deployment.abstract import AbstractDeployment
from swerex.deployment.hooks.abstract import CombinedDeploymentHook, DeploymentHook
from swerex.exceptions import (
    CommandTimeoutError,
    DeploymentNotStartedError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    BashAction,
    BashInterruptAction,
    BashObservation,
    CloseBashSessionResponse,
    CloseResponse,
    CloseSessionRequest,
    Command,
    CommandResponse,
    CreateBashSessionResponse,
    CreateSessionRequest,
    IsAliveResponse,
    ReadFileRequest,
    ReadFileResponse,
    UploadRequest,
    UploadResponse,
    WriteFileRequest,
    WriteFileResponse,
)

from ..core.sandbox import ExecResult, Sandbox
from ..errors import StepTimeout
from ..recording import Recorder
from .versions import require

SUPPORTED = ">=1.4,<2"
VERSION = require("swe-rex", SUPPORTED, "pytest_rollout_tax.integrations.swe_rex")

#: One session command: the session's saved state restored, the command run with stderr
#: merged (as SWE-ReX's terminal merges it), the state saved again however the command ends.
SESSION_SCRIPT = r"""
__rtx_state=$1 __rtx_command=$2
set --
if [ -f "$__rtx_state" ]; then . "$__rtx_state" >/dev/null 2>&1; fi
__rtx_save() {
    { export -p; declare -f; printf 'cd -- %q\n' "$PWD"; } >"$__rtx_state" 2>/dev/null
}
trap __rtx_save EXIT
exec 2>&1
eval "$__rtx_command"
"""
#: A command's argv with its stderr merged into its stdout.
MERGED = ["sh", "-c", 'exec 2>&1; exec "$@"', "sh"]
#: Where a session's state lives in the sandbox.
STATE_DIR = "/tmp/.rollout-tax-swerex"


class SandboxRuntime(AbstractRuntime):
    """SWE-ReX's runtime over one :class:`~pytest_rollout_tax.Sandbox`: sessions, commands
    and files, each call one step (run in a thread, so the event loop goes on)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.sessions: set[str] = set()

    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        if self.sandbox.closed:
            return IsAliveResponse(is_alive=False, message="the sandbox is closed")
        return IsAliveResponse(is_alive=True)

    async def create_session(self, request: CreateSessionRequest) -> CreateBashSessionResponse:
        if request.session in self.sessions:
            raise SessionExistsError(f"session {request.session} already exists")
        self.sessions.add(request.session)
        await self._run(f"rm -f {shlex.quote(self._state(request.session))}", None)
        output = ""
        for source in request.startup_source:
            result = await self._session_step(request.session, f"source {source}", None)
            output += result.stdout
        return CreateBashSessionResponse(output=output)

    async def run_in_session(self, action: BashAction | BashInterruptAction) -> BashObservation:
        if action.session not in self.sessions:
            raise SessionDoesNotExistError(f"session {action.session!r} does not exist")
        if isinstance(action, BashInterruptAction):  # a step that timed out was killed whole
            return BashObservation(output="", exit_code=0)
        if action.is_interactive_command or action.is_interactive_quit:
            raise NotImplementedError(
                f"interactive command {action.command!r}: a recorded session runs each "
                "command to its end"
            )
        result = await self._session_step(action.session, action.command, action.timeout)
        if action.check == "raise" and result.exit_code != 0:
            message = f"Command {action.command!r} failed with exit code {result.exit_code}"
            message = f"{action.error_msg}: {message}" if action.error_msg else message
            raise NonZeroExitCodeError(f"{message}. Here is the output:\n{result.stdout!r}")
        exit_code = None if action.check == "ignore" else result.exit_code
        return BashObservation(output=result.stdout, exit_code=exit_code)

    async def close_session(self, request: CloseSessionRequest) -> CloseBashSessionResponse:
        if request.session not in self.sessions:
            raise SessionDoesNotExistError(f"session {request.session!r} does not exist")
        self.sessions.discard(request.session)
        return CloseBashSessionResponse()

    async def execute(self, command: Command) -> CommandResponse:
        argv = command.command  # a string runs through sh -c, as SWE-ReX's shell=True
        if command.shell and not isinstance(argv, str):
            argv = shlex.join(argv)
        if command.merge_output_streams:
            argv = f"exec 2>&1; {argv}" if isinstance(argv, str) else [*MERGED, *argv]
        result = await self._run(argv, command.timeout, env=command.env, cwd=command.cwd)
        if command.check and result.exit_code != 0:
            message = f"Command {command.command!r} failed with exit code {result.exit_code}"
            message = f"{command.error_msg}: {message}" if command.error_msg else message
            raise NonZeroExitCodeError(
                f"{message}. Stdout:\n{result.stdout!r}\nStderr:\n{result.stderr!r}"
            )
        return CommandResponse(
            stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code
        )

    async def read_file(self, request: ReadFileRequest) -> ReadFileResponse:
        data = await asyncio.to_thread(self.sandbox.read_file, request.path, True)
        assert isinstance(data, bytes)
        content = data.decode(request.encoding or "utf-8", request.errors or "strict")
        return ReadFileResponse(content=content)

    async def write_file(self, request: WriteFileRequest) -> WriteFileResponse:
        await asyncio.to_thread(self.sandbox.write_file, request.path, request.content)
        return WriteFileResponse()

    async def upload(self, request: UploadRequest) -> UploadResponse:
        """A local file (or every file under a local directory) written into the sandbox."""
        source = Path(request.source_path)
        if source.is_file():
            files = {request.target_path: source}
        else:
            found = sorted(path for path in source.rglob("*") if path.is_file())
            files = {f"{request.target_path}/{p.relative_to(source).as_posix()}": p for p in found}
        for target, path in files.items():
            await asyncio.to_thread(self.sandbox.write_file, target, path.read_bytes())
        return UploadResponse()

    async def close(self) -> CloseResponse:
        self.sessions.clear()
        return CloseResponse()

    def _state(self, session: str) -> str:
        return f"{STATE_DIR}-{session}"

    async def _session_step(self, session: str, command: str, timeout: float | None) -> ExecResult:
        argv = ["bash", "-c", SESSION_SCRIPT, "bash", self._state(session), command]
        return await self._run(argv, timeout)

    async def _run(self, argv: str | list[str], timeout: float | None, **kwargs: Any) -> ExecResult:
        """One step; our timeout is SWE-ReX's CommandTimeoutError, which agents expect."""
        try:
            return await asyncio.to_thread(self.sandbox.exec, argv, timeout=timeout, **kwargs)
        except StepTimeout as exc:
            raise CommandTimeoutError(f"timeout after {timeout} seconds: {exc}") from None


class RecordedDeployment(AbstractDeployment):
    """A SWE-ReX deployment whose ``start`` takes a fresh sandbox from a
    :class:`~pytest_rollout_tax.Recorder` and whose ``stop`` ends the rollout it recorded."""

    def __init__(self, recorder: Recorder, task: str = "rollout") -> None:
        self.recorder = recorder
        self.task = task
        self._hooks = CombinedDeploymentHook()
        self._runtime: SandboxRuntime | None = None

    def add_hook(self, hook: DeploymentHook) -> None:
        self._hooks.add_hook(hook)

    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        return await self.runtime.is_alive(timeout=timeout)

    async def start(self) -> None:
        self._hooks.on_custom_step(f"Starting a {self.recorder.substrate.name} sandbox")
        sandbox = await asyncio.to_thread(self.recorder.start, self.task)
        self._runtime = SandboxRuntime(sandbox)

    async def stop(self, error: BaseException | str | None = None) -> None:
        """End the rollout (``error``: why it failed); safe to call twice."""
        if self._runtime is None:
            return
        runtime, self._runtime = self._runtime, None
        await asyncio.to_thread(self.recorder.end, runtime.sandbox, error)

    @property
    def runtime(self) -> SandboxRuntime:
        if self._runtime is None:
            # swerex leaves this exception's __init__(message=...) unannotated
            raise DeploymentNotStartedError()  # type: ignore[no-untyped-call]
        return self._runtime

    def __del__(self) -> None:  # SWE-ReX's stops from a finalizer: the recorder's close does
        pass
