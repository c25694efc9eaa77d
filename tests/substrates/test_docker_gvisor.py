"""Which registered runtime a gVisor platform picks, and the release and platform read from the
runtime's binary (the one scripts/ensure-docker installs) and its arguments."""

from __future__ import annotations

import re
import shlex

import pytest

from pytest_rollout_tax.substrates.docker import gvisor
from pytest_rollout_tax.substrates.docker.options import DockerOptions
from pytest_rollout_tax.substrates.docker.spawner import job_script

RUNSC = "/usr/local/lib/rollout-tax/gvisor/runsc"


def entry(*arguments: str, path: str = RUNSC) -> dict:
    return {"path": path, "runtimeArgs": ["--network=none", *arguments]}


@pytest.fixture(scope="module")
def current_runsc() -> str:
    release, _ = gvisor._binary(RUNSC)
    if release is None:
        pytest.skip(f"no runsc at {RUNSC}: scripts/ensure-docker installs it")
    return release


def test_a_platform_picks_its_named_runtime_else_runsc_when_that_is_its_platform(current_runsc):
    named = {"runsc": entry(), "runsc-ptrace": entry("--platform=ptrace")}
    assert gvisor.pick("runsc", "ptrace", named) == "runsc-ptrace"
    assert gvisor.pick("runsc", None, named) == "runsc"
    # no runsc-systrap, but runsc's own binary runs systrap by default
    assert gvisor.pick("runsc", "systrap", named) == "runsc"
    # no runsc-kvm, and runsc runs another platform: the name the caller reports missing
    assert gvisor.pick("runsc", "kvm", named) == "runsc-kvm"
    assert gvisor.pick("runsc", "ptrace", {}) == "runsc"  # gVisor missing: a skip upstream


def test_release_and_platform_come_from_the_binary_and_its_arguments(current_runsc):
    assert current_runsc >= "20240729"
    assert gvisor.describe("runsc", entry()) == gvisor.Runtime("runsc", current_runsc, "systrap")
    described = gvisor.describe("runsc-ptrace", entry("--platform=ptrace"))
    assert (described.release, described.platform) == (current_runsc, "ptrace")


def test_a_runtime_that_is_not_gvisor_or_not_on_this_machine_has_no_release():
    assert gvisor.describe("runc", {"path": "runc"}) == gvisor.Runtime("runc")
    missing = gvisor.describe("runsc", entry("--platform=ptrace", path="/nonexistent/runsc"))
    assert missing == gvisor.Runtime("runsc", None, "ptrace")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"runtime": "runsc", "platform": "x"}, "platform='x': expected one of gVisor's"),
        ({"platform": "ptrace"}, "platform='ptrace': needs a gVisor runtime (runtime=runsc)"),
        ({"runtime": "runc", "snapshot": True}, "snapshot=True: needs runtime=runsc"),
        (
            {"runtime": "5", "platform": "systrap"},
            "runtime='5': not gVisor's (runsc), which platform='systrap' needs",
        ),
    ],
)
def test_bad_platform_options_name_the_value(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DockerOptions(**options).check()


def test_any_gvisor_runtime_takes_snapshots_and_platforms():
    DockerOptions(runtime="runsc-ptrace", snapshot=True).check()
    DockerOptions(runtime="runsc", platform="kvm").check()


def test_a_prepare_command_is_a_script_of_its_cwd_env_and_argv():
    script = job_script(["python3", "-c", "print('a b')"], {"TOKEN": "x y"}, "/work space")
    assert script.splitlines() == [
        "cd -- '/work space' || exit 127",
        "export TOKEN='x y'",
        "exec " + shlex.join(["python3", "-c", "print('a b')"]),
    ]


def test_a_variant_whose_runtime_is_wrong_is_refused_naming_the_runtime(pytester):
    """docker-gvisor sets the platform; a pyproject table that sets ``runtime = 5`` is wrong
    about the runtime, not the platform it never named."""
    pytester.makepyprojecttoml("[tool.rollout-tax.substrates.docker-gvisor]\nruntime = 5\n")
    pytester.makepyfile(test_x="def test_x(sandbox):\n    pass\n")
    result = pytester.runpytest_subprocess("--substrate=docker-gvisor")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: docker-gvisor.runtime='5': not gVisor's (runsc), which platform='systrap' needs"]
    )
