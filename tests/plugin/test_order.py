"""``--rollout-order``: interleave puts rounds round-robin across substrates; other items stay."""

from __future__ import annotations

import pytest

from pytest_rollout_tax.plugin.order import interleave


def test_interleave_is_round_robin_by_round_workload_substrate():
    grouped = [(r, w, s) for w in "xy" for s in "AB" for r in (1, 2)]
    assert interleave(grouped, lambda slot: slot) == [
        (1, "x", "A"), (1, "x", "B"), (1, "y", "A"), (1, "y", "B"),
        (2, "x", "A"), (2, "x", "B"), (2, "y", "A"), (2, "y", "B"),
    ]  # fmt: skip


def test_items_that_are_not_rollouts_keep_their_places():
    items = ["plain", (2, "x", "A"), (1, "x", "A"), "other", (1, "x", "B")]
    ordered = interleave(items, lambda item: item if isinstance(item, tuple) else None)
    assert ordered == ["plain", (1, "x", "A"), (1, "x", "B"), "other", (2, "x", "A")]


WORKLOAD = """
import pytest

@pytest.mark.trajectory(rounds=2)
def test_a(sandbox):
    sandbox.exec("true")

def test_plain():
    pass
"""


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        ((), "", ["a[local-1]", "a[local-2]", "a[local2-1]", "a[local2-2]", "plain"]),
        (("--rollout-order=interleave",), "",
         ["a[local-1]", "a[local2-1]", "a[local-2]", "a[local2-2]", "plain"]),
        ((), 'rollout_order = "interleave"',
         ["a[local-1]", "a[local2-1]", "a[local-2]", "a[local2-2]", "plain"]),
    ],
)  # fmt: skip
def test_the_order_option_and_its_ini_twin(pytester: pytest.Pytester, args, ini, expected):
    pytester.makepyfile(test_w=WORKLOAD)
    pytester.makepyprojecttoml(
        f'[tool.pytest.ini_options]\n{ini}\n[tool.rollout-tax.substrates.local2]\nkind = "local"\n'
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--substrate=local,local2", *args, "-v")
    assert result.ret == 0
    ran = [line.split("::test_")[1].split()[0] for line in result.outlines if " PASSED" in line]
    assert ran == expected


def test_a_bad_order_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_w=WORKLOAD)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rollout-order=random")
    assert result.ret == 4
    assert "ERROR: --rollout-order='random': expected grouped or interleave" in result.stderr.str()
