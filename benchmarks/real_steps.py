"""The real steps the docker benchmarks time on every path (run as scripts: this directory is on
sys.path): the same argv for our transports, SWE-ReX ``Command`` and the held-shell floor, and
that floor, a shell held open on an attached exec."""

from __future__ import annotations

import contextlib
import re
import shlex

import docker

#: Seconds the held shell waits for any answer before the run fails instead of hanging.
STEP_TIMEOUT_S = 120.0

#: A small repository for ``git status``, made in every container before the samples.
REPO = "/tmp/rtx-bench-repo"
MAKE_REPO = (
    f"rm -rf {REPO} && mkdir -p {REPO} && cd {REPO} && git init -q && "
    "for i in 1 2 3 4 5 6 7 8 9 10; do echo line $i > file$i.txt; done && git add . && "
    "git -c user.email=bench@example.invalid -c user.name=bench commit -qm init && "
    "echo changed >> file1.txt && echo new > untracked.txt"
)
#: Exactly 1,000,000 bytes of text (62-character lines) on stdout.
ONE_MB = 1_000_000
BIG = f"yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU | head -c {ONE_MB}"

#: name: argv. The argv is what every path runs, as it is (the floor's shell line quotes it).
STEPS: dict[str, list[str]] = {
    "/bin/true": ["/bin/true"],
    "echo hi": ["echo", "hi"],
    "ls /": ["ls", "/"],
    "git status": ["git", "-C", REPO, "status"],
    "1 MB out": ["sh", "-c", BIG],
}


def held_shell_line(argv: list[str]) -> str:
    """The raw floor: the line a shell kept open runs to fork and exec ``argv``: ``(exec
    ARGV)``, so that a program the shell also has as a builtin (``echo``) is still forked and
    exec'd (no cwd, variables, timeout, relay or stderr sentinel)."""
    return f"(exec {shlex.join(argv)})"


def check_output(name: str, output: bytes | str) -> None:
    """RuntimeError unless the 1 MB step returned its megabyte (the others: anything)."""
    if name == "1 MB out" and len(output) < ONE_MB:
        raise RuntimeError(f"{name}: expected {ONE_MB} bytes of output, got {len(output)}")


class AttachedShell:
    """The floor of a session: one ``sh`` on an exec with stdin attached, a sentinel per command.

    Docker frames the connection's output (8-byte header: stream, 0, 0, 0, size); only stdout
    (stream 1) is kept. Bare on purpose: no subshell, no timeout wrapper, no stderr sentinel.
    """

    MARKER = "__rollout_tax_floor__"

    def __init__(self, api: docker.APIClient, container_id: str) -> None:
        exec_id = api.exec_create(container_id, ["sh"], stdin=True)["Id"]
        self._response = api.exec_start(exec_id, socket=True)
        self._socket = getattr(self._response, "_sock", self._response)  # SocketIO -> socket
        self._socket.settimeout(STEP_TIMEOUT_S)
        self._pending = bytearray()
        self._end = re.compile(rf"\n{self.MARKER} (\d+)\n\Z".encode())

    def run(self, line: str) -> bytes:
        """Run ``line``; its stdout. RuntimeError if it exits non-zero."""
        self._socket.sendall(f"{line}\nprintf '\\n%s %d\\n' {self.MARKER} $?\n".encode())
        stdout = bytearray()
        while (end := self._end.search(stdout, max(len(stdout) - 64, 0))) is None:
            stdout += self._stdout(self._receive())
        if end[1] != b"0":
            raise RuntimeError(f"floor-attached-shell: {line!r} exited {int(end[1])}")
        return bytes(stdout[: end.start()])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._response.close()

    def _receive(self) -> bytes:
        data = self._socket.recv(1 << 18)
        if not data:
            raise RuntimeError("floor-attached-shell: the shell ended")
        return data

    def _stdout(self, data: bytes) -> bytes:
        """The stdout payload of the whole frames received so far."""
        self._pending += data
        stdout = bytearray()
        while len(self._pending) >= 8:
            size = int.from_bytes(self._pending[4:8], "big")
            if len(self._pending) < 8 + size:
                break
            if self._pending[0] == 1:
                stdout += self._pending[8 : 8 + size]
            del self._pending[: 8 + size]
        return bytes(stdout)
