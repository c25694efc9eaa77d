"""REST calls and watches through the client's own ApiClient, with raw JSON and one-line errors.

Only ``ApiClient.param_serialize`` and ``call_api`` are used (no generated models), so a
request costs its round trip and nothing more; no message ever carries a credential.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Generator, Sequence
from typing import Any

from ...core.transport import one_line
from ...errors import SandboxError, redact
from .client import iter_resp_lines, k8s_client, urllib3
from .config import Cluster

PODS = "/api/v1/namespaces/{namespace}/pods"
POD = PODS + "/{name}"
EXEC = POD + "/exec"
EVENTS = "/api/v1/namespaces/{namespace}/events"
#: (connect, read) seconds for one REST request.
API_TIMEOUT = (10.0, 60.0)


class ApiError(SandboxError):
    """A refused or failed API request: ``k8s: `` and :attr:`detail`, never a secret; ``code``
    is the HTTP status, 0 when no answer arrived (unreachable, timed out, connection reset)."""

    def __init__(self, detail: str, code: int = 0, reason: str = "") -> None:
        super().__init__(f"k8s: {detail}")
        self.detail = detail
        self.code = code
        self.reason = reason


class Api:
    """One cluster's API server: requests, watches and the errors they end in."""

    def __init__(self, cluster: Cluster) -> None:
        self.configuration = cluster.configuration
        self.context = cluster.context
        self.namespace = cluster.namespace
        self.server: str = cluster.configuration.host
        #: (connect, read) seconds of every request; a watch reads until its own deadline.
        self.timeout = API_TIMEOUT
        self.client = k8s_client.ApiClient(self.configuration)

    def call(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: str,
        name: str | None = None,
        query: Sequence[tuple[str, str]] = (),
        body: dict[str, Any] | None = None,
        stream: bool = False,
        timeout: Any = None,
    ) -> Any:
        """One API request: its JSON (or the open response if ``stream``); ApiError if refused."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            request = self.serialize(
                method, path, name=name, query=query, headers=headers, body=body
            )
            call_api: Callable[..., Any] = self.client.call_api  # its arguments are positional
            response = call_api(*request, _request_timeout=timeout or self.timeout)
        except (urllib3.exceptions.HTTPError, OSError, k8s_client.ApiException) as exc:
            raise self.unreachable(exc) from None
        raw = response.response
        if not 200 <= response.status <= 299:
            try:
                data = raw.data
            finally:
                raw.release_conn()
            raise self.refused(response.status, data, verb, resource, name)
        if stream:
            return raw
        try:
            return json.loads(response.read() or b"{}")
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self.unreachable(exc) from None
        except ValueError:
            raise ApiError(
                f"{verb} {resource}: the API server answered with invalid JSON"
            ) from None

    def serialize(
        self,
        method: str,
        path: str,
        *,
        name: str | None = None,
        query: Sequence[tuple[str, str]] = (),
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> tuple[Any, ...]:
        """The client's (method, url, headers, body) for a request, with its credentials."""
        return self.client.param_serialize(
            method,
            path,
            path_params={"namespace": self.namespace, "name": name or ""},
            query_params=list(query),
            header_params=headers or {},
            body=body,
            auth_settings=["BearerToken"],
        )

    def watch(
        self, name: str, resource_version: str, seconds: float
    ) -> Generator[tuple[str, dict[str, Any]], None, None]:
        """The events of one watch on pod ``name`` after ``resource_version``, for ``seconds``."""
        query = [
            ("fieldSelector", f"metadata.name={name}"),
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(max(1, math.ceil(seconds)))),
            ("allowWatchBookmarks", "true"),
        ]
        response = self.call(
            "GET",
            PODS,
            verb="watch",
            resource="pods",
            query=query,
            stream=True,
            timeout=(self.timeout[0], seconds + 0.05),  # the deadline, not the whole second
        )
        try:
            for line in iter_resp_lines(response):
                if line:
                    event = json.loads(line)
                    yield event.get("type", ""), event.get("object") or {}
        except (urllib3.exceptions.HTTPError, OSError):
            return  # the stream broke: the caller watches again from the last version
        finally:
            response.close()  # an unfinished stream: drop the connection, never pool it
            response.release_conn()

    def unreachable(self, exc: BaseException) -> ApiError:
        """An ApiError for a request that got no answer, naming the server and the context."""
        reason = getattr(exc, "reason", None) or exc
        text = str(reason)
        found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
        if found:
            text = found.group(1).strip()
        elif isinstance(exc, urllib3.exceptions.ReadTimeoutError) or "timed out" in text:
            text = "no answer (timed out)"
        return ApiError(
            self.scrub(
                f"API server {self.server} unreachable (kubeconfig context {self.context!r}): "
                f"{one_line(text, 500)}"
            )
        )

    def refused(
        self, code: int, data: bytes | None, verb: str, resource: str, name: str | None
    ) -> ApiError:
        """An ApiError for a non-2xx answer, naming what was refused."""
        try:
            status = json.loads(data or b"{}")
        except ValueError:
            status = {}
        status = status if isinstance(status, dict) else {}
        text = status.get("message") or (data or b"").decode("utf-8", "replace")
        message = one_line(text, 500)
        reason = str(status.get("reason") or "")
        target = f"{resource} {name!r}" if name else resource
        where = f"in namespace {self.namespace!r}"
        if code == 401:
            text = (
                f"unauthorized: the API server {self.server} rejected the credentials of "
                f"kubeconfig context {self.context!r} (401 Unauthorized) when asked to "
                f"{verb} {target} {where}"
            )
        elif code == 403:
            text = (
                f"forbidden: the API server refused to {verb} {target} {where} "
                f"(403 Forbidden): {message}"
            )
        elif code == 404 and (status.get("details") or {}).get("kind") == "namespaces":
            text = f"namespace {self.namespace!r} not found (when asked to {verb} {target})"
        elif code == 404:
            text = f"{target} not found {where} (404) when asked to {verb} it"
        else:
            text = f"{verb} {target} {where}: {code} {reason or 'error'}: {message}"
        return ApiError(self.scrub(text), code, reason)

    @property
    def secrets(self) -> list[str]:
        """Every credential of the configuration, longest first."""
        secrets = [str(v) for v in (self.configuration.api_key or {}).values() if v]
        secrets += [s.split(" ", 1)[1] for s in secrets if " " in s]
        secrets += [s for s in (self.configuration.password,) if s]
        return sorted(set(secrets), key=len, reverse=True)

    def scrub(self, text: str) -> str:
        """``text`` without any credential of the configuration."""
        return redact(text, self.secrets)

    def close(self) -> None:
        self.client.close()
