"""report/machine.py's client saturation: CPU time over wall time, load average, the warning."""

from __future__ import annotations

import time

from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.machine import SATURATED, Saturation
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.summary.clients import client_lines


def test_saturation_counts_the_cpu_this_process_used():
    saturation = Saturation.start()
    begun = time.process_time()
    while time.process_time() - begun < 0.2:  # work, not a wait: 0.2 s of CPU
        sum(range(1000))
    found = saturation.report()
    assert found["cpu_s"] >= 0.2
    assert found["cpu_s"] / found["wall_s"] / found["cpu_count"] == found["process_cpu_share"]
    assert 0 < found["process_cpu_share"] <= 1.05
    assert 0 <= found["machine_cpu_share"] <= 1  # Linux: /proc/stat
    assert found["load_start"] is not None and found["load_end"] is not None
    shares = (found["process_cpu_share"], found["machine_cpu_share"])
    assert found["saturated"] == (max(shares) > SATURATED)


def of_client(client: dict) -> Report:
    """A report of no substrates whose client facts are ``client``."""
    return Report(Scale(), {}, [], plugin_version="test", machine={}, client=client)


def test_the_summary_warns_only_when_this_client_was_saturated():
    busy = {"cpu_count": 4, "process_cpu_share": 0.95, "machine_cpu_share": None,
            "load_start": 3.9, "load_end": 4.2, "saturated": True}  # fmt: skip
    assert client_lines(of_client({"shard": None, "start_at": None, "saturation": busy})) == [
        "warning: this client was saturated: CPU 95% of 4 cores, load 3.90 -> 4.20 (> 90%); its "
        "timings include client-side queueing: spread the run over more machines"
    ]
    calm = {**busy, "process_cpu_share": 0.2, "saturated": False}
    assert client_lines(of_client({"saturation": calm})) == []
