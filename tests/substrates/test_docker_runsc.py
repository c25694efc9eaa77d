"""gVisor beside runc on the real engine: the runtime option, the isolation part of the tax,
prepared sandboxes restored from checkpoints, and that nothing of them outlives a session.

Every pytest run here is a real subprocess on the engine scripts/ensure-docker starts (runsc
registered, experimental mode on); the tests skip in one line on an engine without them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.pytest_process import interrupt

from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.substrate import SESSION_LABEL, Prepare
from pytest_rollout_tax.errors import ConfigError, CredentialsMissing, RuntimeMissing
from pytest_rollout_tax.report import isolation
from pytest_rollout_tax.report.aggregate import Aggregate
from pytest_rollout_tax.substrates.registry import get_substrate

pytestmark = pytest.mark.usefixtures("sandbox_image", "runsc_runtime")

VARIANTS = """
[tool.rollout-tax.substrates.docker-runc]
kind = "docker"
runtime = "runc"

[tool.rollout-tax.substrates.docker-gvisor]
kind = "docker"
runtime = "runsc"
platform = "systrap"

[tool.rollout-tax.substrates.docker-ptrace]
kind = "docker"
runtime = "runsc"
platform = "ptrace"

[tool.rollout-tax.substrates.docker-snap]
kind = "docker"
runtime = "runsc"
platform = "systrap"
snapshot = true
"""

#: Writes the session's id where the test can read it, to look for its leftovers.
CONFTEST = """
def pytest_sessionstart(session):
    plugin = session.config.pluginmanager.get_plugin("rollout-tax")
    with open("session", "w") as out:
        out.write(plugin.session.substrates.session_id)
"""

#: A prepare step of >= 2 s that leaves state on disk (a file) and in memory (a process that
#: holds a token only in memory and writes it on SIGUSR1).
PREPARED = '''
import pytest

HOLDER = """
import os, signal, time
token = "mem-%d" % os.getpid()
signal.signal(signal.SIGUSR1, lambda *_: open("/workspace/token", "w").write(token))
open("/workspace/holder.pid", "w").write(str(os.getpid()))
while True:
    time.sleep(60)
"""


def prepare(sandbox):
    sandbox.write_file("repo/setup.txt", "installed")
    sandbox.exec(["python3", "-c", "import time; time.sleep(2)"])
    sandbox.write_file("holder.py", HOLDER)  # not /tmp: gVisor's is its own tmpfs
    sandbox.exec("python3 holder.py >/dev/null 2>&1 &")
    sandbox.exec("while [ ! -s holder.pid ]; do sleep 0.05; done", timeout=30)


@pytest.mark.trajectory(rounds=3, prepare=prepare, timeout=60)
def test_prepared(sandbox, rollout):
    assert rollout.steps == []  # the prepare's calls are not the rollout's steps
    assert sandbox.read_file("repo/setup.txt") == "installed"
    token = sandbox.exec("kill -USR1 $(cat holder.pid); sleep 0.3; cat token")
    assert token.stdout.startswith("mem-"), token
    with open("state.log", "a") as log:
        log.write(f"{sandbox.id} {token.stdout}\\n")
'''


def run_pytest(path: Path, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        command(*args), cwd=path, env=environment(), capture_output=True, text=True, timeout=300
    )
    return done.returncode, done.stdout + done.stderr


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return env | {"PYTHONUNBUFFERED": "1", "COLUMNS": "200"}  # a summary line is not folded


def suite(tmp_path: Path, source: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(VARIANTS)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_work.py").write_text(textwrap.dedent(source))
    return tmp_path


def leftovers(docker_client, tmp_path: Path) -> list[str]:
    """Containers and images (the committed disks of snapshots) of the suite's session."""
    label = f"{SESSION_LABEL}={(tmp_path / 'session').read_text()}"
    containers = docker_client.api.containers(all=True, filters={"label": label})
    images = docker_client.api.images(filters={"label": label})
    return [c["Id"] for c in containers] + [i["Id"] for i in images]


# -- the runtime option ------------------------------------------------------------------------


def test_an_unregistered_runtime_fails_every_start_naming_the_engines_runtimes(sandbox_image):
    substrate = get_substrate("docker", image=sandbox_image, runtime="kata-nope")
    try:
        for _ in range(2):
            with pytest.raises(ConfigError) as raised:
                substrate.start()
            message = str(raised.value)
            assert message.startswith("docker.runtime='kata-nope': not registered in this engine")
            assert "runc" in message and "runsc" in message and "\n" not in message
    finally:
        substrate.close()


def test_an_unregistered_runtime_is_a_usage_error_naming_the_engines_runtimes(tmp_path):
    suite(tmp_path, "def test_x(sandbox):\n    pass\n")
    code, output = run_pytest(
        tmp_path, "--substrate=docker", "--substrate-opt=docker.runtime=kata-nope"
    )
    assert code == 4, output
    [line] = [line for line in output.splitlines() if "kata-nope" in line]
    assert line.startswith("ERROR: docker.runtime='kata-nope': not registered in this engine (")
    assert "runc" in line and "Traceback" not in output


def test_runsc_missing_from_the_engine_skips_saying_how_to_register_it(sandbox_image, monkeypatch):
    """An engine ensure-docker did not start may lack gVisor: its rollouts skip (as without
    credentials), in one line that says how to register it."""
    substrate = get_substrate("docker", image=sandbox_image, runtime="runsc")
    info = substrate.api.info()
    without = {k: v for k, v in info["Runtimes"].items() if k != "runsc"}
    monkeypatch.setattr(substrate.api, "info", lambda: {**info, "Runtimes": without})
    try:
        with pytest.raises(RuntimeMissing) as raised:
            substrate.start()
        assert isinstance(raised.value, CredentialsMissing)  # skipped, never counted
        message = str(raised.value)
        assert message.startswith("docker.runtime='runsc': not registered in this engine")
        assert "scripts/ensure-docker" in message and '"runsc"' in message
    finally:
        substrate.close()


def test_runsc_registered_without_a_network_refuses_another_network(sandbox_image):
    substrate = get_substrate("docker", image=sandbox_image, runtime="runsc", network="bridge")
    try:
        with pytest.raises(ConfigError, match=r"^docker.network='bridge': this engine runs runsc"):
            substrate.start()
    finally:
        substrate.close()


def test_a_snapshot_needs_runsc_and_experimental_mode(sandbox_image, monkeypatch):
    with pytest.raises(ConfigError, match=r"^docker.snapshot=True: needs runtime=runsc"):
        get_substrate("docker", image=sandbox_image, snapshot=True)
    substrate = get_substrate("docker", image=sandbox_image, runtime="runsc", snapshot=True)
    info = substrate.api.info()
    monkeypatch.setattr(substrate.api, "info", lambda: {**info, "ExperimentalBuild": False})
    try:
        with pytest.raises(ConfigError, match=r"experimental mode is off.*scripts/ensure-docker"):
            substrate.start(prepare=Prepare("t", lambda sandbox: None))
    finally:
        substrate.close()


def test_a_snapshot_on_runc_is_a_usage_error(tmp_path):
    suite(tmp_path, "def test_x(sandbox):\n    pass\n")
    code, output = run_pytest(
        tmp_path, "--substrate=docker", "--substrate-opt=docker.snapshot=true"
    )
    assert code == 4, output
    assert "docker.snapshot=True: needs runtime=runsc" in output
    assert "Traceback" not in output


def test_the_platform_picks_gvisors_runtime_and_every_row_records_release_and_platform(tmp_path):
    """systrap (gVisor's default) and ptrace in one run, each on the engine's runtime for it,
    a current release (20240729 or later: Debian bookworm's 20221219 failed coreutils ls)."""
    suite(tmp_path, "def test_x(sandbox):\n    assert sandbox.exec('ls -l / && stat /etc').ok\n")
    code, output = run_pytest(
        tmp_path, "--substrate=docker,docker-gvisor,docker-ptrace", "--rollout-json=r.json"
    )
    assert code == 0, output
    report = json.loads((tmp_path / "r.json").read_text())
    rows = {r["substrate"]: r for r in report["rollouts"]}
    assert rows["docker-gvisor"]["runtime_platform"] == "systrap"
    assert rows["docker-ptrace"]["runtime_platform"] == "ptrace"
    assert rows["docker-ptrace"]["runtime"] == "runsc-ptrace"
    for name in ("docker-gvisor", "docker-ptrace"):
        release = rows[name]["runtime_release"]
        assert release >= "20240729", release
        entry = report["substrates"][name]
        assert entry["runtime_release"] == release
        assert entry["runtime_platform"] == rows[name]["runtime_platform"]
    assert "runtime_release" not in rows["docker"] and "runtime_platform" not in rows["docker"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            "--substrate-opt=docker.platform=kvmx",
            "ERROR: docker.platform='kvmx': expected one of gVisor's platforms: systrap, ptrace",
        ),
        (
            "--substrate-opt=docker.platform=ptrace",
            "ERROR: docker.platform='ptrace': needs a gVisor runtime (runtime=runsc)",
        ),
    ],
)
def test_a_bad_platform_is_a_usage_error_in_one_line(tmp_path, options, message):
    suite(tmp_path, "def test_x(sandbox):\n    pass\n")
    code, output = run_pytest(tmp_path, "--substrate=docker", options)
    assert code == 4, output
    assert [line for line in output.splitlines() if line.startswith(message)], output
    assert "Traceback" not in output


def test_a_platform_the_engine_has_no_runtime_for_names_the_runtimes(sandbox_image):
    substrate = get_substrate("docker", image=sandbox_image, runtime="runsc", platform="kvm")
    try:
        with pytest.raises(ConfigError) as raised:
            substrate.start()
        message = str(raised.value)
        assert message.startswith("docker.platform='kvm': no runtime 'runsc-kvm' in this engine (")
        assert "runsc-ptrace" in message and "\n" not in message
    finally:
        substrate.close()


# -- the isolation part ------------------------------------------------------------------------

FORK_HEAVY = """
import pytest


@pytest.mark.trajectory(rounds=2)
def test_forks(sandbox):
    for _ in range(4):
        assert sandbox.exec("for i in $(seq 150); do /bin/true; done").ok
"""


def test_gvisor_makes_commands_slower_and_the_excess_is_counted_as_isolation_tax(
    tmp_path, docker_client
):
    """A fork-heavy workload on runc (twice: docker, docker-runc) and on runsc in one run:
    gVisor's command slowdown (about 5x for fork+exec here) is the ``isolation`` part, in its
    tax-hours; the same computation for runc against runc stays within noise of zero, a small
    fraction of gVisor's excess (a comparison within the run, not a fixed time)."""
    suite(tmp_path, FORK_HEAVY)
    code, output = run_pytest(
        tmp_path, "--substrate=docker,docker-runc,docker-gvisor", "--rollout-json=r.json"
    )
    assert code == 0, output
    report = json.loads((tmp_path / "r.json").read_text())
    substrates = report["substrates"]
    gvisor, runc = substrates["docker-gvisor"], substrates["docker"]
    assert {r["substrate"]: r["runtime"] for r in report["rollouts"]} == {
        "docker": "runc",
        "docker-runc": "runc",
        "docker-gvisor": "runsc-systrap",
    }
    assert (gvisor["runtime"], runc["runtime"]) == ("runsc-systrap", "runc")
    info = gvisor["isolation"]
    assert info["reference"] == "docker" and info["tests"] == 1
    assert info["per_step_s"] > 0 and info["command_ratio"] > 1.5
    parts = gvisor["decomposition"]
    assert parts["isolation"] > 0
    assert sum(parts.values()) == pytest.approx(gvisor["worker_hours"], rel=1e-3)
    untaxed = parts["cold_start"] + parts["overhead"] + parts["teardown"] + parts["idle"]
    assert gvisor["tax_hours"] == pytest.approx(untaxed + parts["isolation"], rel=1e-3)
    assert "isolation" not in runc and "isolation" not in runc["decomposition"]
    rows = {}
    for row in Aggregate.of(map(Rollout.from_dict, report["rollouts"])).sorted_rows():
        rows.setdefault(row.fields["substrate"], []).append(row)
    same, _, _ = isolation.excess_per_step(
        rows["docker-runc"],
        rows["docker"],
        substrates["docker-runc"]["action"]["mean"],
        runc["action"]["mean"],
    )
    assert abs(same) < 0.2 * info["per_step_s"]
    [line] = [line for line in output.splitlines() if line.startswith("docker-gvisor vs docker:")]
    assert line.startswith("docker-gvisor vs docker: action p50 ")
    assert f"command {info['command_ratio']:.2g}x, cold start " in line
    figures, _, verdict = line.partition("; ")
    assert figures.endswith(f"{gvisor['tax_hours'] - runc['tax_hours']:+,.0f} tax-hours")
    assert "noise" in verdict  # every comparison says whether it is beyond the noise


def test_without_a_runc_reference_the_isolation_is_unknown_and_said_so(tmp_path):
    suite(tmp_path, "def test_x(sandbox):\n    assert sandbox.exec('true').ok\n")
    code, output = run_pytest(tmp_path, "--substrate=docker-gvisor", "--rollout-json=r.json")
    assert code == 0, output
    entry = json.loads((tmp_path / "r.json").read_text())["substrates"]["docker-gvisor"]
    assert entry["isolation"] == {
        "reference": None,
        "per_step_s": None,
        "command_ratio": None,
        "tests": 0,
    }
    assert "isolation" not in entry["decomposition"]
    assert (
        "docker-gvisor: isolation unknown (no runc docker variant on the same transport in the "
        "run)" in " ".join(output.split())
    )


# -- prepared sandboxes ------------------------------------------------------------------------


@pytest.mark.usefixtures("experimental_runsc")
def test_restoring_a_prepared_snapshot_beats_preparing_every_rollout(tmp_path, docker_client):
    """The same prepare (>= 2 s, state on disk and in a live process's memory) on gVisor,
    plain and as a snapshot variant, 3 rounds each.

    The plain cold start contains the whole prepare, at least its 2 s sleep; a restore is a
    create and a checkpoint restore (about 0.4 s here). The bound, 0.75x, leaves a margin of
    several times the measured ratio: what it checks is a behaviour (the prepare ran once per
    test and worker, not once per rollout), not how fast the tool is.
    """
    suite(tmp_path, PREPARED)
    code, output = run_pytest(
        tmp_path, "--substrate=docker-gvisor,docker-snap", "--rollout-json=r.json"
    )
    assert code == 0, output
    report = json.loads((tmp_path / "r.json").read_text())
    plain, snap = report["substrates"]["docker-gvisor"], report["substrates"]["docker-snap"]
    assert snap["snapshot"] is True and "snapshot" not in plain
    assert snap["cold_start"]["p50"] < 0.75 * plain["cold_start"]["p50"]
    assert plain["phases"]["prepare"]["min"] >= 2
    restored = [r for r in report["rollouts"] if r["substrate"] == "docker-snap"]
    assert all(r["snapshot"] and {"create", "restore", "first_exec"} <= set(r["phases"])
               for r in restored)  # fmt: skip
    assert sum("template" in r["phases"] for r in restored) == 1  # prepared once
    assert sum("checkpoint" in r["phases"] for r in restored) == 1
    assert all("prepare" not in r["phases"] for r in restored)
    # every rollout (6) saw the prepared disk and memory; each in a sandbox of its own
    state = [line.split() for line in (tmp_path / "state.log").read_text().splitlines()]
    assert len(state) == 6 and all(token.startswith("mem-") for _, token in state)
    ids = [r["sandbox_id"] for r in report["rollouts"]]
    assert len(set(ids)) == 6 and {i for i, _ in state} == set(ids)
    text = " ".join(output.split())  # the summary wraps its notes
    assert "docker-snap vs docker-gvisor: cold start " in text
    assert " restored vs " in text and "prepared); once per test and worker: prepare " in text
    assert leftovers(docker_client, tmp_path) == []


INTERRUPTED = (
    PREPARED
    + """

@pytest.mark.trajectory(prepare=prepare)
def test_waits(sandbox):
    open("ready", "w").close()
    sandbox.exec("sleep 120")
"""
)


@pytest.mark.usefixtures("experimental_runsc")
@pytest.mark.parametrize("how", ["sigint", "kill-9"])
def test_an_interrupted_or_killed_snapshot_session_leaves_nothing(tmp_path, docker_client, how):
    """SIGINT while a restored rollout waits in a step: the session cleans up. kill -9: the
    template, its checkpoint and the committed image stay, and ``--rollout-reap`` removes them."""
    suite(tmp_path, INTERRUPTED)
    args = command("--substrate=docker-snap", "-k", "test_waits")
    code, output = interrupt(
        args,
        cwd=tmp_path,
        env=environment(),
        ready=lambda: (tmp_path / "ready").exists(),
        signum=signal.SIGINT if how == "sigint" else signal.SIGKILL,
    )
    if how == "sigint":
        assert code == 2, output
        assert leftovers(docker_client, tmp_path) == []
        return
    assert code == -signal.SIGKILL
    assert len(leftovers(docker_client, tmp_path)) == 3  # template, image, the rollout's
    code, output = run_pytest(tmp_path, "--rollout-reap", "--substrate=docker-snap")
    assert code == 0, output
    assert leftovers(docker_client, tmp_path) == []


def test_a_failing_prepare_fails_the_rollout_in_one_line(tmp_path, docker_client):
    suite(
        tmp_path,
        """
        import pytest

        def prepare(sandbox):
            raise RuntimeError("no such repository")

        @pytest.mark.trajectory(prepare=prepare)
        def test_x(sandbox):
            pass
        """,
    )
    code, output = run_pytest(tmp_path, "--substrate=docker-gvisor")
    assert code == 1, output
    assert "prepare=prepare failed: RuntimeError: no such repository" in output
    assert leftovers(docker_client, tmp_path) == []
