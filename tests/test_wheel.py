"""The package as users install it: ``python -m build`` makes an sdist and a wheel from it; the
wheel, installed into a fresh venv where there is no C compiler, runs the example suite on
docker-session with the prebuilt step helper; the sdist still installs where there is one.

The build needs PyPI (an isolated build environment), as CI's ``pip install`` does; so does the
wheelhouse of the wheel's dependencies, made here for the container (whose network may not
reach PyPI) and installed there with no index by pip's own wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rollout_tax.core import stepper

ROOT = Path(__file__).resolve().parents[1]
#: What an sdist is made of (setuptools reads nothing else of the checkout).
SOURCES = ("pyproject.toml", "README.md", "pytest_rollout_tax")
SOCKET = "/var/run/docker.sock"
#: The container's script: no compiler, a fresh venv, the wheel from the wheelhouse, the suite.
INSTALL_AND_RUN = """
set -e
for cc in cc gcc clang musl-gcc; do
    if command -v $cc; then echo "a C compiler is here: $cc"; exit 9; fi
done
python3 -m venv --without-pip /venv
/venv/bin/python /wh/{pip}/pip install -q --no-index --find-links /wh "pytest-rollout-tax[docker]"
cd /work
/venv/bin/python -m pytest example_suite --substrate=docker-session -p no:cacheprovider \\
    --rollout-json=/out/report.json
"""


def run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, check=False, **kwargs)
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel ``python -m build`` makes (the wheel from the sdist) of a copy
    of the checkout's sources (the build writes an egg-info beside them)."""
    work = tmp_path_factory.mktemp("wheel")
    (work / "src").mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        ignore = (
            {"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}
        )
        copy(ROOT / name, work / "src" / name, **ignore)
    run(sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(work / "src"))
    return {
        "sdist": next((work / "dist").glob("*.tar.gz")),
        "wheel": next((work / "dist").glob("*.whl")),
    }


def container_python(docker_client, image: str) -> tuple[str, str]:
    """The sandbox image's Python (``311``) and machine (``x86_64``)."""
    said = docker_client.containers.run(
        image,
        ["python3", "-c", "import sys, platform; print('%d%d' % sys.version_info[:2])"],
        remove=True,
    )
    machine = docker_client.containers.run(image, ["uname", "-m"], remove=True)
    return said.decode().strip(), machine.decode().strip()


def test_the_wheel_runs_docker_session_with_the_prebuilt_helper_where_no_compiler_is(
    dist, docker_client, sandbox_image, tmp_path
):
    python, machine = container_python(docker_client, sandbox_image)
    wheelhouse, out = tmp_path / "wh", tmp_path / "out"
    out.mkdir()
    run(
        sys.executable, "-m", "pip", "download", "-q", "--dest", str(wheelhouse),
        "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
        "--platform", f"manylinux2014_{machine}", f"{dist['wheel']}[docker]", "pip",
    )  # fmt: skip
    pip = next(wheelhouse.glob("pip-*.whl")).name
    socket = os.environ.get("DOCKER_HOST", f"unix://{SOCKET}").removeprefix("unix://")
    container = docker_client.containers.run(
        sandbox_image,
        ["sh", "-c", INSTALL_AND_RUN.format(pip=pip)],
        detach=True,
        environment={"DOCKER_HOST": f"unix://{SOCKET}"},
        volumes={
            socket: {"bind": SOCKET, "mode": "rw"},
            str(wheelhouse): {"bind": "/wh", "mode": "ro"},
            str(ROOT / "example_suite"): {"bind": "/work/example_suite", "mode": "ro"},
            str(out): {"bind": "/out", "mode": "rw"},
        },
    )
    try:
        status = container.wait(timeout=600)["StatusCode"]
        logs = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert status == 0, logs
    assert "relay" not in logs
    rollouts = json.loads((out / "report.json").read_text())["rollouts"]
    assert len(rollouts) == 8
    assert {(r["substrate"], r["step_path"]) for r in rollouts} == {("docker-session", "prebuilt")}


def test_the_sdist_installs_where_a_compiler_is_and_builds_the_helper_on_request(dist, tmp_path):
    assert stepper.compiler_path(), "a C compiler is a test prerequisite (gcc, libc6-dev)"
    target = tmp_path / "site"
    run(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
        str(dist["sdist"]))  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(target), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    choose = (
        "from pytest_rollout_tax.core import stepper; "
        "h = stepper.for_machine(stepper.host_machine()); print(h.origin, h.path)"
    )
    for switch, origin, under in [("prebuilt", "prebuilt", target), ("build", "built", tmp_path)]:
        said = run(sys.executable, "-c", choose, env=env | {stepper.SWITCH: switch}, cwd=tmp_path)
        assert said.stdout.split()[0] == origin
        assert Path(said.stdout.split()[1]).is_relative_to(under)
