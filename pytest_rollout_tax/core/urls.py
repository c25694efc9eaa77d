"""URLs the run sends to or names (an exporter's, a substrate's endpoint): checked before the
run, and shown only with their credentials redacted.

A credential in a URL is its userinfo (``user:password@``) and the value of a query parameter
named like one (``token``, ``api_key``, ``password``, ``secret``, ``signature``, ...). Any text
that may quote a URL (an exporter's error) is redacted of them too (:func:`redact_text`).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

from ..errors import redact

#: A query parameter whose value is a credential: its name holds one of these.
SECRET_PARAMETER = re.compile(
    r"token|key|pass|pwd|secret|auth|credential|signature|sig$|session", re.IGNORECASE
)
REDACTED = "[REDACTED]"
#: The schemes an exporter speaks.
HTTP = ("http", "https")
#: ``scheme://userinfo@``, up to the last ``@`` before the query: a password with an unencoded
#: ``/`` (which ends the host for a parser) is still all redacted.
_USERINFO = re.compile(r"(?P<head>//)[^?#\s]*@")
#: ``name=value`` in a query, the name one of :data:`SECRET_PARAMETER`.
_PARAMETER = re.compile(r"(?P<name>[^?&#=\s]+)=(?P<value>[^&#\s]*)")


def with_scheme(url: str, scheme: str) -> str:
    """``url``, ``scheme://`` before it when it has no scheme (``HOST:PORT``)."""
    return url if "://" in url else f"{scheme}://{url}"


def redact_url(url: str) -> str:
    """``url`` without its userinfo and with every credential parameter's value redacted;
    a URL that cannot be parsed is redacted as text, never raised about."""
    head, mark, rest = url.partition("?")
    head = _USERINFO.sub(r"\g<head>", head)
    if not mark:
        return head
    return f"{head}?{_PARAMETER.sub(_redact_parameter, rest)}"


def _redact_parameter(match: re.Match[str]) -> str:
    if SECRET_PARAMETER.search(match["name"]) and match["value"]:
        return f"{match['name']}={REDACTED}"
    return match[0]


def url_secrets(url: str) -> list[str]:
    """The credentials ``url`` holds (its password, its credential parameters' values), longest
    first: the text :func:`redact_text` removes wherever an error quotes them."""
    secrets: set[str] = set()
    userinfo = _USERINFO.search(url.partition("?")[0])
    if userinfo:
        user, _, password = userinfo[0][2:-1].partition(":")
        secrets |= {user, password, unquote(user), unquote(password)}
    query = url.partition("?")[2].partition("#")[0]
    secrets |= {
        value for name, value in parse_qsl(query) if SECRET_PARAMETER.search(name) and value
    }
    secrets.discard("")
    return sorted(secrets, key=len, reverse=True)


def redact_text(text: str, url: str) -> str:
    """``text`` (an error about ``url``) with ``url`` and each of its credentials redacted."""
    if not url:
        return text
    return redact(text.replace(url, redact_url(url)), url_secrets(url))


def check_url(
    url: str,
    name: str,
    schemes: tuple[str, ...] = HTTP,
    example: str = "http://127.0.0.1:4318",
    bare: str | None = None,
) -> str:
    """``url`` when it has one of ``schemes``, a host and a valid port (if any); else a
    ValueError in one line naming ``name`` (the option or variable) and the redacted URL, and
    showing an ``example`` of one that works. ``bare``: the scheme a URL without one has
    (``HOST:PORT``, as prometheus_client reads a gateway), else it has none."""
    shown = f"{name}={redact_url(url)!r}"
    example = f"expected {schemes[0]}://HOST[:PORT][/PATH], e.g. {example}"
    full = with_scheme(url.strip(), bare) if bare else url.strip()
    try:
        parts = urlsplit(full)
    except ValueError as exc:  # an unclosed IPv6 bracket: urllib's words quote no part of it
        raise ValueError(f"{shown}: not a URL ({str(exc).rstrip('.')}); {example}") from None
    try:
        port = parts.port
    except ValueError:  # its words quote the port, which may be a password's first part
        raise ValueError(f"{shown}: its port is not a number from 1 to 65535; {example}") from None
    if parts.scheme not in schemes:
        scheme = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise ValueError(f"{shown}: {scheme}; {example}")
    host = parts.hostname
    if not host or any(c.isspace() or c in "\\<>\"'`{}|^" for c in host):
        raise ValueError(f"{shown}: no valid host; {example}")
    if "@" in parts.path:
        raise ValueError(f"{shown}: '@' after the host; percent-encode a '/' in a password (%2F)")
    if port == 0:
        raise ValueError(f"{shown}: its port is not a number from 1 to 65535; {example}")
    return url.strip()
