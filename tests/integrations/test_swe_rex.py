"""SWE-ReX's deployment and runtime on our substrates, driven through SWE-ReX's own API:
sessions that keep their state between commands, exit codes, timeouts, files, and the rollout
recorded when the deployment stops."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("swerex", reason="the [swerex] extra is not installed")

from swerex.exceptions import CommandTimeoutError, NonZeroExitCodeError, SessionDoesNotExistError
from swerex.runtime.abstract import (
    BashAction,
    BashInterruptAction,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
)

from pytest_rollout_tax import ConfigError, record
from pytest_rollout_tax.core.record import steps_of
from pytest_rollout_tax.integrations import swe_rex, versions
from pytest_rollout_tax.recording import read


@pytest.fixture(params=["local", "docker-session"])
def substrate(request) -> str:
    """A substrate to run SWE-ReX on; docker's image must be there."""
    if request.param.startswith("docker"):
        request.getfixturevalue("sandbox_image")
    return request.param


async def session_commands(deployment: swe_rex.RecordedDeployment) -> list[tuple[str, int | None]]:
    await deployment.start()
    runtime = deployment.runtime
    await runtime.create_session(CreateBashSessionRequest())
    seen = []
    for command in (
        "mkdir -p /tmp/work && cd /tmp/work && export GREETING=hello && UNEXPORTED=1",
        'greet() { echo "$GREETING from $PWD"; }',
        'greet; echo "[$UNEXPORTED]"',
        "echo to-stderr >&2; false",
        "exit 7",
        "pwd",
    ):
        observation = await runtime.run_in_session(BashAction(command=command, check="silent"))
        seen.append((observation.output, observation.exit_code))
    return seen


def test_a_session_keeps_its_state_and_each_command_is_a_recorded_step(tmp_path, substrate):
    with record(substrate, out=tmp_path, probes=1) as recorder:
        deployment = swe_rex.RecordedDeployment(recorder, task="swe-task")
        seen = asyncio.run(session_commands(deployment))
        asyncio.run(deployment.stop())
    assert seen == [
        ("", 0),
        ("", 0),
        ("hello from /tmp/work\n[]\n", 0),
        ("to-stderr\n", 1),
        ("", 7),
        ("/tmp/work\n", 0),
    ]
    (rollout,) = read(tmp_path).rollouts
    assert rollout["outcome"] == "passed" and rollout["test"] == f"swe-task[{substrate}-1]"
    steps = list(steps_of(rollout["steps"]))
    assert len(steps) == 7  # the session's reset, then one step per command
    assert [s.exit_code for s in steps[1:]] == [0, 0, 0, 1, 7, 0]


async def runtime_calls(runtime: swe_rex.SandboxRuntime, upload: str) -> dict:
    await runtime.create_session(CreateBashSessionRequest(session="s"))
    found: dict = {}
    with pytest.raises(NonZeroExitCodeError, match="exit code 3"):
        await runtime.run_in_session(BashAction(command="exit 3", session="s"))
    with pytest.raises(CommandTimeoutError):
        await runtime.run_in_session(BashAction(command="sleep 20", session="s", timeout=0.5))
    found["interrupt"] = await runtime.run_in_session(BashInterruptAction(session="s"))
    found["after"] = await runtime.run_in_session(BashAction(command="echo alive", session="s"))
    with pytest.raises(SessionDoesNotExistError):
        await runtime.run_in_session(BashAction(command="true", session="nope"))
    found["merged"] = await runtime.execute(
        Command(command=["sh", "-c", "echo out; echo err >&2"], merge_output_streams=True)
    )
    found["split"] = await runtime.execute(Command(command="echo out; echo err >&2", shell=True))
    await runtime.write_file(WriteFileRequest(path="/tmp/rex/a.txt", content="written"))
    found["read"] = await runtime.read_file(ReadFileRequest(path="/tmp/rex/a.txt"))
    await runtime.upload(UploadRequest(source_path=upload, target_path="/tmp/rex/up"))
    found["uploaded"] = await runtime.execute(
        Command(command="cat /tmp/rex/up/d/f.txt", shell=True)
    )
    return found


def test_runtime_calls_behave_as_swe_rex_s_own(tmp_path, substrate):
    (tmp_path / "up" / "d").mkdir(parents=True)
    (tmp_path / "up" / "d" / "f.txt").write_text("uploaded")
    recorder = record(substrate, out=tmp_path / "runs", probes=0)
    with recorder, recorder.rollout("calls") as sandbox:
        found = asyncio.run(runtime_calls(swe_rex.SandboxRuntime(sandbox), str(tmp_path / "up")))
    assert found["interrupt"].exit_code == 0
    assert (found["after"].output, found["after"].exit_code) == ("alive\n", 0)
    assert (found["merged"].stdout, found["merged"].stderr) == ("out\nerr\n", "")
    assert (found["split"].stdout, found["split"].stderr) == ("out\n", "err\n")
    assert found["read"].content == "written"
    assert found["uploaded"].stdout == "uploaded"


def test_an_unsupported_swe_rex_is_one_line_naming_both_versions(monkeypatch):
    monkeypatch.setattr(versions.metadata, "version", lambda name: "2.0.1")
    with pytest.raises(ConfigError) as raised:
        versions.require("swe-rex", swe_rex.SUPPORTED, "pytest_rollout_tax.integrations.swe_rex")
    assert str(raised.value) == (
        "pytest_rollout_tax.integrations.swe_rex supports swe-rex>=1.4,<2; installed: swe-rex 2.0.1"
    )
