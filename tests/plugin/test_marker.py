"""The ``trajectory`` marker's parser, without a pytest run (test_plugin.py runs it for real)."""

import pytest

from pytest_rollout_tax.plugin.marker import Trajectory


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 0, -0.5, False, "1", [1]])
def test_trajectory_rejects_every_timeout_that_is_not_seconds(timeout):
    mark = pytest.mark.trajectory(timeout=timeout).mark
    with pytest.raises(ValueError, match=r"in t\.py::test_x: expected a positive finite number"):
        Trajectory.from_marker(mark, "t.py::test_x")


@pytest.mark.parametrize("timeout", [None, 0.001, 1, 30.5])
def test_trajectory_keeps_a_positive_finite_timeout(timeout):
    mark = pytest.mark.trajectory(timeout=timeout).mark
    assert Trajectory.from_marker(mark, "t.py::test_x").timeout == timeout


def test_substrates_are_checked_against_the_known_names():
    mark = pytest.mark.trajectory(substrates=["local", "dokcer"]).mark
    with pytest.raises(
        ValueError,
        match=r"unknown substrate 'dokcer' \(did you mean 'docker'\?\); known substrates: docker",
    ):
        Trajectory.from_marker(mark, "t.py::test_x", known=["docker", "local"])
    assert Trajectory.from_marker(mark, "t.py::test_x").substrates == ("local", "dokcer")


def test_prepare_must_be_a_function_and_its_rounds_share_one_key():
    mark = pytest.mark.trajectory(prepare="setup.sh").mark
    with pytest.raises(ValueError, match=r"\(prepare='setup.sh'\) in t.py::test_x: expected a f"):
        Trajectory.from_marker(mark, "t.py::test_x")

    def setup(sandbox):
        pass

    trajectory = Trajectory.from_marker(pytest.mark.trajectory(prepare=setup).mark)
    first = trajectory.preparation("t.py::test_x[docker-snap-1]", "docker-snap-1")
    second = trajectory.preparation("t.py::test_x[docker-snap-2]", "docker-snap-2")
    assert first.key == second.key == "t.py::test_x" and first.run is setup
    assert Trajectory().preparation("t.py::test_x[local-1]", "local-1") is None
