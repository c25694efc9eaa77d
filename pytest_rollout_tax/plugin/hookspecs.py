"""The hook a report output implements (added with ``pytest_addhooks``)."""

from __future__ import annotations

import pytest

from ..gate.compare import Verdict
from ..outputs.outcome import OutputResult, SessionOutcome
from ..report.document import Report
from ..summary.sections import Summary


@pytest.hookspec
def pytest_rollout_tax_report(
    config: pytest.Config,
    report: Report,
    summary: Summary,
    verdict: Verdict,
    outcome: SessionOutcome,
) -> OutputResult | list[str] | None:
    """Called once when the session ends, on the controller (or a serial run), with the
    finished report: every output of the plugin (``pytest_rollout_tax/outputs/``) is one
    implementation, and a third party's is one more, in a ``conftest.py`` or an installed
    plugin, with no edit to this plugin. Take the arguments you need, by name.

    :param config: the pytest config (your own options are ``config.getoption``).
    :param outcome: the session's end as one typed value,
        :class:`pytest_rollout_tax.outputs.outcome.SessionOutcome`: ``outcome.report``,
        ``outcome.summary``, ``outcome.verdict`` (the three arguments below), ``outcome.saved``
        (the files ``--rollout-save`` and ``--rollout-autosave`` wrote, before any output was
        called), ``outcome.interrupted`` (Ctrl-C: a partial run), ``outcome.baseline`` (the
        saved run ``--rollout-compare`` compared with, or None) and ``outcome.compared``.
    :param report: the :class:`pytest_rollout_tax.report.document.Report`, the typed
        ``rollout-tax/2`` report (docs/json.md): ``report.substrates[NAME]`` is a
        ``SubstrateEntry`` (``.cold_start.p50``, ``.worker_hours``, ``.projected``),
        ``report.ranking`` its ``Ranked`` items, ``report.to_dict()`` the JSON.
    :param summary: its :class:`pytest_rollout_tax.summary.sections.Summary`, sections made
        once (``decision``, ``header``, ``rows``, ``notes``, ``comparisons``, ``fleet``,
        ``warnings``, ...); ``summary.terminal.render(summary)`` gives the terminal's lines.
    :param verdict: the gate's :class:`pytest_rollout_tax.gate.compare.Verdict` (``failed``,
        ``outcomes``); without ``--rollout-compare`` it has no outcomes.
    :return: what the output did, an :class:`~pytest_rollout_tax.outputs.outcome.OutputResult`
        (``lines`` to print under the rollout-tax summary, after the summary's own lines and
        before the gate's; ``failed``: what was asked of it failed, and the run's exit status
        is then non-zero), or None. A plain list of lines is read as before: it failed when a
        line starts ``rollout-tax: error:``. An implementation that raises or returns anything
        else costs only itself: one such line names it (``plugin/output_calls.py``).

    To write the cheapest substrate's worker-hours into a file of your own, do something
    like this:

    .. sourcecode:: python

        from pytest_rollout_tax.outputs.outcome import OutputResult

        def pytest_rollout_tax_report(config, outcome):
            best = outcome.report.ranking[0]
            path = config.rootpath / "hours.txt"
            try:
                path.write_text(f"{best.substrate} {best.worker_hours:.0f}\\n")
            except OSError as exc:
                return OutputResult.error(f"cannot write {path}: {exc}")
            return OutputResult((f"hours written to {path}",))

    An output written for the older arguments goes on working unchanged:

    .. sourcecode:: python

        def pytest_rollout_tax_report(config, report, summary, verdict):
            best = report.ranking[0]
            path = config.rootpath / "hours.txt"
            path.write_text(f"{best.substrate} {best.worker_hours:.0f}\\n")
            return [f"hours written to {path}"]
    """
    raise NotImplementedError  # a specification: pluggy calls the implementations
