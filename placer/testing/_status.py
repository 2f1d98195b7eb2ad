"""Kubernetes ``Status`` errors as the loopback API server raises and serialises them.

Every failure the server reports, over HTTP or to in-process callers, is a :class:`StatusError`
carrying exactly what a real kube-apiserver would put in its ``Status`` body: the HTTP ``code``,
a machine ``reason`` (apimachinery's ``StatusReason`` constants), a human ``message`` and optional
``details``. Client code under test decides by ``reason``, so the reasons and message shapes
follow the real server's (``pods "x" not found``, ``Operation cannot be fulfilled on ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["REASONS", "StatusError"]

#: The default ``reason`` for each HTTP code (apimachinery ``StatusReason`` constants).
REASONS: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class StatusError(Exception):
    """A request failed; the payload is a Kubernetes ``Status`` object.

    Raise it from an admission callback to deny a write (a "webhook denial"), or pass its
    arguments to :meth:`Faults.fail` to inject a failure. In-process store calls raise it too.

    Args:
        code: HTTP status code (``403``, ``404``, ``409``, ``422``, ``500``, ...).
        message: human-readable message, as the server would word it.
        reason: ``StatusReason``; defaults to the usual reason for ``code``.
        details: the Status ``details`` (``name``, ``group``, ``kind``, ``causes``, ...).
        retry_after: seconds for a ``Retry-After`` header (429, 503, ...); also set as
            ``details.retryAfterSeconds``.
    """

    def __init__(
        self,
        code: int,
        message: str = "",
        *,
        reason: str | None = None,
        details: Mapping[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        self.code = code
        self.reason = reason if reason is not None else REASONS.get(code, "Unknown")
        self.message = message or self.reason
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after
        if retry_after is not None:
            self.details.setdefault("retryAfterSeconds", retry_after)
        super().__init__(f"{self.code} {self.reason}: {self.message}")

    @property
    def status(self) -> dict[str, Any]:
        """The ``Status`` object (a fresh dict)."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = dict(self.details)
        return body


def cause(field: str, message: str, reason: str = "FieldValueInvalid") -> dict[str, str]:
    """One entry of ``details.causes`` of a 422 Invalid Status."""
    return {"reason": reason, "message": message, "field": field}


def invalid(
    kind: str,
    name: str,
    group: str,
    causes: Sequence[Mapping[str, str]],
    *,
    qualified: str | None = None,
) -> StatusError:
    """422 Invalid naming every offending field, worded like the real server.

    ``qualified`` overrides the kind in the message (custom resources say ``Kind.group``).
    """
    parts = "; ".join(
        f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes
    )
    text = f"[{parts}]" if len(causes) > 1 else parts
    return StatusError(
        422,
        f'{qualified or kind} "{name}" is invalid: {text}',
        details={"name": name, "group": group, "kind": kind, "causes": [dict(c) for c in causes]},
    )


def bad_request(message: str) -> StatusError:
    """400 BadRequest."""
    return StatusError(400, message)
