"""Canaries: a secret handed to the plugin (an ``exec(env=)`` value, a substrate's ``env`` value,
a secret a ``prepare`` step was given, a credential in an exporter's URL) reaches no output: not
the terminal, the JSON report, the HTML page, the saved run, the exported telemetry, nor
pytest's own output of a test that raised nothing holding it. Each secret sits where a cut
would keep a part of it, were it cut before redaction."""

from __future__ import annotations

import urllib.request

import pytest

# the page's plots; imported once here, as pytester restores sys.modules after each test
pytest.importorskip("matplotlib")

STEP_SECRET = "canary-step-3f9a2c71d0"
OPTION_SECRET = "canary-option-8b41e6"
PREPARE_SECRET = "canary-prepare-c0ffee42"
TIMEOUT_SECRET = "canary-timeout-77aa01"
#: Credentials in the exporters' URLs: a password, and a query parameter named like a key.
OTLP_SECRET = "canary-otlp-5a7d0e"
OTLP_KEY = "canary-otlpkey-91b3c4"
PUSH_SECRET = "canary-push-e8f21b"
SECRETS = (
    STEP_SECRET, OPTION_SECRET, PREPARE_SECRET, TIMEOUT_SECRET, OTLP_SECRET, OTLP_KEY, PUSH_SECRET
)  # fmt: skip

SUITE = f"""
import pytest

# pytest prints a failing test's source: the secrets come from module constants
STEP = "{STEP_SECRET}"
PREPARE = "{PREPARE_SECRET}"
TIMEOUT = "{TIMEOUT_SECRET}"


def test_failure_straddles_the_cut(sandbox):
    sandbox.exec("true", env={{"TOKEN": STEP}})
    pytest.fail("x" * 190 + STEP)


def test_option_env_is_a_secret(sandbox):
    out = sandbox.exec("echo $OPTION_TOKEN").stdout.strip()
    pytest.fail("y" * 190 + out)


def setup(sandbox):
    sandbox.exec("true", env={{"TOKEN": PREPARE}})
    raise ValueError("z" * 260 + PREPARE)


@pytest.mark.trajectory(prepare=setup)
def test_prepare_fails(sandbox):
    pass


def test_step_times_out(sandbox):
    sandbox.exec("sleep 30", env={{"TOKEN": TIMEOUT}}, timeout=0.5)
"""


@pytest.mark.parametrize("substrate", ["local", "docker"])
def test_no_secret_in_any_output(pytester, substrate, otlp_receiver, prometheus):
    pytester.makepyfile(test_canary=SUITE)
    collector = otlp_receiver.endpoint.replace("http://", f"http://canary:{OTLP_SECRET}@")
    gateway = prometheus.pushgateway.replace("http://", f"http://canary:{PUSH_SECRET}@")
    result = pytester.runpytest_subprocess(
        "--tb=long",
        "--rollout-probes=0",
        f"--substrate={substrate}",
        f"--substrate-opt={substrate}.env=OPTION_TOKEN={OPTION_SECRET}",
        "--rollout-json=report.json",
        "--rollout-html=report.html",
        "--rollout-save=canary",
        "--rollout-storage=runs",
        f"--rollout-otlp={collector}/?api_key={OTLP_KEY}",
        f"--rollout-prometheus-push={gateway}",
        "--rollout-prometheus-file=metrics.prom",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    # the test's own failure message is pytest's report, out of scope: only the two tests
    # that raised nothing holding a secret are read in pytest's output
    output = result.stdout.str() + result.stderr.str()
    ours = "\n".join(
        section
        for section in output.split("_____ ")
        if "test_prepare_fails" in section[:60] or "test_step_times_out" in section[:60]
    )
    summary = output[output.index("rollout tax") :]
    files = {
        "json": (pytester.path / "report.json").read_text(),
        "html": (pytester.path / "report.html").read_text(),
        "saved": (pytester.path / "runs" / "canary.json").read_text(),
        "exported traces and metrics": b"".join(otlp_receiver.received.raw).decode("latin-1"),
        "pushed metrics": _gateway_metrics(prometheus.pushgateway),
        "metrics file": (pytester.path / "metrics.prom").read_text(),
        "terminal summary": summary,
        "pytest output": ours,
    }
    assert "test_prepare_fails" in ours and "test_step_times_out" in ours
    assert otlp_receiver.received.spans() and f'substrate="{substrate}"' in files["pushed metrics"]
    for where, text in files.items():
        for secret in SECRETS:
            assert secret[:10] not in text, f"{secret} in the {where}"


def _gateway_metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return response.read().decode()
