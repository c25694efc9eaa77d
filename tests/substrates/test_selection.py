import pytest

from pytest_rollout_tax.errors import ConfigError
from pytest_rollout_tax.substrates.selection import (
    BUILTIN_VARIANTS,
    Catalog,
    SubstrateSpec,
    parse_substrate_opt,
    pyproject_tables,
    resolve,
    split_names,
    variant_tables,
)

KNOWN = ["local", "docker"]
BUILTINS = ["local", "docker", "bwrap", "k8s", "e2b", "ec2"]


def test_names_are_split_on_commas_and_deduplicated():
    assert split_names(["local,docker", "docker", "k8s"]) == ["local", "docker", "k8s"]


def test_an_empty_name_is_rejected():
    with pytest.raises(ConfigError, match=r"^substrates='local,': empty substrate name"):
        split_names(["local,"])
    with pytest.raises(ConfigError, match=r"^--substrate='local,': empty"):
        split_names(["local,"], "--substrate")


def test_substrate_opt_parses_and_keeps_equals_in_values():
    assert parse_substrate_opt("docker.env=A=1") == ("docker", "env", "A=1")


@pytest.mark.parametrize("text", ["docker", "docker=1", ".image=x", "docker.=x"])
def test_malformed_substrate_opt_names_the_value(text):
    with pytest.raises(ConfigError, match=f"^substrate option {text!r}: expected NAME.KEY=VALUE"):
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


def test_a_table_cannot_make_a_registered_substrate_another_kind():
    with pytest.raises(ConfigError) as caught:
        resolve(["local"], [], {"local": {"kind": "docker"}}, KNOWN)
    assert str(caught.value) == (
        "[tool.rollout-tax.substrates.local]: kind = 'docker' cannot redefine local (local is "
        "the floor every other substrate is compared against); name the variant otherwise, "
        "e.g. [tool.rollout-tax.substrates.local-docker]"
    )
    with pytest.raises(ConfigError, match=r"cannot redefine docker \(docker is a registered"):
        resolve(["docker"], [], {"docker": {"kind": "local"}}, KNOWN)
    [spec] = resolve(["local"], [], {"local": {"kind": "local", "root": "/tmp"}}, KNOWN)
    assert (spec.kind, spec.options) == ("local", {"root": "/tmp"})


def test_pyproject_tables_are_read(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.rollout-tax.substrates.docker]\nimage = "x"\n')
    assert pyproject_tables(path) == {"docker": {"image": "x"}}
    assert pyproject_tables(tmp_path / "missing.toml") == {}


def test_the_builtin_k8s_claim_variant_resolves_and_a_table_of_its_name_adds_to_it(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.rollout-tax.substrates.k8s-claim]\nwarm_pool = 4\n")
    tables = variant_tables(path)
    [spec] = resolve(["k8s-claim"], ["k8s-claim.namespace=rl"], tables, BUILTINS)
    assert (spec.name, spec.kind) == ("k8s-claim", "k8s")
    assert spec.options == {"api": "claim", "warm_pool": 4, "namespace": "rl"}


def test_invalid_pyproject_is_a_clear_error(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.rollout-tax\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        pyproject_tables(path)


ALIASES = {"local": "local", "k8s": "k8s", "kubernetes": "k8s"}


@pytest.mark.parametrize(
    ("selected", "kept"),
    [(["k8s", "kubernetes"], "k8s"), (["kubernetes", "local", "k8s"], "kubernetes")],
)
def test_aliases_of_one_substrate_resolve_once_under_the_first_name(selected, kept):
    specs = resolve(selected, [], {}, ALIASES, ALIASES)
    assert [spec.name for spec in specs if spec.name != "local"] == [kept]
    assert len(specs) == len(set(selected)) - 1


def test_aliases_with_the_same_options_merge_and_with_other_options_are_an_error():
    tables = {"k8s": {"namespace": "rl"}}
    specs = resolve(["k8s", "kubernetes"], ["kubernetes.namespace=rl"], tables, ALIASES, ALIASES)
    assert specs == [SubstrateSpec("k8s", "k8s", {"namespace": "rl"})]
    with pytest.raises(ConfigError, match="'k8s' and 'kubernetes' are one substrate"):
        resolve(["k8s", "kubernetes"], [], tables, ALIASES, ALIASES)


def test_variants_of_one_kind_are_not_aliases():
    tables = {"local-b": {"kind": "local"}}
    specs = resolve(["local", "local-b"], [], tables, ALIASES, ALIASES)
    assert [spec.name for spec in specs] == ["local", "local-b"]


def test_the_catalog_knows_registry_names_variants_and_aliases():
    catalog = Catalog.of({"local-b": {"kind": "local"}, "k8s": {"namespace": "rl"}}, ALIASES)
    assert catalog.names == ["k8s", "kubernetes", "local", "local-b"]
    assert catalog.same("kubernetes", "k8s") and catalog.same("local", "local")
    assert not catalog.same("local", "local-b") and not catalog.same("k8s", "local")


def test_the_built_in_variants_work_by_name(tmp_path):
    tables = variant_tables(tmp_path / "pyproject.toml")
    names = ["docker-session", "docker-snap", "docker-reset", "bwrap-session", "bwrap-reset"]
    specs = resolve(names, [], tables, BUILTINS)
    assert [(s.name, s.kind, s.options) for s in specs] == [
        ("docker-session", "docker", {"transport": "session"}),
        ("docker-snap", "docker", {"runtime": "runsc", "platform": "systrap", "snapshot": True}),
        ("docker-reset", "docker", {"reuse": "reset"}),
        ("bwrap-session", "bwrap", {"transport": "session"}),
        ("bwrap-reset", "bwrap", {"reuse": "reset"}),
    ]
    assert set(BUILTIN_VARIANTS) == {
        "docker-session", "docker-pool", "docker-gvisor", "docker-snap", "k8s-session",
        "ec2-session", "k8s-claim", "docker-reset", "bwrap-session", "bwrap-reset",
    }  # fmt: skip


def test_a_users_block_overrides_a_built_in_variants_keys(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.rollout-tax.substrates.docker-gvisor]\nkind = "docker"\nruntime = "runsc-old"\n'
    )
    tables = variant_tables(tmp_path / "pyproject.toml")
    (spec,) = resolve(["docker-gvisor"], [], tables, BUILTINS)
    assert spec.options == {"runtime": "runsc-old", "platform": "systrap"}


def test_a_mistyped_substrate_gets_a_did_you_mean():
    """Issue 47, finding 12: the closest known name, on the command line and in an option."""
    with pytest.raises(
        ConfigError, match=r"unknown substrate 'dokcer' \(did you mean 'docker'\?\)"
    ):
        resolve(["dokcer"], [], {}, KNOWN)
    with pytest.raises(ConfigError, match=r"'lcoal' \(did you mean 'local'\?\)"):
        resolve(["local"], ["lcoal.image=x"], {}, KNOWN)
    with pytest.raises(ConfigError, match=r"unknown substrate 'zzz'; available"):
        resolve(["zzz"], [], {}, KNOWN)
