"""A SWE-style bug-fix episode: a small package with a failing test, patched until it passes.

This is what a SWE-bench-like task does in its sandbox: write the repository, run its tests,
read the failure, patch the source, run the tests again.
"""

import pytest

SOURCE = '''\
def median(values):
    """The median of a non-empty list of numbers."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]
'''

TESTS = """\
import unittest

from stats.median import median


class MedianTest(unittest.TestCase):
    def test_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)
"""

PATCH = """\
    if len(ordered) % 2 == 0:
        return (ordered[middle - 1] + ordered[middle]) / 2
    return ordered[middle]
"""

RUN_TESTS = ["python3", "-B", "-m", "unittest", "discover", "-s", "tests", "-t", "."]


@pytest.mark.trajectory(steps=12, rounds=5, timeout=60)
def test_fix_median(sandbox):
    """Write the repo, see the test fail, patch the source, see it pass."""
    sandbox.write_file("stats/__init__.py", "")
    sandbox.write_file("stats/median.py", SOURCE)
    sandbox.write_file("tests/__init__.py", "")
    sandbox.write_file("tests/test_median.py", TESTS)
    assert sandbox.exec(
        "git init -q && git add -A && git -c user.name=a -c user.email=a@b commit -qm 'initial'"
    ).ok

    before = sandbox.exec(RUN_TESTS)
    assert before.exit_code == 1 and "test_even" in before.stderr

    source = sandbox.read_file("stats/median.py")
    sandbox.write_file("stats/median.py", source.replace("    return ordered[middle]\n", PATCH))
    diff = sandbox.exec(["git", "diff", "--stat"])
    assert "stats/median.py" in diff.stdout

    after = sandbox.exec(RUN_TESTS)
    assert after.ok, after.stderr
    assert "OK" in after.stderr
