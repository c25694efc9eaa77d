"""Replay a recorded trajectory in a sandbox: one recorded step per recorded action."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..core.record import Rollout, Step
from ..errors import ReplayFailure, RolloutTaxError, StepTimeout, reason_of
from .model import FileEdit, RecordedStep, RecordedTrajectory, think_known

if TYPE_CHECKING:
    from ..core.sandbox import Sandbox

Mode = Literal["shape", "exact"]
MODES: tuple[Mode, ...] = ("shape", "exact")
#: The step timeout of a recording that names none, in seconds.
DEFAULT_TIMEOUT_S = 300.0
#: Prints ``$1`` bytes and exits with ``$2``, with shell builtins only (any ``sh``: dash,
#: bash, busybox ash), so a minimal image replays as well as a full one.
SHAPE_SCRIPT = (
    "n=$1; s=xxxxxxxxxxxxxxxx; s=$s$s; s=$s$s; s=$s$s; s=$s$s; s=$s$s; s=$s$s; "
    'while [ "$n" -ge 1024 ]; do printf %s "$s"; n=$((n - 1024)); done; '
    'if [ "$n" -gt 0 ]; then printf "%.${n}s" "$s"; fi; exit "$2"'
)
#: Runs ``$1`` with bash when the sandbox has it (as the harnesses run their commands), else sh.
HARNESS_SHELL = 'command -v bash >/dev/null 2>&1 && exec bash -c "$1"; exec sh -c "$1"'
#: The file errors an emulated edit returns as its result, as the editor tool would.
FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
#: The exit status of a shell asked to run a command it cannot find.
NOT_FOUND = 127
#: Exact mode's kinds of divergent step: a harness tool the image lacks (SWE-agent's
#: ``open``, ``edit``...), another command the image lacks (exit 127), a different exit code,
#: an output of another size.
DIVERGENCES = ("harness_tool", "not_found", "exit_code", "output_size")
#: An output size diverges when it is off by more than this share of the recorded size and
#: by more than OUTPUT_SLACK bytes (a timestamp or a path in the output is no divergence).
OUTPUT_SHARE = 0.5
OUTPUT_SLACK = 64


def harness_command(command: str) -> list[str]:
    """A recorded command line as the harnesses ran it: bash if there is one, else sh."""
    return ["sh", "-c", HARNESS_SHELL, "sh", command]


def shape_command(output_bytes: int | None, exit_code: int | None) -> list[str]:
    """The step that reproduces an action's shape: its output size and exit code (a code
    outside 0-255 exits as the shell would report it, modulo 256)."""
    return ["sh", "-c", SHAPE_SCRIPT, "sh", str(output_bytes or 0), str((exit_code or 0) % 256)]


@dataclass
class ReplayInfo:
    """A replayed rollout's ``replay`` entry in the report."""

    source: str
    format: str
    mode: Mode
    trajectory_id: str
    recorded_steps: int
    #: Exact mode: steps that did not replay as recorded (None in shape mode).
    divergent_steps: int | None
    #: Exact mode: ``divergent_steps`` by kind (DIVERGENCES; a step can diverge in its exit
    #: code and its output size at once); None in shape mode.
    divergence: dict[str, int] | None = field(default=None)
    #: Whether the recording has each step's think time: ``recorded``, ``partial`` or
    #: ``unknown`` (the format records none: unknown, not 0).
    think_time: str = "unknown"
    #: Steps whose think or command time is unknown because the recording's clock stepped
    #: back across it (left out of the think-time statistics, not 0).
    clock_back_steps: int = 0

    @classmethod
    def of(cls, trajectory: RecordedTrajectory, mode: Mode) -> ReplayInfo:
        """The entry of ``trajectory`` replayed in ``mode``, before its first step."""
        exact = mode == "exact"
        return cls(
            source=trajectory.source,
            format=trajectory.format,
            mode=mode,
            trajectory_id=trajectory.trajectory_id,
            recorded_steps=len(trajectory.steps),
            divergent_steps=0 if exact else None,
            divergence=dict.fromkeys(DIVERGENCES, 0) if exact else None,
            think_time=think_known(trajectory),
            clock_back_steps=sum(bool(step.clock_back) for step in trajectory.steps),
        )

    def diverged(self, kinds: list[str]) -> None:
        """Count one divergent step, of ``kinds`` (an exact replay's: only it counts them)."""
        if self.divergent_steps is None or self.divergence is None:
            raise ValueError(f"a {self.mode} replay counts no divergent steps")
        self.divergent_steps += 1
        for kind in kinds:
            self.divergence[kind] += 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replay(sandbox: Sandbox, trajectory: RecordedTrajectory, mode: Mode) -> ReplayInfo:
    """Replay every action of ``trajectory`` as exactly one step of ``sandbox``'s rollout.

    Only the substrate's failures raise, as a ReplayFailure (a lost sandbox, a step past its
    timeout); an action that fails as it did, or differently, is a result.
    """
    info = ReplayInfo.of(trajectory, mode)
    rollout = sandbox.rollout
    rollout.replay = info.to_dict()
    for number, recorded in enumerate(trajectory.steps, 1):
        before = len(rollout.steps)
        try:
            code = _run(sandbox, recorded, mode)
        except RolloutTaxError as exc:
            raise ReplayFailure(
                _failure(trajectory, number, recorded, exc), reason_of(exc)
            ) from None
        finally:
            _as_one_step(rollout, before, recorded)
        if mode == "exact":
            made = rollout.steps[-1] if len(rollout.steps) > before else None
            kinds = divergences(recorded, code, made.output_bytes if made else None)
            if kinds:
                info.diverged(kinds)
                rollout.replay = info.to_dict()
    return info


def _run(sandbox: Sandbox, recorded: RecordedStep, mode: Mode) -> int:
    """Replay one action; its exit code."""
    if mode != "shape" and recorded.edit is not None:
        return _edit(sandbox, recorded.edit)
    if mode == "shape" or recorded.command is None:  # shape, or neither command nor edit
        return sandbox.exec(shape_command(recorded.output_bytes, recorded.exit_code)).exit_code
    return sandbox.exec(harness_command(recorded.command)).exit_code


def divergences(recorded: RecordedStep, replayed: int, output_bytes: int | None) -> list[str]:
    """How an exact replay departs from the recording (DIVERGENCES): at most one of its exit
    code's kinds, and its output size. A command the image cannot run (exit 127) diverges even
    where no code was recorded, and so does a harness tool's step that fails where the
    recording has no code (SWE-agent records none; a plain image may hold another program of
    the tool's name, as Debian's ``open``)."""
    kinds = []
    if recorded.tool is not None and replayed != 0 and recorded.exit_code is None:
        kinds.append("harness_tool")  # 127: not installed; else another program of its name
    elif replayed == NOT_FOUND and recorded.exit_code != NOT_FOUND:
        kinds.append("harness_tool" if recorded.tool is not None else "not_found")
    elif recorded.exit_code is not None and recorded.exit_code != replayed:
        kinds.append("exit_code")
    expected = recorded.output_bytes
    if expected is not None and output_bytes is not None:
        off = abs(output_bytes - expected)
        if off > OUTPUT_SLACK and off > OUTPUT_SHARE * expected:
            kinds.append("output_size")
    return kinds


def _failure(
    trajectory: RecordedTrajectory, number: int, recorded: RecordedStep, error: Exception
) -> str:
    """The one line of a replay step the substrate failed."""
    what = recorded.command
    if what is None and recorded.edit is not None:
        what = f"{recorded.edit.command} {recorded.edit.path}"
    line = (what or "the step that reproduces its shape").strip().splitlines() or [""]
    text = f"{trajectory.source}: {trajectory.trajectory_id}: step {number} `{line[0][:120]}`"
    if isinstance(error, StepTimeout):
        limit = trajectory.timeout or DEFAULT_TIMEOUT_S
        origin = (
            f"the recording's {trajectory.timeout_field}"
            if trajectory.timeout is not None
            else "the default for a recording that names none"
        )
        return f"{text}: ran past its {limit:g} s step timeout (from {origin}); killed"
    return f"{text}: {error}"


def _edit(sandbox: Sandbox, edit: FileEdit) -> int:
    """An editor action through the file API: 0 when it worked, 1 when the file was not
    there to edit (as the editor tool reports it), or the old text was not found."""
    try:
        if edit.command == "create":
            sandbox.write_file(edit.path, edit.file_text or "")
            return 0
        text = sandbox.read_file(edit.path)
        if edit.command == "view":
            return 0
        if edit.command == "str_replace":
            if not edit.old_str or edit.old_str not in text:
                return 1
            text = text.replace(edit.old_str, edit.new_str or "", 1)
        else:  # insert: after line insert_line (0: at the top)
            lines = text.splitlines(keepends=True)
            at = min(max(edit.insert_line or 0, 0), len(lines))
            new = edit.new_str or ""
            lines.insert(at, new if new.endswith("\n") else new + "\n")
            text = "".join(lines)
        sandbox.write_file(edit.path, text)
    except FILE_ERRORS:
        return 1
    return 0


def _as_one_step(rollout: Rollout, before: int, recorded: RecordedStep) -> None:
    """Make the steps one action recorded since ``before`` into one step (an edit reads, then
    writes), with the recording's think and command times."""
    made = rollout.steps[before:]
    if not made:
        return
    last = made[-1]
    sizes = [step.output_bytes for step in made if step.output_bytes is not None]
    rollout.steps[before:] = [
        Step(
            kind=last.kind,
            wall_s=sum(step.wall_s for step in made),
            exit_code=last.exit_code,
            output_bytes=sum(sizes) if sizes else None,
            think_s=recorded.think_s,
            recorded_s=recorded.recorded_s,
            at_s=made[0].at_s,
            tool=recorded.tool,
            call_id=recorded.call_id,
        )
    ]
