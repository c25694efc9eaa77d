"""URLs checked before the run and shown only without their credentials (core/urls.py)."""

from __future__ import annotations

import pytest

from pytest_rollout_tax.core.urls import check_url, redact_text, redact_url, url_secrets


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:secret@host:443/x", "https://host:443/x"),
        ("http://127.0.0.1:80", "http://127.0.0.1:80"),
        ("http://TOKEN123456@host", "http://host"),
        ("http://user:p@ss/word@host:9091/p", "http://host:9091/p"),
        (
            "https://host/v1?api_key=k3y-value&job=x&X-Amz-Signature=abcdef&access_token=t0k",
            "https://host/v1?api_key=[REDACTED]&job=x&X-Amz-Signature=[REDACTED]"
            "&access_token=[REDACTED]",
        ),
        ("http://user:pw@[::1", "http://[::1"),  # malformed: redacted as text, never raised
        ("notaurl", "notaurl"),
    ],
)
def test_a_url_is_shown_without_its_credentials(url, shown):
    assert redact_url(url) == shown


def test_the_secrets_of_a_url_are_redacted_wherever_an_error_quotes_them():
    url = "http://bob:hunter2%2Fx@gw:9091/?password=letmein99"
    assert set(url_secrets(url)) >= {"hunter2%2Fx", "hunter2/x", "letmein99"}
    error = "auth failed for bob:hunter2/x (password=letmein99) at " + url
    redacted = redact_text(error, url)
    for secret in ("hunter2", "letmein99"):
        assert secret not in redacted
    assert "http://gw:9091/?password=[REDACTED]" in redacted


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:4318", "https://otel.example.com/v1/traces", "http://[::1]:9091"]
)
def test_a_url_an_exporter_can_reach_is_accepted(url):
    assert check_url(url, "--x") == url


def test_a_gateway_without_a_scheme_is_http_as_prometheus_client_reads_it():
    assert check_url("127.0.0.1:9091", "--push", bare="http") == "127.0.0.1:9091"
    with pytest.raises(ValueError, match=r"^--push='gw:0': its port is not a number"):
        check_url("gw:0", "--push", bare="http")
    with pytest.raises(ValueError, match=r"^--x='127.0.0.1:9091': no scheme"):
        check_url("127.0.0.1:9091", "--x")  # an OTLP endpoint has a scheme


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://[::1", "--x='http://[::1': not a URL (Invalid IPv6 URL)"),
        ("notaurl", "--x='notaurl': no scheme; expected http://HOST[:PORT][/PATH]"),
        ("ftp://gw:21", "--x='ftp://gw:21': scheme 'ftp'; expected http://"),
        ("localhost:9091", "--x='localhost:9091': scheme 'localhost'"),
        ("http://:4318", "--x='http://:4318': no valid host"),
        ("http://host:99999", "--x='http://host:99999': its port is not a number from 1 to"),
        ("http://host:abc", "--x='http://host:abc': its port is not a number"),
        ("http://host:0", "--x='http://host:0': its port is not a number"),
        ("http://u:PASSWORD1/w@host", "--x='http://host': its port is not a number"),
        ("http://host/w@x", "--x='http://x': '@' after the host; percent-encode"),
        ("http://user:PASSWORD1@[::1", "--x='http://[::1': not a URL"),
    ],
)
def test_a_url_that_can_never_work_is_one_line_naming_the_option(url, message):
    with pytest.raises(ValueError) as raised:
        check_url(url, "--x")
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value) and "PASSWORD1" not in str(raised.value)


def test_a_substrates_endpoint_reaches_the_report_without_its_credentials(monkeypatch):
    from pytest_rollout_tax import get_substrate
    from pytest_rollout_tax.substrates.local import LocalSubstrate

    endpoint = "https://bot:s3cret-pw@api.example/v1?access_token=tok-7f3a1b"
    monkeypatch.setattr(LocalSubstrate, "endpoint", property(lambda self: endpoint))
    plane = get_substrate("local").control_plane(calls=1)
    assert plane.endpoint == "https://api.example/v1?access_token=[REDACTED]"
