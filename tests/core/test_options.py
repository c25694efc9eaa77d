from dataclasses import dataclass, field
from typing import Literal

import pytest

from pytest_rollout_tax.core.options import parse_options
from pytest_rollout_tax.errors import ConfigError


@dataclass
class Example:
    image: str = "img"
    cpus: float | None = None
    pids_limit: int | None = None
    privileged: bool = False
    pull: Literal["never", "missing"] = "never"
    env: dict[str, str] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)

    def check(self) -> None:
        if self.cpus is not None and self.cpus <= 0:
            raise ValueError(f"cpus={self.cpus}: must be > 0")


def test_strings_from_the_command_line_are_converted():
    options = parse_options(
        Example,
        {"cpus": "1.5", "pids_limit": "64", "privileged": "yes", "pull": "missing",
         "env": "A=1, B=x=y", "groups": "a,b"},
        owner="docker",
    )  # fmt: skip
    assert options == Example(
        cpus=1.5, pids_limit=64, privileged=True, pull="missing",
        env={"A": "1", "B": "x=y"}, groups=["a", "b"],
    )  # fmt: skip


def test_toml_values_and_json_strings_are_accepted():
    options = parse_options(
        Example, {"env": {"A": 1}, "groups": '["x"]', "cpus": 2, "pids_limit": "none"}, owner="d"
    )
    assert (options.env, options.groups, options.cpus, options.pids_limit) == (
        {"A": "1"}, ["x"], 2.0, None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"cpus": "lots"}, r"docker\.cpus='lots'"),
        ({"pids_limit": "1.5"}, r"docker\.pids_limit='1\.5'"),
        ({"privileged": "maybe"}, "expected true or false"),
        ({"pull": "always"}, "expected one of never, missing"),
        ({"env": "A"}, "expected KEY=VALUE"),
        ({"env": '{"A": '}, r"docker\.env='\{\"A\": ': Expecting value"),
        ({"nope": "1"}, r"docker\.nope: unknown option \(options of docker: cpus, env"),
        ({"cpus": "-1"}, r"docker\.cpus=-1\.0: must be > 0"),
    ],
)
def test_bad_values_name_the_option(raw, message):
    with pytest.raises(ConfigError, match=message):
        parse_options(Example, raw, owner="docker")
