import json

import pytest
from test_summary import rollout

from pytest_rollout_tax.projection import Scale
from pytest_rollout_tax.report import render_summary, seconds, write_json
from pytest_rollout_tax.summary import build_report


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0.00085, "850us"), (0.0123, "12.3ms"), (1.2345, "1.23s"), (125.0, "2m05s")],
)
def test_durations_read_in_the_best_unit(value, text):
    assert seconds(value) == text


def test_summary_fits_a_100_column_terminal_and_shows_every_figure():
    rollouts = [rollout("local", 0.002)] + [rollout("docker-gvisor", 0.31)] * 25
    lines = render_summary(
        build_report(rollouts, Scale(), plugin_version="1", machine={}, commit=None)
    )
    assert max(map(len, lines)) <= 100, "\n".join(lines)
    text = "\n".join(lines)
    assert "1,000,000 rollouts x 150 steps" in text
    assert "docker-gvisor" in text and "310ms/310ms" in text
    assert "spread: cold start p50 155x (docker-gvisor vs local)" in text
    assert "warning: local has 1 cold-start sample(s)" in text
    assert "warning: docker-gvisor" not in text


def test_summary_lists_failure_reasons_and_success_rate():
    rollouts = [rollout("docker", 0.2), rollout("docker", None, outcome="error", error="boom")]
    text = "\n".join(
        render_summary(build_report(rollouts, Scale(), plugin_version="1", machine={}, commit=None))
    )
    assert "docker: 50% of rollouts succeeded; failures: 1x boom" in text


def test_write_json_is_atomic(tmp_path):
    target = tmp_path / "sub" / "report.json"
    write_json(target, {"a": 1})
    with pytest.raises(ValueError):
        write_json(target, {"a": float("nan")})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_a_priced_substrate_with_think_time_still_fits_100_columns():
    priced = rollout("docker-gvisor", 38.0)
    priced.price_per_hour = 0.0416
    data = build_report(
        [priced], Scale(think_time_s=2.5), plugin_version="1", machine={}, commit=None
    )
    lines = render_summary(data)
    assert max(map(len, lines)) <= 100, "\n".join(lines)
    cost = data["substrates"]["docker-gvisor"]["cost_usd"]
    assert cost == pytest.approx(data["substrates"]["docker-gvisor"]["worker_hours"] * 0.0416)
    assert f"the projected worker-hours cost ${cost:,.0f} at $0.0416 per sandbox-hour" in " ".join(
        lines
    )


@pytest.mark.parametrize(("value", "text"), [(0.0009996, "1ms"), (0.9996, "1s"), (119.6, "2m00s")])
def test_durations_at_unit_boundaries_never_read_in_exponent_notation(value, text):
    assert seconds(value) == text
