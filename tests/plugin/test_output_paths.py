"""One path, one output (plugin/output_paths.py): two outputs that would write one file are a
usage error before any test runs."""

from __future__ import annotations

import pytest

WORKLOAD = """
from pathlib import Path


def test_x(sandbox):
    Path("ran").write_text("yes")
"""


@pytest.mark.parametrize(
    ("args", "first", "second", "path"),
    [
        (["--rollout-json=same.out", "--rollout-html=same.out"], "--rollout-html=same.out",
         "--rollout-json=same.out", "same.out"),
        (["--rollout-json=runs/base.json", "--rollout-save=base", "--rollout-storage=runs"],
         "--rollout-json=runs/base.json", "--rollout-save=base", "runs/base.json"),
        (["--rollout-prometheus-file=out/../m.prom", "--rollout-html=m.prom"],
         "--rollout-html=m.prom", "--rollout-prometheus-file=out/../m.prom", "m.prom"),
        (["--rollout-json=report.xml", "--junitxml=report.xml"], "--rollout-json=report.xml",
         "--junitxml=report.xml", "report.xml"),
    ],
)  # fmt: skip
def test_two_outputs_to_one_file_are_one_usage_line(pytester, args, first, second, path):
    pytester.makepyfile(test_x=WORKLOAD)
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [text for text in result.stderr.lines if text.strip()]
    resolved = pytester.path.resolve() / path
    assert errors == [
        f"ERROR: {first} and {second} would write the same file ({resolved}); "
        "give each output its own path"
    ]
    assert not (pytester.path / "ran").exists()


def test_a_link_to_another_outputs_file_is_that_file(pytester):
    pytester.makepyfile(test_x=WORKLOAD)
    (pytester.path / "link.html").symlink_to(pytester.path / "report.json")
    result = pytester.runpytest_subprocess("--rollout-json=report.json", "--rollout-html=link.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: * would write the same file (*report.json); *"])


def test_outputs_to_their_own_files_run(pytester):
    pytester.makepyfile(test_x=WORKLOAD)
    result = pytester.runpytest_subprocess(
        "--rollout-json=run.json", "--rollout-html=run.html", "--rollout-save=run",
        "--rollout-probes=0",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert (pytester.path / "run.json").read_text() != (pytester.path / "run.html").read_text()
