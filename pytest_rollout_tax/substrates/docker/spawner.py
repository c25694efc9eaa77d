"""A snapshot's prepare, run as children of the container's init (``docker.snapshot=true``).

gVisor restores only the processes of the container's own process tree: a process started by
``docker exec`` (``runsc exec``), and everything it started, is gone after a restore (gVisor
issue 11544). So a template container runs a spawner as its main process, and each command of
the prepare is handed to it through a FIFO: the spawner runs it as its child, and the
``docker exec`` that handed it over relays its output and exit status. A background process
that the prepare leaves is then in the container's tree, and in every restored rollout.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from ...core.transport import RawResult
from .exec import DockerExec

#: Inside the sandbox (gVisor's /tmp is its own memory, kept by the checkpoint).
SPAWN_DIR = "/tmp/rollout-tax-spawn"
#: The template's main process: reads job names from the queue and runs each job's script as
#: its child, stdin /dev/null, output to files, the exit status to the job's FIFO.
SPAWNER = f"""d={SPAWN_DIR}
mkdir -p "$d" && mkfifo "$d/queue.new" && mv "$d/queue.new" "$d/queue" || exit 1
while :; do
  while read -r job; do
    (cd "$d/$job" && sh ./run </dev/null >out 2>err; echo $? >done) &
  done <"$d/queue"
done
"""
ENTRYPOINT = ["sh", "-c", SPAWNER]
#: One command handed to the spawner (``$1``: the job's script), its output and status relayed.
CLIENT = f"""d={SPAWN_DIR}
until [ -p "$d/queue" ]; do sleep 0.01; done
job=$(mktemp -d "$d/job.XXXXXX") || exit 125
printf '%s\\n' "$1" >"$job/run" && mkfifo "$job/done" || exit 125
echo "${{job##*/}}" >"$d/queue"
read -r code <"$job/done"
cat "$job/out"; cat "$job/err" >&2
rm -rf "$job"
exit "$code"
"""


class SpawnerExec(DockerExec):
    """The ``exec`` transport of a snapshot's template: every command runs as the spawner's
    child. A step's timeout ends the relaying exec; the command itself runs on, until the
    checkpoint stops the template."""

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        return super().run(
            ["sh", "-c", CLIENT, "sh", job_script(argv, env, cwd)], timeout=timeout, env=None,
            cwd="/",
        )  # fmt: skip


def job_script(argv: list[str], env: Mapping[str, str] | None, cwd: str) -> str:
    """``argv`` in ``cwd`` with ``env``, as a shell script (127 when ``cwd`` is not a directory)."""
    lines = [f"cd -- {shlex.quote(cwd)} || exit 127"]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in (env or {}).items()]
    return "\n".join([*lines, f"exec {shlex.join(argv)}"])
