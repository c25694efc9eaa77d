"""The page lays out a training run's lines as a section of its own, and none without them."""

from __future__ import annotations

import pytest
from support.train_logs import two_substrate_report

from pytest_rollout_tax.page import html

pytest.importorskip("matplotlib")


def test_the_training_lines_are_a_section_escaped():
    report = two_substrate_report()
    page = html.render(report, train_log=["environment: 20.0 % <of> trajectory time"])
    assert '<section id="train-log">\n<h2>Your training run</h2>' in page
    assert "environment: 20.0 % &lt;of&gt; trajectory time" in page
    assert 'href="#train-log"' in page
    assert 'id="train-log"' not in html.render(report)
