import pytest

from pytest_rollout_tax.config import (
    SubstrateSpec,
    parse_substrate_opt,
    pyproject_tables,
    resolve,
    split_names,
)
from pytest_rollout_tax.errors import ConfigError

KNOWN = ["local", "docker"]


def test_names_are_split_on_commas_and_deduplicated():
    assert split_names(["local,docker", "docker", "k8s"]) == ["local", "docker", "k8s"]


def test_an_empty_name_is_rejected():
    with pytest.raises(ConfigError, match="empty substrate name"):
        split_names(["local,"])


def test_substrate_opt_parses_and_keeps_equals_in_values():
    assert parse_substrate_opt("docker.env=A=1") == ("docker", "env", "A=1")


@pytest.mark.parametrize("text", ["docker", "docker=1", ".image=x", "docker.=x"])
def test_malformed_substrate_opt_names_the_value(text):
    with pytest.raises(ConfigError, match=f"--substrate-opt={text!r}"):
        parse_substrate_opt(text)


def test_pyproject_options_are_overlaid_by_the_command_line():
    tables = {"docker": {"image": "a", "network": "none"}}
    specs = resolve(["docker"], ["docker.image=b"], tables, KNOWN)
    assert specs == [SubstrateSpec("docker", "docker", {"image": "b", "network": "none"})]


def test_a_table_with_kind_is_a_named_variant():
    tables = {"docker-gvisor": {"kind": "docker", "runtime": "runsc"}}
    specs = resolve(["local", "docker-gvisor"], [], tables, KNOWN)
    assert specs[1] == SubstrateSpec("docker-gvisor", "docker", {"runtime": "runsc"})


def test_unknown_substrate_lists_the_available_ones():
    with pytest.raises(
        ConfigError, match="unknown substrate 'nope'; available substrates: docker, local"
    ):
        resolve(["nope"], [], {}, KNOWN)


def test_unknown_kind_and_unknown_opt_target_are_errors():
    with pytest.raises(ConfigError, match="unknown kind 'vm'"):
        resolve(["local"], [], {"x": {"kind": "vm"}}, KNOWN)
    with pytest.raises(ConfigError, match="unknown substrate 'dokcer'"):
        resolve(["local"], ["dokcer.image=x"], {}, KNOWN)


def test_pyproject_tables_are_read(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.rollout-tax.substrates.docker]\nimage = "x"\n')
    assert pyproject_tables(path) == {"docker": {"image": "x"}}
    assert pyproject_tables(tmp_path / "missing.toml") == {}


def test_invalid_pyproject_is_a_clear_error(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.rollout-tax\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        pyproject_tables(path)
