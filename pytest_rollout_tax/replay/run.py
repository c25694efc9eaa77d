"""Replay a recorded trajectory in a sandbox: one recorded step per recorded action."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from ..core.record import Rollout, Step
from .model import FileEdit, RecordedStep, RecordedTrajectory

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
    #: Exact mode: steps whose exit code or output size differs from the recording's (None in
    #: shape mode).
    divergent_steps: int | None
    #: Exact mode: the divergent steps by kind (``exit_code``, ``output_size``; a step can
    #: diverge both ways); None in shape mode.
    divergence: dict[str, int] | None = None

    @classmethod
    def of(cls, trajectory: RecordedTrajectory, mode: Mode) -> ReplayInfo:
        """The entry of ``trajectory`` replayed in ``mode``, before its first step."""
        return cls(
            source=trajectory.source,
            format=trajectory.format,
            mode=mode,
            trajectory_id=trajectory.trajectory_id,
            recorded_steps=len(trajectory.steps),
            divergent_steps=0 if mode == "exact" else None,
            divergence=dict.fromkeys(DIVERGENCE_KINDS, 0) if mode == "exact" else None,
        )

    def to_dict(self) -> dict:
        return asdict(self)


def replay(sandbox: Sandbox, trajectory: RecordedTrajectory, mode: Mode) -> ReplayInfo:
    """Replay every action of ``trajectory`` as exactly one step of ``sandbox``'s rollout.

    Only the substrate's failures raise (a lost sandbox, a step past its timeout); an action
    that fails as it did, or differently, is a result.
    """
    info = ReplayInfo.of(trajectory, mode)
    rollout = sandbox.rollout
    rollout.replay = info.to_dict()
    for recorded in trajectory.steps:
        before = len(rollout.steps)
        try:
            if mode == "shape" or (recorded.command is None and recorded.edit is None):
                code = sandbox.exec(shape_command(recorded.output_bytes, recorded.exit_code))
                code = code.exit_code
            elif recorded.edit is not None:
                code = _edit(sandbox, recorded.edit)
            else:
                code = sandbox.exec(harness_command(recorded.command)).exit_code
        finally:
            _as_one_step(rollout, before, recorded)
        if mode == "exact":
            made = rollout.steps[-1] if len(rollout.steps) > before else None
            kinds = divergences(recorded, code, made.output_bytes if made else None)
            if kinds:
                info.divergent_steps += 1
                for kind in kinds:
                    info.divergence[kind] += 1
                rollout.replay = info.to_dict()
    return info


#: The ways a step replayed exactly can diverge from its recording.
DIVERGENCE_KINDS = ("exit_code", "output_size")
#: An output size diverges when it is off by more than this share of the recorded size and
#: by more than OUTPUT_SLACK bytes (a timestamp or a path in the output is no divergence).
OUTPUT_SHARE = 0.5
OUTPUT_SLACK = 64


def divergences(recorded: RecordedStep, code: int, output_bytes: int | None) -> list[str]:
    """How a replayed step differs from its recording, of what the recording knows."""
    kinds = []
    if recorded.exit_code is not None and recorded.exit_code != code:
        kinds.append("exit_code")
    expected = recorded.output_bytes
    if expected is not None and output_bytes is not None:
        off = abs(output_bytes - expected)
        if off > OUTPUT_SLACK and off > OUTPUT_SHARE * expected:
            kinds.append("output_size")
    return kinds


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
        )
    ]
