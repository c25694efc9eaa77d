"""The hook a report output implements (added with ``pytest_addhooks``)."""

from __future__ import annotations

from typing import Any

import pytest

from ..report.document import Report


@pytest.hookspec
def pytest_rollout_tax_report(
    config: pytest.Config, report: Report, summary: Any, verdict: Any
) -> Any:
    """Called once when the session ends, on the controller (or a serial run), with the
    finished report: every output of the plugin (``pytest_rollout_tax/outputs/``) is one
    implementation, and a third party's is one more, in a ``conftest.py`` or an installed
    plugin, with no edit to this plugin.

    :param config: the pytest config (your own options are ``config.getoption``).
    :param report: the :class:`pytest_rollout_tax.report.document.Report`, the typed
        ``rollout-tax/2`` report (docs/json.md): ``report.substrates[NAME]`` is a
        ``SubstrateEntry`` (``.cold_start.p50``, ``.worker_hours``, ``.projected``),
        ``report.ranking`` its ``Ranked`` items, ``report.to_dict()`` the JSON.
    :param summary: its :class:`pytest_rollout_tax.summary.sections.Summary`, sections made
        once (``decision``, ``header``, ``rows``, ``notes``, ``comparisons``, ``fleet``,
        ``warnings``, ...); ``summary.terminal.render(summary)`` gives the terminal's lines.
    :param verdict: the gate's :class:`pytest_rollout_tax.gate.compare.Verdict` (``failed``,
        ``outcomes``); without ``--rollout-compare`` it has no outcomes. The run is saved
        (``--rollout-save``, ``--rollout-autosave``) before any output is called: its files are
        ``config.stash[pytest_rollout_tax.outputs.SAVED]``.
    :return: None, or lines (a list of str) to print under the rollout-tax summary, after the
        summary's own lines and before the gate's; a line that starts ``rollout-tax: error:``
        (``outputs.OUTPUT_ERROR``) says the output failed, and the run's exit status is then
        non-zero. An implementation that raises or returns anything else costs only itself:
        one such line names it (``plugin/output_calls.py``).

    Example: the cheapest substrate's worker-hours into a file of your own::

        def pytest_rollout_tax_report(config, report, summary, verdict):
            best = report.ranking[0]
            path = config.rootpath / "hours.txt"
            path.write_text(f"{best.substrate} {best.worker_hours:.0f}\\n")
            return [f"hours written to {path}"]
    """
