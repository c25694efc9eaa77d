"""The step helper: the package's prebuilt one or one built here, chosen per sandbox machine,
and run as a session step runs it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_rollout_tax.core import stepper

#: ELF's e_machine of each machine the package has a helper for.
ELF_MACHINES = {"x86_64": 62, "aarch64": 183}


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    """Every test chooses anew, with the default switch and a cache of its own."""
    monkeypatch.delenv(stepper.SWITCH, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    stepper.prebuilt.cache_clear()
    yield
    stepper.prebuilt.cache_clear()


@pytest.fixture(scope="module", params=["prebuilt", "built"])
def helper(request) -> str:
    """The host's helper as the package ships it, and as this host's compiler builds it."""
    if request.param == "prebuilt":
        path, why = stepper.prebuilt(stepper.host_machine())
    else:
        path, why = stepper.built(stepper.host_machine())
    assert path is not None, f"{why} (cc and a static C library are test prerequisites)"
    return str(path)


def run(helper: str, *args: str, cwd: str = "/") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [helper, *args], capture_output=True, stdin=subprocess.DEVNULL, cwd=cwd, check=False
    )


def copy_of_prebuilt(tmp_path: Path, monkeypatch) -> Path:
    """A copy of the package's prebuilt folder the package then uses."""
    copy = tmp_path / "prebuilt"
    shutil.copytree(stepper.prebuilt_dir(), copy)
    monkeypatch.setattr(stepper, "prebuilt_dir", lambda: copy)
    return copy


# -- the prebuilt helpers --------------------------------------------------------------------


def test_the_manifest_holds_the_packaged_source_and_every_helper():
    manifest = stepper.manifest()
    assert manifest is not None
    assert manifest["source_sha256"] == stepper.sha256(stepper.source())
    assert set(manifest["helpers"]) == set(stepper.TARGETS)
    for arch, entry in manifest["helpers"].items():
        data = (stepper.prebuilt_dir() / arch / stepper.NAME).read_bytes()
        assert stepper.sha256(data) == entry["sha256"]


@pytest.mark.parametrize("arch", list(stepper.TARGETS))
def test_each_prebuilt_helper_is_a_static_linux_program_for_its_machine(arch):
    data = (stepper.prebuilt_dir() / arch / stepper.NAME).read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2  # 64-bit
    assert int.from_bytes(data[18:20], "little") == ELF_MACHINES[arch]
    assert b"/lib/ld-" not in data and b"ld-linux" not in data  # no interpreter: static
    assert len(data) < 100_000


@pytest.mark.parametrize(
    ("machine", "arch"),
    [*((a, a) for a in stepper.TARGETS), ("arm64", "aarch64"), ("amd64", "x86_64")],
)
def test_by_default_a_sandbox_gets_the_prebuilt_helper_of_its_machine(machine, arch):
    chosen = stepper.for_machine(machine)
    assert (chosen.origin, chosen.why) == ("prebuilt", None)
    assert chosen.path == stepper.prebuilt_dir() / arch / stepper.NAME


def test_a_host_without_a_compiler_still_gets_the_prebuilt_helper(monkeypatch):
    """A slim CI image (issue 51): before, no compiler meant the relay."""
    monkeypatch.setenv("CC", "no-such-compiler")
    assert stepper.for_machine(stepper.host_machine()).origin == "prebuilt"


@pytest.mark.parametrize("system", ["Darwin", "Windows"])
def test_a_host_that_is_not_linux_gets_the_helper_of_its_linux_sandbox(monkeypatch, system):
    """Docker Desktop on macOS (issue 51): before, a host that is not Linux built none."""
    monkeypatch.setattr(stepper.platform, "system", lambda: system)
    assert stepper.for_machine("aarch64").origin == "prebuilt"


def test_a_sandbox_of_another_machine_than_the_host_gets_its_own_helper():
    """An arm64 sandbox from an x86_64 client (issue 51): before, the host's machine's."""
    other = next(arch for arch in stepper.TARGETS if arch != stepper.host_machine())
    chosen = stepper.for_machine(other)
    assert chosen.path is not None and chosen.path.parent.name == other


def test_a_machine_without_a_helper_is_the_relay_and_says_which(monkeypatch):
    chosen = stepper.for_machine("riscv64")
    assert chosen.path is None and chosen.origin == "relay"
    assert chosen.why == (
        "no prebuilt helper for 'riscv64' (only x86_64, aarch64); "
        f"this host builds for {stepper.host_machine()}, not riscv64"
    )


def test_a_sandbox_that_does_not_say_its_machine_is_the_relay():
    assert stepper.for_machine("").why == "the sandbox did not say its machine (uname -m)"


def test_helpers_built_from_another_source_are_not_used(monkeypatch):
    """An edited stepper.c without a rebuild: this host builds its own; another machine's
    sandbox relays, and says why."""
    edited = stepper.source() + b"\n"
    monkeypatch.setattr(stepper, "source", lambda: edited)
    assert stepper.for_machine(stepper.host_machine()).origin == "built"
    other = next(arch for arch in stepper.TARGETS if arch != stepper.host_machine())
    why = stepper.for_machine(other).why
    assert why is not None and why.startswith("the prebuilt helpers were built from another")


def test_a_helper_that_does_not_match_its_manifest_is_not_used(monkeypatch, tmp_path):
    copy = copy_of_prebuilt(tmp_path, monkeypatch)
    with (copy / "aarch64" / stepper.NAME).open("ab") as helper:
        helper.write(b"\0")
    chosen = stepper.for_machine("aarch64")
    assert chosen.origin != "prebuilt"
    assert "the prebuilt helper for aarch64 does not match its manifest's sha256" in chosen.why


def test_an_install_without_prebuilt_helpers_builds_here(monkeypatch, tmp_path):
    monkeypatch.setattr(stepper, "prebuilt_dir", lambda: tmp_path / "none")
    assert stepper.for_machine(stepper.host_machine()).origin == "built"


def test_a_helper_installed_without_its_mode_runs_from_a_copy_in_the_cache(monkeypatch, tmp_path):
    copy = copy_of_prebuilt(tmp_path, monkeypatch)
    (copy / stepper.host_machine() / stepper.NAME).chmod(0o644)
    chosen = stepper.for_machine(stepper.host_machine())
    assert chosen.origin == "prebuilt" and chosen.path.is_relative_to(stepper.cache_dir())
    assert chosen.path.name == stepper.NAME
    assert run(str(chosen.path), "--check").stdout == stepper.CHECK_OUTPUT


# -- the switch ------------------------------------------------------------------------------


def test_off_is_the_relay(monkeypatch):
    monkeypatch.setenv(stepper.SWITCH, "off")
    assert stepper.for_machine("x86_64") == stepper.relay("ROLLOUT_TAX_STEPPER=off")


def test_build_compiles_with_this_hosts_compiler_into_the_cache(monkeypatch):
    monkeypatch.setenv(stepper.SWITCH, "build")
    chosen = stepper.for_machine(stepper.host_machine())
    assert chosen.origin == "built" and chosen.path.is_relative_to(stepper.cache_dir())


def test_build_without_a_compiler_is_the_relay_and_says_so(monkeypatch):
    monkeypatch.setenv(stepper.SWITCH, "build")
    monkeypatch.setenv("CC", "no-such-compiler")
    why = stepper.for_machine(stepper.host_machine()).why
    assert why == "this host has no C compiler ($CC, musl-gcc, cc or gcc)"


def test_build_for_another_machine_is_the_relay(monkeypatch):
    monkeypatch.setenv(stepper.SWITCH, "build")
    other = next(arch for arch in stepper.TARGETS if arch != stepper.host_machine())
    assert (
        stepper.for_machine(other).why
        == f"this host builds for {stepper.host_machine()}, not {other}"
    )


def test_a_switch_of_no_known_value_is_the_relay_naming_it(monkeypatch):
    monkeypatch.setenv(stepper.SWITCH, "fast")
    why = stepper.for_machine("x86_64").why
    assert why == "ROLLOUT_TAX_STEPPER='fast' is not one of prebuilt, build, off"


# -- what it does (both the prebuilt helper and one built here) -------------------------------


def test_it_says_it_runs(helper):
    assert run(helper, "--check").stdout == stepper.CHECK_OUTPUT


def test_a_step_runs_in_its_cwd_with_its_variables_and_streams_apart(helper, tmp_path):
    script = 'echo "$A $PWD"; pwd -P; echo oops >&2; exit 3'
    done = run(helper, "0", str(tmp_path), "-e", "A=1 2", "--", "sh", "-c", script)
    assert done.returncode == 3
    assert done.stdout == f"1 2 {tmp_path}\n{tmp_path.resolve()}\n".encode()
    assert done.stderr == b"oops\n"


def test_kill_0_ends_the_step_not_its_relay_so_its_output_arrives(helper):
    script = "trap 'kill 0' EXIT; (sleep 30 >/dev/null 2>&1 &); echo hi"
    done = run(helper, "0", "/", "--", "sh", "-c", script)
    assert done.stdout == b"hi\n"


def test_late_background_output_is_the_steps(helper):
    done = run(helper, "0", "/", "--", "sh", "-c", "(sleep 0.2; echo late) & echo now")
    assert done.stdout == b"now\nlate\n"


def test_the_deadline_kills_the_whole_group_and_reports_137(helper):
    script = "echo started; sleep 30 & sleep 30"
    done = run(helper, "0.3", "/", "--", "sh", "-c", script)
    assert (done.returncode, done.stdout) == (137, b"started\n")


@pytest.mark.parametrize(
    ("args", "code", "reason"),
    [
        (["0", "/no-such-dir", "--", "true"], 127, b"/no-such-dir"),
        (["0", "/", "--", "no-such-program"], 127, b"no-such-program: not found"),
        (["0", "/", "--", "{data}"], 126, b"{data}: Permission denied"),
        (["0", "/", "-e"], 2, b"usage"),
    ],
)
def test_what_cannot_run_is_126_or_127_with_the_reason(helper, tmp_path, args, code, reason):
    data = tmp_path / "data"
    data.write_text("not a program")
    done = run(helper, *(arg.replace("{data}", str(data)) for arg in args))
    reason = reason.replace(b"{data}", str(data).encode())
    assert done.returncode == code and reason in done.stderr
