"""The prebuilt step helpers: a rebuild from the source makes the same bytes, and the helper of
the other machine runs (under qemu's user-mode emulator, ``scripts/ensure-qemu``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.substrates import open_substrate

from pytest_rollout_tax.core import stepper

ROOT = Path(__file__).resolve().parents[2]
#: The machine whose helper this host cannot run by itself, and its emulator.
OTHER = "aarch64" if stepper.host_machine() == "x86_64" else "x86_64"
QEMU = f"qemu-{OTHER}-static"


def test_the_packaged_helpers_are_a_rebuild_of_the_source_byte_for_byte():
    """What CI checks: scripts/build-stepper --check rebuilds both with the pinned zig."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build-stepper"), "--check"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "match a rebuild from source" in done.stdout


@pytest.fixture(scope="module")
def qemu() -> str:
    found = shutil.which(QEMU)
    assert found, f"{QEMU} is a test prerequisite (scripts/ensure-qemu)"
    return found


@pytest.fixture
def other_helper() -> Path:
    path, why = stepper.prebuilt(OTHER)
    assert path is not None, why
    return path


def test_the_other_machines_helper_says_it_runs(qemu, other_helper):
    done = subprocess.run([qemu, str(other_helper), "--check"], capture_output=True, check=False)
    assert (done.returncode, done.stdout) == (0, stepper.CHECK_OUTPUT)


def test_the_other_machines_helper_serves_a_session(
    qemu, other_helper, request, tmp_path, monkeypatch
):
    """A local session whose helper is the other machine's, run by the emulator: it passes
    the session's --check, then serves its steps (their parent is that helper's server)."""
    emulated = tmp_path / stepper.NAME
    emulated.write_text(f'#!/bin/sh\nexec {qemu} {other_helper} "$@"\n')
    emulated.chmod(0o755)
    chosen = stepper.Helper(emulated, "prebuilt")
    monkeypatch.setattr(stepper, "for_machine", lambda machine: chosen)
    with open_substrate("local-session", request) as substrate, substrate.start(timeout=60) as box:
        assert box.rollout.step_path == "prebuilt"
        server = box.exec("tr '\\0' ' ' < /proc/$PPID/cmdline").stdout
        assert server.startswith(f"{qemu} {other_helper} --serve ")
        result = box.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
