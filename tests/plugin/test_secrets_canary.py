"""Canaries: a secret handed to the plugin (an ``exec(env=)`` value, a substrate's ``env`` value,
a secret a ``prepare`` step was given, a credential in an exporter's URL) reaches no output: not
the terminal, the JSON report, the HTML page, the saved run, the exported telemetry, nor
pytest's own output of the rollout tests (their failure sections, captured output and a
fixture's teardown, in a serial run and under xdist), unless ``--rollout-no-redact`` asks.
Each secret sits where a cut would keep a part of it, were it cut before redaction."""

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
ECHO_SECRET = "canary-echo-5e5e5e5e"
SECRETS = (
    STEP_SECRET, OPTION_SECRET, PREPARE_SECRET, TIMEOUT_SECRET, ECHO_SECRET, OTLP_SECRET,
    OTLP_KEY, PUSH_SECRET,
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


def echo(sandbox):
    return sandbox.exec("echo $TOKEN", env={{"TOKEN": "{ECHO_SECRET}"}}).stdout


def test_fails_with_the_echo(sandbox):
    pytest.fail(echo(sandbox))


def test_asserts_with_the_echo(sandbox):
    out = echo(sandbox)
    assert not out, out


def test_prints_the_echo(sandbox):
    print(echo(sandbox))
    assert False


@pytest.fixture
def echoed_at_teardown(sandbox):
    yield
    raise RuntimeError(echo(sandbox))


def test_teardown_raises_the_echo(sandbox, echoed_at_teardown):
    pass
"""

RUN = ["--tb=long", "-rA", "--rollout-probes=0"]


@pytest.mark.parametrize(
    ("substrate", "xdist"), [("local", []), ("docker", []), ("local", ["-n", "2"])]
)
def test_no_secret_in_any_output(pytester, substrate, xdist, otlp_receiver, prometheus):
    pytester.makepyfile(test_canary=SUITE)
    collector = otlp_receiver.endpoint.replace("http://", f"http://canary:{OTLP_SECRET}@")
    gateway = prometheus.pushgateway.replace("http://", f"http://canary:{PUSH_SECRET}@")
    result = pytester.runpytest_subprocess(
        *RUN,
        *xdist,
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
    # pytest's own output whole: failure sections, captured output, the short summary
    output = result.stdout.str() + result.stderr.str()
    ours = output
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
    for test in ("fails_with", "asserts_with", "prints", "teardown_raises"):
        assert f"test_{test}_the_echo" in ours
    assert "Captured stdout call" in ours and "[REDACTED]" in ours
    for where, text in files.items():
        for secret in SECRETS:
            assert secret[:10] not in text, f"{secret} in the {where}"


def _gateway_metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return response.read().decode()


def test_the_switch_keeps_the_secrets_in_pytests_output(pytester):
    """``--rollout-no-redact``: pytest's sections as pytest wrote them (the plugin's own
    outputs stay redacted)."""
    pytester.makepyfile(test_canary=SUITE)
    result = pytester.runpytest_subprocess(
        *RUN, "--rollout-no-redact", "-k", "echo", "--rollout-json=report.json"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert ECHO_SECRET in result.stdout.str()
    assert ECHO_SECRET[:10] not in (pytester.path / "report.json").read_text()
