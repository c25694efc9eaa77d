import sys
import textwrap

import pytest

from pytest_rollout_tax import Substrate, SubstrateUnavailable, get_substrate
from pytest_rollout_tax.errors import ConfigError, ExtraMissing
from pytest_rollout_tax.substrates.local import LocalSubstrate
from pytest_rollout_tax.substrates.registry import Registry


def test_builtins_register_through_the_hook():
    registry = Registry.discover()
    assert {"local", "docker", "bwrap", "k8s", "kubernetes", "e2b", "ec2", "modal"} <= set(
        registry.names()
    )
    assert registry.load("local") is LocalSubstrate


def test_names_that_share_an_implementation_are_aliases_of_the_first():
    aliases = Registry.discover().aliases()
    assert aliases["kubernetes"] == aliases["k8s"] == "k8s"
    assert (aliases["local"], aliases["docker"]) == ("local", "docker")
    overridden = Registry({"k8s": "a:K8s", "kubernetes": LocalSubstrate, "other": LocalSubstrate})
    assert overridden.aliases() == {"k8s": "k8s", "kubernetes": "kubernetes", "other": "kubernetes"}


def test_get_substrate_builds_a_named_instance_with_options():
    substrate = get_substrate("local", env={"A": "1"})
    assert isinstance(substrate, Substrate)
    assert (substrate.name, substrate.options.env) == ("local", {"A": "1"})


def test_unknown_names_list_what_exists():
    with pytest.raises(ConfigError, match=r"available substrates: .*local"):
        get_substrate("nope")


def test_an_entry_that_cannot_be_imported_is_unavailable():
    registry = Registry({"ghost": "no_such_module_xyz:Ghost"})
    with pytest.raises(SubstrateUnavailable, match="'ghost' cannot be loaded"):
        registry.load("ghost")


def test_installed_packages_add_substrates_through_the_entry_point(tmp_path, monkeypatch):
    """A real distribution on sys.path whose ``rollout_tax`` entry point implements the hook."""
    (tmp_path / "fake_substrates.py").write_text(
        textwrap.dedent(
            """
            from pytest_rollout_tax import hookimpl
            from pytest_rollout_tax.substrates.local import LocalSubstrate

            class FakeSubstrate(LocalSubstrate):
                kind = "fake"

            @hookimpl
            def rollout_tax_substrates():
                return {"fake": FakeSubstrate}
            """
        )
    )
    dist = tmp_path / "fake_substrates-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-substrates\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[rollout_tax]\nfake = fake_substrates\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    substrate = get_substrate("fake")
    assert type(substrate).__name__ == "FakeSubstrate"
    with substrate.start() as sandbox:
        assert sandbox.exec("echo plugged").stdout == "plugged\n"


@pytest.mark.parametrize(
    ("name", "kind", "extra", "hidden"),
    [
        ("docker-session", "docker", "docker", "docker"),
        ("k8s", "k8s", "k8s", "yaml"),
        ("e2b", "e2b", "e2b", "httpx"),
        ("ec2-session", "ec2", "aws", "boto3"),
        ("daytona", "daytona", "daytona", "daytona"),
        ("modal", "modal", "modal", "modal"),
    ],
)
def test_a_missing_extra_reads_one_way_naming_the_variant(monkeypatch, name, kind, extra, hidden):
    """Finding 14: one message shape for every substrate whose extra is not installed."""
    for module in [m for m in sys.modules if m == hidden or m.startswith(f"{hidden}.")]:
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, hidden, None)
    for module in [m for m in sys.modules if m.startswith("pytest_rollout_tax.substrates.")]:
        monkeypatch.delitem(sys.modules, module)
    with pytest.raises(ExtraMissing) as caught:
        Registry.discover().create(name, kind)
    assert str(caught.value) == (
        f"{name} needs the [{extra}] extra: pip install 'pytest-rollout-tax[{extra}]'"
    )
