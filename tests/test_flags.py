"""The options both front ends share parse one way: the plugin's and the command line's."""

import json

import pytest

from pytest_rollout_tax import UsageError, flags
from pytest_rollout_tax.cli import build_parser

SPELLINGS = [("1000", 1000), ("1_000", 1000), ("1e3", 1000), ("64", 64)]


@pytest.mark.parametrize(("text", "expected"), SPELLINGS)
def test_a_count_is_the_same_number_however_it_is_written(text, expected):
    assert flags.count(text) == expected


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "nan", "inf", "lots", "1e13"])
def test_a_count_that_is_not_a_whole_number_in_range_is_refused(text):
    with pytest.raises(ValueError, match=repr(text)):
        flags.count(text)


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "soon"])
def test_seconds_are_finite_and_not_negative(text):
    with pytest.raises(ValueError, match="expected seconds >= 0"):
        flags.seconds(text)


def test_the_command_line_takes_every_spelling_the_plugin_takes():
    parser = build_parser()
    for text, expected in SPELLINGS:
        args = parser.parse_args(["project", "run", "--fleet", text, "--think-time", "0.5"])
        assert (args.fleet, args.think_time) == (expected, 0.5)


def test_the_plugin_takes_fleet_in_e_notation_as_project_does(pytester):
    pytester.makepyfile("def test_a(sandbox):\n    sandbox.exec('true')\n")
    result = pytester.runpytest("--rollout-fleet=1e3", "--rollout-json=out.json")
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "out.json").read_text())
    assert report["projection"]["fleet"] == 1000
    assert report["substrates"]["local"]["fleet"]["workers"] == 1000


def test_a_bad_fleet_is_one_line_naming_the_flag_on_both_front_ends(pytester):
    result = pytester.runpytest("--rollout-fleet=many")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rollout-fleet='many': expected a positive integer*"])
    with pytest.raises(UsageError, match="--fleet: expected a positive integer, got 'many'"):
        build_parser().parse_args(["project", "run", "--fleet", "many"])
