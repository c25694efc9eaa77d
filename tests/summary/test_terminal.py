import json
import os
import re
import socket
import stat
from collections.abc import Sequence
from contextlib import contextmanager

import pytest
from support.reports import build_report, rollout

from pytest_rollout_tax.core.control_plane import ControlPlane
from pytest_rollout_tax.core.files import check_report_path, current_umask, write_json
from pytest_rollout_tax.errors import ConfigError, NotRegularFileError
from pytest_rollout_tax.fleet.pool import PoolStats
from pytest_rollout_tax.report.aggregate import Aggregate
from pytest_rollout_tax.report.build import Fleet, summarize
from pytest_rollout_tax.report.document import SubstrateEntry
from pytest_rollout_tax.report.projection import Decomposition, Projected, Scale
from pytest_rollout_tax.report.records import Pool
from pytest_rollout_tax.summary import sections as report_module
from pytest_rollout_tax.summary.sections import shares_line
from pytest_rollout_tax.summary.terminal import render_summary
from pytest_rollout_tax.text.units import seconds


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0.00085, "850us"), (0.0123, "12.3ms"), (1.2345, "1.23s"), (125.0, "2m05s")],
)
def test_durations_read_in_the_best_unit(value, text):
    assert seconds(value) == text


def test_summary_fits_an_80_column_terminal_and_shows_every_figure():
    rollouts = [rollout("local", 0.002)] + [rollout("docker-gvisor", 0.31)] * 25
    lines = render_summary(
        build_report(rollouts, Scale(), plugin_version="1", machine={}, commit=None), width=80
    )
    assert max(map(len, lines)) <= 80, "\n".join(lines)
    text = " ".join(line.strip() for line in lines)
    assert "1,000,000 rollouts x 150 steps" in text
    assert "docker-gvisor" in text and "310ms/310ms" in text
    assert "spread: cold start p50 155x (docker-gvisor vs local)" in text
    assert "warning: too few samples, run more rounds: local 1 cold start (a p95 needs 20)" in text
    assert "docker-gvisor 25" not in text


def test_summary_shows_where_the_worker_hours_go_in_one_line_per_substrate():
    rollouts = [rollout("local", 0.002)] * 20 + [rollout("docker-gvisor", 0.31, step=0.05)] * 20
    lines = render_summary(
        build_report(rollouts, Scale(think_time_s=1), plugin_version="1", machine={}, commit=None)
    )
    assert max(map(len, lines)) <= 100, "\n".join(lines)
    text = " ".join(line.strip() for line in lines)
    # per rollout: cold 0.31 s, steps 150 x (0.025 tax + 0.025 command + 1 think), teardown 0.5
    assert (
        "docker-gvisor hours: cold start 0.2%, overhead 2.4%, command 2.4%, think 95%, "
        "teardown 0.3% (tax 2.9%) local hours: cold start <0.1%, overhead 0.5%, command 0.5%, "
        "think 99%, teardown 0.3% (tax 0.8%) worker-hours without think time" in text
    )


def test_a_pool_s_idle_time_is_a_part_where_there_is_one():
    entry = SubstrateEntry(projected=Projected(worker_hours=10.0, tax_hours=6.0,
        decomposition=Decomposition(cold_start=1.0, overhead=2.0, command=4.0, think=0.0,
                                    teardown=1.0, idle=2.0)))  # fmt: skip
    assert shares_line("docker", entry) == (
        "docker hours: cold start 10%, overhead 20%, command 40%, think 0%, teardown 10%, "
        "pool idle 20% (tax 60%)"
    )
    unprojected = Projected(worker_hours=None, tax_hours=None, decomposition=None)
    assert shares_line("docker", SubstrateEntry(projected=unprojected)) is None


def test_summary_lists_failure_reasons_and_success_rate():
    rollouts = [rollout("docker", 0.2), rollout("docker", None, outcome="error", error="boom")]
    text = "\n".join(
        render_summary(build_report(rollouts, Scale(), plugin_version="1", machine={}, commit=None))
    )
    assert "docker: 50% of rollouts succeeded; failures: 1x boom" in text


def test_an_unbound_rollout_is_a_failure_named_by_its_outcome_with_its_reason():
    why = "ClaimUnbound: k8s: SandboxClaim rollout-tax-<id> unbound after 1 s (k8s.ready_timeout)"
    rollouts = [
        rollout("k8s-claim", 0.2),
        rollout("k8s-claim", None, outcome="unbound", error=why),
    ]
    report = build_report(rollouts, Scale(), plugin_version="1", machine={}, commit=None)
    entry = report.substrates["k8s-claim"]
    assert (entry.failures, entry.unbound) == (1, 1)
    assert entry.failure_reasons == {why: 1}
    assert [r["outcome"] for r in report.rollouts] == ["passed", "unbound"]
    text = "\n".join(render_summary(report, 200))
    assert f"k8s-claim: 50% of rollouts succeeded (1 unbound); failures: 1x {why}" in text
    plain = build_report(
        [rollout("k8s", 0.2)], Scale(), plugin_version="1", machine={}, commit=None
    )
    assert "unbound" not in plain.to_dict()["substrates"]["k8s"]


def test_a_users_pool_gets_one_line_and_no_idle_in_the_projection_or_the_comparison():
    records = [rollout("k8s-claim", 0.1), rollout("k8s", 1.0)]
    for record in records:
        record.kind = "k8s"
    users = PoolStats(size=3, hits=2, misses=0, made_by_tool=False)
    report = summarize(
        Aggregate.of(records),
        Scale(),
        plugin_version="1",
        machine={},
        commit=None,
        fleet=Fleet(pools={"k8s-claim": users}),
    )
    entry = report.substrates["k8s-claim"]
    assert entry.pool.made_by_tool is False and entry.projected.decomposition.idle == 0
    text = " ".join(" ".join(render_summary(report, 300)).split())
    assert (
        "k8s-claim warm pool of 3 is the user's, not made by the tool: its idle time is not "
        "counted, in the summary or the projection (2/2 claims found a sandbox ready)"
    ) in text
    assert "k8s-claim vs k8s, pool of 3 vs none" in text
    assert "idle not counted (the user's pool)" in text
    assert "pays for itself" not in text and "costs more" not in text


def test_the_summary_notes_a_per_step_tax_capped_at_the_step():
    docker = rollout("docker", 0.25, step=0.04)
    docker.action_probes_s = [0.052] * 3
    local = rollout("local", 0.002, step=0.01)  # probes (5ms) faster than its steps: no note
    lines = render_summary(
        build_report([docker, local], Scale(), plugin_version="1", machine={}, commit=None)
    )
    assert max(map(len, lines)) <= 100
    text = " ".join(line.strip() for line in lines)
    assert text.count("note: ") == 1
    assert (
        "note: docker's no-op probe (52ms) is slower than its mean step (40ms); its per-step tax "
        "is capped at the step" in text
    )


def variant(name, kind, transport, action_s):
    record = rollout(name, 0.25, step=0.06)
    record.kind, record.transport = kind, transport
    record.action_probes_s = [action_s] * 3
    return record


def test_variants_of_one_kind_are_compared_with_its_exec_transport():
    rollouts = [
        variant("docker", "docker", "exec", 0.050),
        variant("docker-session", "docker", "session", 0.002),
        variant("local", "local", "exec", 0.001),
    ]
    report = build_report(rollouts, Scale(), plugin_version="1", machine={}, commit=None)
    assert report.substrates["docker-session"].kind == "docker"
    assert report.substrates["docker-session"].transport == "session"
    saved = (0.050 - 0.002) * 150 * 1_000_000 / 3600
    summary = render_summary(report, width=200)
    lines = [line for line in summary if " vs " in line and "spread" not in line]
    assert lines == [
        f"docker-session vs docker, transport session vs exec: step overhead 0.04x, "
        f"-{saved:,.0f} tax-hours; not tested against the noise (threshold alone: 1/1 "
        "rollouts, the noise test needs 5 a side)"  # its noise verdict
    ]


def test_without_a_second_variant_or_with_old_records_no_line_is_added():
    old = rollout("docker", 0.25)  # recorded before kinds were: no kind, no comparison
    report = build_report(
        [old, variant("local", "local", "exec", 0.001)],
        Scale(),
        plugin_version="1",
        machine={},
        commit=None,
    )
    assert report.substrates["docker"].kind is None
    assert not [line for line in render_summary(report) if " vs " in line and "action" in line]


def test_write_json_is_atomic(tmp_path):
    target = tmp_path / "sub" / "report.json"
    write_json(target, {"a": 1})
    with pytest.raises(ValueError):
        write_json(target, {"a": float("nan")})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_a_priced_substrate_with_think_time_still_fits_80_columns():
    priced = rollout("docker-gvisor", 38.0)
    priced.price_per_hour = 0.0416
    data = build_report(
        [priced], Scale(think_time_s=2.5), plugin_version="1", machine={}, commit=None
    )
    lines = render_summary(data, width=80)
    assert max(map(len, lines)) <= 80, "\n".join(lines)
    cost = data.substrates["docker-gvisor"].dollars
    assert cost == pytest.approx(data.substrates["docker-gvisor"].worker_hours * 0.0416)
    text = " ".join(line.strip() for line in lines)
    assert f"docker-gvisor dollars: ${cost:,.0f} for 1,000,000 rollouts" in text
    assert "at $0.0416 per sandbox-hour (your price)" in text


@pytest.mark.parametrize(("value", "text"), [(0.0009996, "1ms"), (0.9996, "1s"), (119.6, "2m00s")])
def test_durations_at_unit_boundaries_never_read_in_exponent_notation(value, text):
    assert seconds(value) == text


@contextmanager
def umask(mask: int):
    """Run the block under ``mask``, then restore the process's umask."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def special_files(tmp_path):
    """A path of each kind that is not a regular file, none of them a real device to clobber."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "sock"))
    listener.close()
    (tmp_path / "to-null").symlink_to("/dev/null")
    (tmp_path / "to-full").symlink_to("/dev/full")
    (tmp_path / "loop").symlink_to("loop")
    return {
        "fifo": (fifo, "not a regular file (a fifo)"),
        "socket": (tmp_path / "sock", "not a regular file (a socket)"),
        "null": (tmp_path / "to-null", "it resolves to /dev/null, a character device"),
        "full": (tmp_path / "to-full", "it resolves to /dev/full, a character device"),
        "loop": (tmp_path / "loop", "a symbolic link loop"),
    }


def test_write_json_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "runs").mkdir()
    real = tmp_path / "runs" / "real.json"
    real.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to("runs/real.json")
    assert write_json(link, {"a": 1}) == link
    assert link.is_symlink() and os.readlink(link) == "runs/real.json"
    assert json.loads(real.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["real.json", "report.json", "runs"]
    dangling = tmp_path / "new.json"
    dangling.symlink_to("runs/new-target.json")
    write_json(dangling, {"b": 2})
    assert dangling.is_symlink() and json.loads((tmp_path / "runs" / "new-target.json").read_text())


@pytest.mark.parametrize("kind", ["fifo", "socket", "null", "full", "loop"])
def test_write_json_never_replaces_what_is_not_a_regular_file(tmp_path, kind):
    path, message = special_files(tmp_path)[kind]
    before = os.lstat(path)
    with pytest.raises(NotRegularFileError, match=re.escape(message)):
        write_json(path, {"a": 1})
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.parametrize("kind", ["fifo", "socket", "null", "full", "loop"])
def test_a_json_path_that_is_not_a_regular_file_is_a_usage_error(tmp_path, kind):
    path, message = special_files(tmp_path)[kind]
    with pytest.raises(ConfigError, match=re.escape(f"--rollout-json={path}: ")) as caught:
        check_report_path(path, f"--rollout-json={path}")
    assert message in str(caught.value)


def test_a_device_node_as_report_path_names_the_device():
    with pytest.raises(ConfigError) as caught:
        check_report_path("/dev/full", "report /dev/full")
    assert str(caught.value) == (
        "report /dev/full: not a regular file (a character device); "
        "name a regular file or a new one"
    )


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_write_json_gives_the_mode_of_the_umask_and_stays_atomic(tmp_path, mask, mode):
    target = tmp_path / "report.json"
    target.write_text("{}")
    target.chmod(0o600)
    with umask(mask):
        write_json(target, {"a": 1})
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="no /proc")
def test_the_umask_is_read_without_changing_it(monkeypatch):
    with umask(0o027), monkeypatch.context() as patch:
        patch.setattr(os, "umask", lambda mask: pytest.fail("the umask was changed"))
        assert current_umask() == 0o027


def test_without_proc_the_umask_is_read_by_a_round_trip(monkeypatch):
    def no_proc(*args, **kwargs):
        raise FileNotFoundError("/proc/self/status")

    monkeypatch.setattr(report_module, "open", no_proc, raising=False)
    with umask(0o037):
        assert current_umask() == 0o037
        assert os.umask(0o037) == 0o037  # and it is left as it was


def test_write_json_is_compact_and_streams_long_lists_item_by_item(tmp_path):
    class Items(Sequence):
        """A list made on demand, as the report's rollouts[] is."""

        def __len__(self):
            return 3

        def __getitem__(self, index):
            if index >= 3:
                raise IndexError(index)
            return {"i": index, "x": [0.5]}

    path = write_json(tmp_path / "r.json", {"a": 1, "rows": Items(), "b": {"c": None}})
    text = path.read_text()
    assert (
        text == '{"a":1,"rows":[{"i":0,"x":[0.5]},{"i":1,"x":[0.5]},{"i":2,"x":[0.5]}],'
        '"b":{"c":null}}\n'
    )


def test_every_percentile_shown_warns_when_its_samples_are_too_few():
    """25 cold starts are enough for a p95; their 3 probes each (75) too; 1 teardown of a
    lone rollout is not enough for a p50, nor 1 step."""
    many = [rollout("docker", 0.3)] * 25
    lone = rollout("local", 0.002, steps=1)
    lone.action_probes_s = [0.001] * 7
    text = " ".join(line.strip() for line in
        render_summary(build_report([*many, lone], Scale(), plugin_version="1", machine={},
                                    commit=None))
    )  # fmt: skip
    assert text.count("warning: ") == 1 and "docker 25" not in text
    assert (
        "warning: too few samples, run more rounds: local 1 cold start (a p95 needs 20), "
        "7 probes (a p95 needs 20), 1 step (a p50 needs 2), 1 teardown (a p50 needs 2)"
    ) in text


def test_the_summary_states_round_trips_and_stand_ins():
    machine = {"platform": "Linux-x", "cpu_count": 2, "ci": "GitHub Actions"}
    rollouts = [rollout("e2b", 0.3), rollout("docker", 0.2)]
    data = build_report(rollouts, Scale(), plugin_version="1", machine=machine, commit=None)
    data.substrates["e2b"].control_plane = ControlPlane("http://127.0.0.1:49152", 0.0021, True)
    data.substrates["docker"].control_plane = ControlPlane(
        "unix:///var/run/docker.sock", None, False
    )
    data.substrates["e2b"].kind = "e2b"
    text = " ".join(line.strip() for line in render_summary(data))
    assert (
        "control-plane round trip from this client (Linux-x, 2 CPUs, GitHub Actions): "
        "docker failed (unix:///var/run/docker.sock); e2b 2.1ms (http://127.0.0.1:49152)"
    ) in text
    assert (
        "warning: e2b's figures come from a local stand-in at http://127.0.0.1:49152, not the "
        "real e2b service"
    ) in text
    assert "docker's figures come from" not in text


def test_a_variant_differing_in_two_aspects_is_compared_on_each_and_says_so():
    docker = variant("docker", "docker", "exec", 0.050)
    both = variant("docker-both", "docker", "session", 0.002)
    report = build_report([docker, both], Scale(), plugin_version="1", machine={}, commit=None)
    report.substrates["docker-both"].pool = Pool(size=2, hits=1, idle_sandbox_s=4.0)
    text = " ".join(line.strip() for line in render_summary(report, width=200))
    assert "docker-both vs docker, transport session vs exec: step overhead 0.04x" in text
    assert "(its pool differs too)" in text and "(its transport differs too)" in text
    assert "docker-both vs docker, pool of 2 vs none: cold start p50 250ms (claim) vs 250ms" in text
    assert "idle 4s per rollout" in text


@pytest.mark.parametrize(("claim", "saving"), [(0.806, "costs 55ms more cold start"),
                                               (0.159, "saves 592ms of cold start")])  # fmt: skip
def test_a_pools_saving_is_signed_by_which_path_is_faster(claim: float, saving: str):
    """Issue 30, item 9: a claim slower than a creation costs cold start; the line said ``it
    saves`` (a clamped 0us, or a saving quoted beside a slower claim)."""
    records = [rollout("docker-pool", claim) for _ in range(4)]
    pool = PoolStats(size=2, hits=4, misses=0, idle_sandbox_s=4.0, creation_s=[0.751] * 4)
    report = summarize(Aggregate.of(records), Scale(), plugin_version="1", machine={},
                       commit=None, fleet=Fleet(pools={"docker-pool": pool}))  # fmt: skip
    text = " ".join(" ".join(render_summary(report, 300)).split())
    assert f"per rollout a claim {saving}" in text
    assert f"(means: claim {seconds(claim)}, creation 751ms) and adds 1s idle" in text
    if claim > 0.751:
        assert "saves" not in text and "idle: it only costs" in text
