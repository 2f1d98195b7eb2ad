"""Turning API server answers and transport failures into placer's :class:`KubeError` tree.

Two kinds of failure reach a client:

* **an answer with an error Status** (HTTP 4xx/5xx with a ``kind: Status`` body): the class is
  chosen by HTTP code (401/403/404/409/410/422/429/5xx), and the Status' ``code``, ``reason``,
  ``message`` and ``details`` are kept so callers can decide by reason (``AlreadyExists`` vs
  ``Conflict``) and users read the server's own words;
* **no answer**: urllib3 raises ``MaxRetryError`` wrapping the cause (connection refused, DNS,
  TLS verification, connect timeout), ``ReadTimeoutError``/``ProtocolError`` mid-response, and
  the official client re-raises a bare ``SSLError`` as ``ApiException(status=0)``. All of these
  become :class:`ClusterUnreachableError` with a short readable reason and ``code`` 0, so that
  gathering and placement can skip the cluster and carry on.

Everything here is pure except that it inspects exception objects; it never prints, and it never
quotes request headers (where the bearer token lives).
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from placer.errors import (
    ClusterUnreachableError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    KubeError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    UnauthorizedError,
)

__all__ = ["error_from_exception", "error_from_status", "parse_status"]

_BY_CODE: dict[int, type[KubeError]] = {
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
    429: TooManyRequestsError,
}

_HINTS: dict[type[KubeError], str] = {
    UnauthorizedError: "the credentials of this context were refused: refresh the token or "
    "certificate in the kubeconfig",
    ForbiddenError: "the identity of this context lacks RBAC permission for this request",
    TooManyRequestsError: "the API server is throttling requests; retry later",
}


def parse_status(body: bytes | str | Mapping[str, Any] | None) -> dict[str, Any]:
    """A Status dict from a response body; ``{}`` when the body is not a Status."""
    if body is None:
        return {}
    if isinstance(body, Mapping):
        data: Any = body
    else:
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return {}
    if not isinstance(data, Mapping) or data.get("kind") != "Status":
        return {}
    return dict(data)


def error_from_status(
    code: int,
    body: bytes | str | Mapping[str, Any] | None,
    *,
    cluster: str | None = None,
    action: str = "",
    http_reason: str = "",
) -> KubeError:
    """The :class:`KubeError` for an HTTP error answer.

    Args:
        code: HTTP status code.
        body: the response body (a Status, usually).
        cluster: member cluster name, for the message.
        action: what was attempted (``"list nodes"``), for the message.
        http_reason: the HTTP reason phrase, used when the body is not a Status.
    """
    status = parse_status(body)
    reason = str(status.get("reason") or http_reason or "")
    message = str(status.get("message") or "")
    details = status.get("details")
    cls = _BY_CODE.get(code, ServerError if code >= 500 else KubeError)
    head = f"{action}: " if action else ""
    summary = f"{code} {reason}".strip()
    text = f"{head}{summary}: {message}" if message else f"{head}{summary}"
    return cls(
        text,
        cluster=cluster,
        code=code,
        reason=reason,
        status_message=message,
        details=details if isinstance(details, Mapping) else None,
        hint=_HINTS.get(cls),
    )


def error_from_exception(
    exc: BaseException, *, cluster: str | None = None, server: str = "", action: str = ""
) -> KubeError | None:
    """The :class:`KubeError` for a client-side failure, or ``None`` if ``exc`` is not one.

    Handles the official client's ``ApiException`` (with or without an HTTP answer), urllib3's
    transport errors and plain socket/SSL errors.
    """
    status = getattr(exc, "status", None)
    if _is_api_exception(exc):
        if isinstance(status, int) and status > 0:
            return error_from_status(
                status,
                getattr(exc, "body", None),
                cluster=cluster,
                action=action,
                http_reason=str(getattr(exc, "reason", "") or ""),
            )
        # status 0: the client re-raised an SSLError (or could not build the request)
        text = str(getattr(exc, "reason", "") or exc)
        code = "TLSError" if "SSL" in text else "ConnectionFailed"
        return _unreachable(
            _transport_reason(text), code, cluster=cluster, server=server, action=action
        )
    reason_text, reason_code = _describe_transport(exc)
    if reason_text is None:
        return None
    return _unreachable(reason_text, reason_code, cluster=cluster, server=server, action=action)


def _is_api_exception(exc: BaseException) -> bool:
    # NB: only an official client that is loaded can have raised one (importing it costs ~0.2 s)
    exceptions = sys.modules.get("kubernetes.client.exceptions")
    api_exception = getattr(exceptions, "ApiException", None)
    return isinstance(api_exception, type) and isinstance(exc, api_exception)


def _describe_transport(exc: BaseException) -> tuple[str | None, str]:
    """``(readable reason, short code)`` for a transport failure, ``(None, "")`` otherwise."""
    import urllib3.exceptions as u3

    if isinstance(exc, u3.MaxRetryError) and exc.reason is not None:
        return _describe_transport(exc.reason)
    # NB: NewConnectionError subclasses ConnectTimeoutError in urllib3 2: test it first
    if isinstance(exc, u3.NameResolutionError):
        return "the server's host name does not resolve", "ConnectionFailed"
    if isinstance(exc, u3.NewConnectionError):
        return _connection_reason(str(exc)), "ConnectionFailed"
    if isinstance(exc, (u3.ConnectTimeoutError, u3.ReadTimeoutError, socket.timeout)):
        what = "connecting" if isinstance(exc, u3.ConnectTimeoutError) else "waiting for an answer"
        return f"timed out {what}", "Timeout"
    if isinstance(exc, u3.TimeoutError):
        return "timed out", "Timeout"
    if isinstance(exc, (u3.SSLError, ssl.SSLError)):
        return f"TLS failure: {_transport_reason(str(exc))}", "TLSError"
    if isinstance(exc, u3.ProtocolError):
        return f"connection broken: {_transport_reason(str(exc))}", "ConnectionFailed"
    if isinstance(exc, u3.HTTPError):
        return _transport_reason(str(exc)), "ConnectionFailed"
    if isinstance(exc, ConnectionError):
        return _connection_reason(str(exc)), "ConnectionFailed"
    if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
        return _transport_reason(str(exc)), "ConnectionFailed"
    return None, ""


def _connection_reason(text: str) -> str:
    lowered = text.lower()
    if "refused" in lowered:
        return "connection refused"
    if "reset" in lowered:
        return "connection reset"
    if "unreachable" in lowered:
        return "network unreachable"
    return f"cannot connect: {_transport_reason(text)}"


def _transport_reason(text: str) -> str:
    """The useful tail of a urllib3/ssl message (drops pool and object reprs)."""
    text = text.strip().replace("\n", ": ")
    for marker in ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed"):
        index = text.find(marker)
        if index >= 0:
            tail = text[index:].split(")")[0].split("'")[0]
            return tail.rstrip(" .:")
    if "Caused by" in text:
        text = text.split("Caused by", 1)[1].strip(" ()")
    if ": " in text and text.startswith(("<", "HTTPSConnectionPool", "HTTPConnectionPool")):
        text = text.split(": ", 1)[1]
    return text[:300]


def shown_server(server: str) -> str:
    """``server`` as messages may show it: without the user and password a URL may carry
    (``https://user:password@host``), its query and fragment."""
    parts = urlsplit(server)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _unreachable(
    reason_text: str, reason_code: str, *, cluster: str | None, server: str, action: str
) -> ClusterUnreachableError:
    where = f" ({shown_server(server)})" if server else ""
    head = f"{action}: " if action else ""
    hint = None
    if reason_code == "TLSError":
        hint = "check certificate-authority(-data) and the server URL of this cluster"
    elif reason_code == "ConnectionFailed":
        hint = "check that the API server is up and the server URL is right"
    return ClusterUnreachableError(
        f"{head}unreachable{where}: {reason_text}",
        cluster=cluster,
        code=0,
        reason=reason_code,
        status_message=reason_text,
        hint=hint,
    )
