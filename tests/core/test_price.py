"""The price options every substrate takes, and the rate sheet they override."""

from __future__ import annotations

from datetime import date

import pytest

from pytest_rollout_tax.core.price import PriceOptions, Rate, Resources
from pytest_rollout_tax.core.prices import rate_for, sheet
from pytest_rollout_tax.errors import ConfigError
from pytest_rollout_tax.substrates.registry import get_substrate


def test_price_options_come_dotted_or_as_a_table():
    dotted = get_substrate("local", **{"price.instance_hour": "0.4", "price.share": "8"})
    table = get_substrate("local", price={"instance_hour": 0.4, "share": 8})
    assert dotted.options.price == table.options.price == PriceOptions(instance_hour=0.4, share=8)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"price.vcpu_hour": "inf"}, "local.price.vcpu_hour=inf: expected 0 to 1e+06"),
        ({"price.gib_hour": "-1"}, "local.price.gib_hour=-1.0: expected 0 to 1e+06"),
        ({"price.share": "0"}, "local.price.share=0: expected 1 to 100000 sandboxes"),
        ({"price.min_billed_s": "1e9"}, "local.price.min_billed_s=1000000000.0: expected 0"),
        ({"price.bogus": "1"}, "local.price.bogus: unknown option"),
        ({"price": "3"}, "local.price='3': expected price.KEY=VALUE options"),
    ],
)
def test_a_bad_price_is_one_line_naming_it(options, message):
    with pytest.raises(ConfigError, match="^" + message.replace("+", r"\+").replace(".", r"\.")):
        get_substrate("local", **options)


def test_local_and_docker_have_no_list_price():
    assert rate_for("local", Resources(), PriceOptions()) is None
    assert rate_for("docker", Resources(vcpus=2, gib=4), PriceOptions()) is None


def test_a_list_price_bills_the_substrates_resources():
    rate = rate_for("e2b", Resources(vcpus=1, gib=2), PriceOptions())
    assert rate.sandbox_hour == pytest.approx(0.0504 + 2 * 0.0162)
    assert rate.source == sheet()["e2b"]["source"] and not rate.yours


def test_the_users_price_overrides_the_sheet_and_is_labelled_theirs():
    rate = rate_for("e2b", Resources(vcpus=1, gib=2), PriceOptions(vcpu_hour=0.1, gib=1))
    assert rate.sandbox_hour == pytest.approx(0.1 + 0.0162)
    assert rate.yours and rate.as_of is None


def test_ec2_is_priced_by_instance_type_with_a_minimum():
    rate = rate_for("ec2", Resources(instance_type="c7i.large"), PriceOptions())
    assert (rate.sandbox_hour, rate.min_billed_s) == (0.08925, 60)
    assert rate_for("ec2", Resources(instance_type="x9.huge"), PriceOptions()) is None


def test_a_machine_price_is_shared_between_its_sandboxes():
    rate = rate_for("docker", Resources(), PriceOptions(instance_hour=0.8, share=8))
    assert rate.sandbox_hour == pytest.approx(0.1)


def test_a_rate_sheet_older_than_a_year_is_stale():
    rate = Rate(vcpu_hour=1, vcpus=1, source="list", as_of="2025-01-01")
    assert rate.stale(date(2026, 1, 2)) and not rate.stale(date(2025, 12, 31))
    assert not Rate(vcpu_hour=1).stale(date(2100, 1, 1))  # the user's own price never is


def test_every_shipped_price_names_its_source_and_day():
    for kind, entry in sheet().items():
        assert entry["source"].startswith("https://"), kind
        date.fromisoformat(entry["as_of"])


def test_the_prices_command_prints_the_sheet_in_use(capsys):
    from pytest_rollout_tax.cli import main

    assert main(["prices"]) == 0
    out = capsys.readouterr().out
    for kind, entry in sheet().items():
        assert f"{kind}: {entry['billing']}; {entry['source']}" in out
    assert "c7i.large 0.08925" in out and "NAME.price.instance_hour=D" in out


def test_a_price_by_size_without_a_known_size_is_no_price_never_zero_dollars():
    assert rate_for("daytona", Resources(), PriceOptions()) is None
    assert rate_for("k8s", Resources(), PriceOptions()) is None  # no requests set
    given = rate_for("daytona", Resources(), PriceOptions(vcpus=2, gib=4))
    assert given.sandbox_hour == pytest.approx(2 * 0.0504 + 4 * 0.0162)


@pytest.mark.parametrize(
    ("kind", "options", "vcpus", "gib"),
    [
        ("daytona", {}, 1.0, 1.0),  # Daytona's default sandbox
        ("daytona", {"image": "debian:12", "cpu": 2, "memory": 4}, 2, 4),
        ("modal", {}, 0.25, 0.125),  # Modal's default request: 0.125 cores, 128 MiB
        ("modal", {"cpu": 2.0, "memory": 4096}, 4.0, 4.0),  # a physical core is 2 vCPU
        ("e2b", {}, 2.0, 0.5),
    ],
)
def test_each_hosted_substrate_bills_its_own_size(monkeypatch, kind, options, vcpus, gib):
    for variable in ("DAYTONA_API_KEY", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "E2B_API_KEY"):
        monkeypatch.setenv(variable, "not-a-real-key")
    substrate = get_substrate(kind, **options)
    assert (substrate.resources.vcpus, substrate.resources.gib) == (vcpus, gib)
    listed = sheet()[kind]
    assert substrate.rate.sandbox_hour == pytest.approx(
        vcpus * listed["vcpu_hour"] + gib * listed["gib_hour"]
    )


def test_a_daytona_snapshot_of_ones_own_has_no_known_size(monkeypatch):
    monkeypatch.setenv("DAYTONA_API_KEY", "not-a-real-key")
    assert get_substrate("daytona", snapshot="mine").rate is None
    sized = get_substrate("daytona", snapshot="mine", price={"vcpus": 4, "gib": 8})
    assert sized.rate.sandbox_hour == pytest.approx(4 * 0.0504 + 8 * 0.0162)
