"""Error translation: Status answers keep code/reason/message/details; transport -> unreachable."""

from __future__ import annotations

import json
import ssl

import pytest
import urllib3.exceptions as u3

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
from placer.kube import error_from_exception, error_from_status


def status(code: int, reason: str, message: str, **details: object) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": message,
            "details": details,
        }
    ).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (401, "Unauthorized", UnauthorizedError),
        (403, "Forbidden", ForbiddenError),
        (404, "NotFound", NotFoundError),
        (409, "AlreadyExists", ConflictError),
        (410, "Expired", GoneError),
        (422, "Invalid", InvalidError),
        (429, "TooManyRequests", TooManyRequestsError),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (400, "BadRequest", KubeError),
    ],
)
def test_status_answers_map_to_classes(code: int, reason: str, cls: type[KubeError]) -> None:
    error = error_from_status(
        code, status(code, reason, "the words", name="x"), cluster="east", action="get jobsets/x"
    )
    assert type(error) is cls
    assert (error.code, error.reason, error.status_message) == (code, reason, "the words")
    assert error.details == {"name": "x"}
    assert str(error).startswith(f"cluster east: get jobsets/x: {code} {reason}: the words")


def test_401_and_403_have_distinct_hints() -> None:
    unauthorized = error_from_status(401, status(401, "Unauthorized", "Unauthorized"))
    forbidden = error_from_status(403, status(403, "Forbidden", "nodes is forbidden"))
    assert unauthorized.hint and "refresh the token" in unauthorized.hint
    assert forbidden.hint and "RBAC" in forbidden.hint


def test_non_status_body_uses_the_http_reason() -> None:
    error = error_from_status(502, b"<html>bad gateway</html>", http_reason="Bad Gateway")
    assert isinstance(error, ServerError) and error.reason == "Bad Gateway"


def test_transport_failures_become_unreachable() -> None:
    refused = u3.MaxRetryError(
        None,
        "/api/v1/nodes",
        u3.NewConnectionError(
            None, "Failed to establish a new connection: [Errno 111] Connection refused"
        ),
    )
    error = error_from_exception(refused, cluster="east", server="https://127.0.0.1:1")
    assert isinstance(error, ClusterUnreachableError)
    assert error.code == 0 and error.reason == "ConnectionFailed"
    assert "unreachable (https://127.0.0.1:1): connection refused" in str(error)

    tls = u3.MaxRetryError(
        None,
        "/version",
        u3.SSLError(
            ssl.SSLCertVerificationError(
                1,
                "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                "unable to get local issuer certificate (_ssl.c:1006)",
            )
        ),
    )
    error = error_from_exception(tls, cluster="east")
    assert isinstance(error, ClusterUnreachableError) and error.reason == "TLSError"
    assert "certificate verify failed: unable to get local issuer certificate" in str(error)

    timeout = u3.ReadTimeoutError(None, "/api/v1/pods", "Read timed out.")
    error = error_from_exception(timeout, cluster="east")
    assert isinstance(error, ClusterUnreachableError) and error.reason == "Timeout"


def test_other_exceptions_are_not_translated() -> None:
    assert error_from_exception(KeyError("x")) is None


def test_official_client_exceptions_are_translated_too() -> None:
    from kubernetes.client.exceptions import ApiException

    answered = ApiException(status=404, reason="Not Found")
    answered.body = status(404, "NotFound", 'pods "x" not found').decode()
    error = error_from_exception(answered, cluster="east", action="get pods/x")
    assert isinstance(error, NotFoundError) and error.status_message == 'pods "x" not found'
    no_answer = ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] boom")
    error = error_from_exception(no_answer, cluster="east")
    assert isinstance(error, ClusterUnreachableError) and error.reason == "TLSError"
