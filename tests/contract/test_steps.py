"""What one step is, the same on every transport (docs/api.md, "The sandbox contract"): its own
process group, its output all its own, no shell chatter, one at a time."""

from __future__ import annotations

import threading

import pytest


@pytest.fixture
def untimed_box(contract_substrate):
    """A sandbox whose steps have no timeout (on a session, no ``timeout`` wrapper of old)."""
    with contract_substrate.start() as sandbox:
        yield sandbox


@pytest.mark.parametrize("cmd", ["kill 0", "trap 'kill 0' EXIT; true"])
def test_a_step_that_kills_its_process_group_ends_only_itself(untimed_box, box, cmd):
    """Finding 1: untimed steps ran in the session shell's process group."""
    for sandbox in (untimed_box, box):
        assert sandbox.exec(cmd).exit_code == 143
        assert sandbox.exec("echo alive").stdout == "alive\n"


def test_late_background_output_belongs_to_the_step_that_started_it(box):
    """Finding 2: what a background child wrote after the step's command exited went to the
    next step of a session."""
    result = box.exec("(sleep 0.5; echo LATE; echo LATE-ERR >&2) & echo first")
    assert (result.stdout, result.stderr) == ("first\nLATE\n", "LATE-ERR\n")
    after = box.exec("sleep 1; echo second")
    assert (after.stdout, after.stderr) == ("second\n", "")


@pytest.mark.parametrize(
    ("cmd", "code"), [("kill -9 $$", 137), ("kill -SEGV $$", 139), ("kill -TERM $$", 143)]
)
def test_a_step_killed_by_a_signal_adds_no_job_message(untimed_box, box, cmd, code):
    """Finding 3: a session's shell added ``Killed``, ``Segmentation fault``, ``Terminated``."""
    for sandbox in (untimed_box, box):
        result = sandbox.exec(f"echo out; echo err >&2; {cmd}")
        assert (result.exit_code, result.stdout, result.stderr) == (code, "out\n", "err\n")


def test_steps_from_threads_on_one_sandbox_are_serialized(fresh_box):
    """Finding 7: two threads on one session sandbox stalled it and lost the session."""
    results: dict[int, list[str]] = {0: [], 1: []}
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(8):
                results[worker].append(fresh_box.exec(f"echo {worker}-{i}").stdout)
                fresh_box.write_file(f"w{worker}", f"{worker}-{i}")
                results[worker].append(fresh_box.read_file(f"w{worker}") + "\n")
        except BaseException as exc:  # reported below, with the thread's results
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    for worker, outputs in results.items():
        assert outputs == [f"{worker}-{i}\n" for i in range(8) for _ in (0, 1)]
    assert len(fresh_box.rollout.steps) == 2 * 8 * 3
