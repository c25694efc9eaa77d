"""Installed is not active: an unrelated suite behaves the same with the plugin installed as
without it (scratch projects run in a subprocess each way), and an active session chains its
SIGTERM handling to the handler it found, restores it, and leaves it out of forked children."""

from __future__ import annotations

import signal

import pytest

WITHOUT = ("-p", "no:rollout_tax")

TERMINATED_CHILD = """
import multiprocessing
import signal
import time


def child():
    time.sleep(600)


def test_child_ends_by_sigterm():
    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.terminate()
    process.join(60)
    assert process.exitcode == -signal.SIGTERM
"""

OWN_HANDLER_CONFTEST = """
import signal


def own_handler(signum, frame):
    pass


def pytest_configure(config):
    signal.signal(signal.SIGTERM, own_handler)
"""

OWN_HANDLER_TEST = """
import signal

import conftest


def test_own_handler_is_installed():
    assert signal.getsignal(signal.SIGTERM) is conftest.own_handler
"""

JSON_SPECS_CONFTEST = """
import json

import pytest


def pytest_collect_file(file_path, parent):
    if file_path.name.startswith("test_") and file_path.suffix == ".json":
        return SpecFile.from_parent(parent, path=file_path)


class SpecFile(pytest.File):
    def collect(self):
        for name, value in json.loads(self.path.read_text()).items():
            yield SpecItem.from_parent(self, name=name, value=value)


class SpecItem(pytest.Item):
    def __init__(self, *, value, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def runtest(self):
        assert self.value == 1
"""

OWN_SUBSTRATE_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--substrate", default="none")
"""

OWN_SUBSTRATE_TEST = """
def test_own_option(request):
    assert request.config.getoption("substrate") == "mine"
"""

SIGTERM_SELF = """
import os
import signal


def test_terminated():
    os.kill(os.getpid(), signal.SIGTERM)
"""


def _outcomes(pytester: pytest.Pytester, *args: str) -> tuple[int, dict[str, int]]:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    return result.ret, result.parseoutcomes() if result.ret >= 0 else {}


def _same_with_and_without(pytester: pytest.Pytester, *args: str) -> tuple[int, dict]:
    without = _outcomes(pytester, *WITHOUT, *args)
    installed = _outcomes(pytester, *args)
    assert installed == without
    return installed


def test_a_terminated_child_ends_by_sigterm(pytester):
    pytester.makepyfile(test_child=TERMINATED_CHILD)
    assert _same_with_and_without(pytester) == (0, {"passed": 1})


def test_a_conftest_sigterm_handler_is_kept(pytester):
    pytester.makeconftest(OWN_HANDLER_CONFTEST)
    pytester.makepyfile(test_handler=OWN_HANDLER_TEST)
    assert _same_with_and_without(pytester) == (0, {"passed": 1})


def test_a_json_file_another_plugin_collects_is_not_claimed(pytester):
    pytester.makeconftest(JSON_SPECS_CONFTEST)
    pytester.makefile(".json", test_spec='{"one": 1, "two": 1}')
    assert _same_with_and_without(pytester, "test_spec.json") == (0, {"passed": 2})


def test_an_option_of_the_same_name_yields_in_one_line(pytester):
    pytester.makeconftest(OWN_SUBSTRATE_CONFTEST)
    pytester.makepyfile(test_option=OWN_SUBSTRATE_TEST)
    assert _same_with_and_without(pytester, "--substrate=mine") == (0, {"passed": 1})
    result = pytester.runpytest_subprocess("--substrate=mine")
    clash = [
        line
        for line in result.outlines + result.errlines
        if "--substrate" in line and "clash" in line
    ]
    assert len(clash) == 1, result.outlines
    assert "conftest.py" in clash[0] and "rollout-tax" in clash[0]
    assert "rollout_substrates" in clash[0]  # what to use instead


def test_sigterm_ends_an_unmeasured_session_as_without_the_plugin(pytester):
    pytester.makepyfile(test_self=SIGTERM_SELF)
    ret, _ = _same_with_and_without(pytester)
    assert ret == -signal.SIGTERM


# -- an active session -------------------------------------------------------------------------

CHAINED_CONFTEST = """
import signal


def own_handler(signum, frame):
    with open("own-handler-ran", "a") as file:
        file.write("ran\\n")


def pytest_configure(config):
    signal.signal(signal.SIGTERM, own_handler)


def pytest_unconfigure(config):
    restored = signal.getsignal(signal.SIGTERM) is own_handler
    with open("restored", "w") as file:
        file.write(str(restored))
"""

ACTIVE_CHILD = """
import multiprocessing
import os
import signal
import time


def child():
    time.sleep(600)


def test_child_ends_by_sigterm(sandbox):
    for _ in range(20):  # terminated at once: before the child's interpreter reset, often
        process = multiprocessing.get_context("fork").Process(target=child)
        process.start()
        process.terminate()
        process.join(60)
        assert process.exitcode == -signal.SIGTERM


def default_and_unblocked():
    blocked = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    os._exit(0 if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL and not blocked else 1)


def test_child_starts_with_the_handler_found(sandbox):
    process = multiprocessing.get_context("fork").Process(target=default_and_unblocked)
    process.start()
    process.join(60)
    assert process.exitcode == 0
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
"""

ACTIVE_TERMINATED = """
import os
import signal


def test_measured(sandbox):
    sandbox.exec("true")


def test_zz_terminated(sandbox):
    os.kill(os.getpid(), signal.SIGTERM)
"""


def test_an_active_session_leaves_sigterm_to_forked_children(pytester):
    pytester.makepyfile(test_active=ACTIVE_CHILD)
    result = pytester.runpytest_subprocess("--rollout-probes=0")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*2 passed*"])


def test_an_active_session_chains_to_the_handler_it_found_and_restores_it(pytester):
    pytester.makeconftest(CHAINED_CONFTEST)
    pytester.makepyfile(test_active=ACTIVE_TERMINATED)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--rollout-probes=0")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # the sandboxes were torn down
    result.stdout.fnmatch_lines(["*1 passed*"])
    assert (pytester.path / "own-handler-ran").read_text() == "ran\n"  # chained
    assert (pytester.path / "restored").read_text() == "True"
