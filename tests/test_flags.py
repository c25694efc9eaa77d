"""The options both front ends share parse one way: the plugin's and the command line's."""

import io
import json

import pytest

from pytest_rollout_tax import UsageError, flags
from pytest_rollout_tax.cli import build_parser, main

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


#: Flags the command line parses with argparse, with a good and a bad value of each.
PARSED = [
    (flags.FLEET, "1e3", "many"),
    (flags.THINK_TIME, "0.5", "-1"),
    (flags.RANK_BY, "cost", "speed"),
    (flags.ROLLOUTS, "1_000", "1.5"),
    (flags.STEPS, "150", "0"),
]
#: Flags whose parser names the flag itself: a bad value on the plugin, and the command line
#: that gives it (``{value}``: the value, ``{dir}``: a directory).
NAMED = [
    (flags.FAIL, "bogus.p50:1%", ["compare", "a", "b", "--fail", "{value}"]),
    (flags.FAIL, "step.p50", ["html", "a", "--fail", "{value}"]),
    (flags.JSON, "{dir}", ["project", "a", "--json", "{value}"]),
    (flags.JSON, "{dir}", ["calibrate", "a", "--fail", "step.p50:1%", "--json", "{value}"]),
    (flags.HTML, "{dir}", ["html", "a", "-o", "{value}"]),
]


def cli_error(argv: list[str]) -> str:
    err = io.StringIO()
    assert main(argv, out=io.StringIO(), err=err) == 4
    return err.getvalue()


def test_every_flag_is_spelled_rollout_on_the_plugin():
    declared = [value for value in vars(flags).values() if isinstance(value, flags.Flag)]
    assert {flag.plugin for flag in declared} >= {
        "--rollout-fleet", "--rollout-think-time", "--rollout-rank-by", "--rollout-project",
        "--rollout-json", "--rollout-html", "--rollout-compare-fail", "--rollout-storage",
    }  # fmt: skip
    assert flags.HTML.cli == "--output" and flags.FAIL.cli == "--fail"


@pytest.mark.parametrize(("flag", "good", "bad"), PARSED, ids=lambda v: getattr(v, "stem", v))
def test_the_command_line_parses_a_flag_as_the_plugin_does(flag, good, bad):
    parser = build_parser()
    args = parser.parse_args(["project", "run", flag.cli, good])
    assert getattr(args, flag.cli.lstrip("-").replace("-", "_")) == flag.value(good, flag.plugin)
    with pytest.raises(ValueError) as plugin:
        flag.value(bad, flag.plugin)
    reason = str(plugin.value).removeprefix(f"{flag.plugin}={bad!r}: ")
    assert reason != str(plugin.value) and repr(bad) in reason
    with pytest.raises(UsageError) as cli:
        parser.parse_args(["project", "run", flag.cli, bad])
    assert str(cli.value).endswith(f"argument {flag.cli}: {reason}")


def test_the_plugin_projection_is_the_command_lines_rollouts_and_steps():
    assert flags.PROJECT.value("1e3x1_000", flags.PROJECT.plugin) == (
        flags.ROLLOUTS.value("1e3", flags.ROLLOUTS.cli),
        flags.STEPS.value("1_000", flags.STEPS.cli),
    )
    assert flags.PROJECT.value("1_000", flags.PROJECT.plugin) == (1000, None)
    for bad, part in (("lots", "ROLLOUTS"), ("10x2e6", "STEPS")):
        with pytest.raises(ValueError, match=f"{part}: expected a positive integer"):
            flags.PROJECT.value(bad, flags.PROJECT.plugin)


@pytest.mark.parametrize(("flag", "value", "argv"), NAMED, ids=lambda v: getattr(v, "stem", None))
def test_a_named_flag_gives_the_same_error_line_on_both_front_ends(tmp_path, flag, value, argv):
    value = value.format(dir=tmp_path)
    with pytest.raises(ValueError) as plugin:
        flag.value(value, flag.plugin)
    line = cli_error([part.format(value=value) for part in argv])
    assert line == f"rollout-tax: error: {str(plugin.value).replace(flag.plugin, flag.cli)}\n"
    assert value in line


@pytest.mark.parametrize(
    ("flag", "value"),
    [(flag, bad) for flag, _, bad in PARSED if flag.stem not in ("rollouts", "steps")]
    + [(flags.PROJECT, "10x2e6"), (flags.FAIL, "bogus.p50:1%"), (flags.JSON, "{dir}")]
    + [(flags.HTML, "{dir}")],
    ids=lambda v: getattr(v, "stem", None),
)
def test_the_plugin_says_a_bad_value_in_the_flags_own_line(pytester, flag, value):
    value = value.format(dir=pytester.path)
    with pytest.raises(ValueError) as parsed:
        flag.value(value, flag.plugin)
    result = pytester.runpytest(f"{flag.plugin}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line] == [f"ERROR: {parsed.value}"]
