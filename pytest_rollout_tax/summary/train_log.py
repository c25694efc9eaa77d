"""The training section's lines (``training/``): the run's own figures, then what each
measured substrate would change and on what assumptions; the terminal, the command line and
the page print the same."""

from __future__ import annotations

from ..text.units import seconds
from ..train_logs.section import Training
from ..train_logs.whatif import ASSUMPTIONS, WhatIf


def pct(fraction: float) -> str:
    """``22.8 %``."""
    return f"{fraction * 100:.1f} %"


def gpu_hours(value: float) -> str:
    return f"{abs(value):,.1f} GPU-hours {'less' if value >= 0 else 'more'}"


def training_lines(section: Training) -> list[str]:
    log, run = section.log, section.figures
    files = ", ".join(f"{path} ({kind})" for path, kind in zip(log.paths, log.kinds, strict=True))
    steps = f"{run.steps} step{'s' * (run.steps != 1)}"
    lines = [f"training log: {log.stack.name}, {steps}, from {files}"]
    if run.wait_share_p50 is not None and run.wait_share_p90 is not None:
        lines.append(
            f"trainer wait: {pct(run.wait_share_p50)} of step time (median), "
            f"{pct(run.wait_share_p90)} at p90; {seconds(run.wait_s)} waited of "
            f"{seconds(run.wall_s)}"
        )
    elif run.wait_s is not None:
        lines.append(f"trainer wait: {seconds(run.wait_s)} (no step wall clock logged)")
    if run.environment_share is not None:
        lines.append(
            f"environment: {pct(run.environment_share)} of trajectory time on your run "
            f"({seconds(run.tool_s)} in tools, {seconds(run.trajectory_generation_s)} "
            "generating, per trajectory)"
        )
    else:
        lines.append(f"environment: {log.stack.name} logs no tool time per trajectory")
    if run.environment_share is not None:
        shown = ", ".join(map(str, run.stragglers[:10])) + (", ..." * (len(run.stragglers) > 10))
        lines.append(
            f"straggler steps (slowest trajectory longer in tools than generating): "
            f"{len(run.stragglers)} of {run.steps}" + (f": {shown}" if shown else "")
        )
    if run.idle_gpu_hours is not None:
        lines.append(
            f"idle GPU-hours: {run.idle_gpu_hours:,.1f} over this run on {run.gpus} GPUs "
            "(the trainer's wait)"
        )
    lines += what_if_lines(section)
    return lines


def what_if_lines(section: Training) -> list[str]:
    if not section.what_ifs:
        return [f"what another substrate would change: {section.no_what_if}"]
    run = section.figures
    assert run.environment_share is not None  # what-ifs need the tool time
    base = (
        f"the run's environment on {section.ran_on}"
        if section.ran_on
        else "the run's tool time taken as free of sandbox tax (--ran-on names its substrate)"
    )
    lines = [
        f"what another substrate would change (report {section.report_label or '-'}; "
        f"{section.steps} tool calls per trajectory; {base}):"
    ]
    lines += [substrate_line(run.environment_share, w) for w in section.what_ifs]
    lines.append("assumptions: " + "; ".join(ASSUMPTIONS))
    return lines


def substrate_line(share: float, what: WhatIf) -> str:
    """``environment: 22.8 % of trajectory time on your run; on docker-session it would be
    30.1 %; the trainer would wait 4.0 % more; 2.2 GPU-hours more over this run``."""
    line = (
        f"environment: {pct(share)} of trajectory time on your run; on {what.substrate} it "
        f"would be {pct(what.environment_share)} ({what.change_s:+.2f} s per trajectory)"
    )
    if what.wait_less is not None:
        less = what.wait_less
        line += f"; the trainer would wait {pct(abs(less))} {'less' if less >= 0 else 'more'}"
    if what.gpu_hours_saved is not None:
        line += f"; {gpu_hours(what.gpu_hours_saved)} over this run"
    return line
