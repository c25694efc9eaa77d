"""No secret in any text the report keeps, on every substrate (docs/api.md, "Secrets"): every
``env`` value a rollout passed to ``exec`` and every credential the substrate holds."""

from __future__ import annotations

import json

import pytest

from pytest_rollout_tax import Rollout
from pytest_rollout_tax.page import plots

# Imported before pytester's in-process runs, which unload what they import (matplotlib's C
# extensions cannot be imported twice into one process).
plots.require()

CANARY = "canary-7f3a9c1e-env-value"
WORKLOAD = f"""
import json
import pytest

@pytest.mark.trajectory
def test_leaks(sandbox, substrate):
    result = sandbox.exec("echo $TOKEN", env={{"TOKEN": "{CANARY}"}})
    with open("secrets.json", "w") as out:
        json.dump(substrate.secrets, out)
    pytest.fail("got " + result.stdout + " with " + " ".join(substrate.secrets))
"""


def test_env_values_and_credentials_never_reach_the_report(pytester, selected_substrate):
    """Finding 9: an echoed env value reached the JSON, the HTML, the saved run and the
    summary's "failures:" line through the failure message."""
    pytester.makepyfile(test_leak=WORKLOAD)
    result = pytester.runpytest(
        *selected_substrate.args,
        "--rollout-json=r.json",
        "--rollout-html=r.html",
        "--rollout-save=run",
        "--rollout-storage=runs",
        "--tb=no",
        "-rN",  # pytest's own failure report is not ours: only the plugin's text is checked
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(failed=1)
    secrets = [CANARY, *json.loads((pytester.path / "secrets.json").read_text())]
    report = json.loads((pytester.path / "r.json").read_text())
    (rollout,) = report["rollouts"]
    assert rollout["error"].startswith("got [REDACTED]")
    texts = {
        "summary": result.stdout.str() + result.stderr.str(),
        "json": (pytester.path / "r.json").read_text(),
        "html": (pytester.path / "r.html").read_text(),
        "saved run": (pytester.path / "runs" / "run.json").read_text(),
    }
    assert "failures:" in texts["summary"]
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"{secret[:4]}... in the {where}"


@pytest.mark.parametrize("value", ["short", ""])
def test_values_too_short_to_be_secrets_are_left_as_they_are(value):
    """A value under six characters would redact every word it is part of."""
    rollout = Rollout(secrets={value})
    rollout.fail("a short message")
    assert rollout.error == "a short message"
