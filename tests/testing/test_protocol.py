"""Wire-level protocol of the loopback server, spoken over one raw keep-alive TLS connection:
body draining (DELETE bodies too), missing Content-Type, chunked request bodies, watch framing,
kind-less built-in list items, routing errors."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from placer.testing import ApiServer


def _call(
    conn: http.client.HTTPSConnection,
    server: ApiServer,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    all_headers = {"Authorization": f"Bearer {server.token}", **(headers or {})}
    conn.request(method, path, body=data, headers=all_headers)
    response = conn.getresponse()
    raw = response.read()
    return response.status, json.loads(raw) if raw else None


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [{"name": "c", "image": "x"}]},
}


def test_delete_bodies_are_drained_on_a_keep_alive_connection(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    assert _call(conn, apiserver, "POST", "/api/v1/namespaces/default/pods", POD)[0] == 201
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    code, deleted = _call(conn, apiserver, "DELETE", "/api/v1/namespaces/default/pods/p", options)
    assert code == 200 and deleted["kind"] == "Pod"
    # the same connection still speaks HTTP in step
    code, listed = _call(conn, apiserver, "GET", "/api/v1/namespaces/default/pods")
    assert (code, listed["items"]) == (200, [])


def test_post_without_content_type_and_chunked_bodies(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    data = json.dumps(POD).encode()
    conn.putrequest("POST", "/api/v1/namespaces/default/pods")
    conn.putheader("Authorization", f"Bearer {apiserver.token}")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for part in (data[:10], data[10:]):
        conn.send(b"%x\r\n%s\r\n" % (len(part), part))
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 201 and json.loads(response.read())["metadata"]["name"] == "p"
    assert _call(conn, apiserver, "GET", "/api/v1/namespaces/default/pods/p")[0] == 200


def test_built_in_list_items_have_no_kind_but_custom_ones_do(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    apiserver.store.register_resource("example.com", "v1", "Widget")
    apiserver.store.seed(
        [POD, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}]
    )
    _, pods = _call(conn, apiserver, "GET", "/api/v1/pods")
    assert pods["kind"] == "PodList" and "kind" not in pods["items"][0]
    _, widgets = _call(conn, apiserver, "GET", "/apis/example.com/v1/widgets")
    assert widgets["items"][0]["kind"] == "Widget"


def test_watch_framing_and_clean_end(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    apiserver.store.seed([POD])
    conn.request(
        "GET",
        "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
        headers={"Authorization": f"Bearer {apiserver.token}"},
    )
    response = conn.getresponse()
    assert response.getheader("Transfer-Encoding") == "chunked"
    lines = response.read().decode().splitlines()  # ends at the zero-length chunk
    assert [json.loads(line)["type"] for line in lines] == ["ADDED"]
    assert _call(conn, apiserver, "GET", "/version")[1]["minor"] == "31"  # connection reusable


def test_node_registration_keeps_status(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "status": {"allocatable": {"cpu": "4"}},
    }
    code, made = _call(conn, apiserver, "POST", "/api/v1/nodes", node)
    assert code == 201 and made["status"]["allocatable"] == {"cpu": "4"}


@pytest.mark.parametrize(
    ("method", "path", "body", "code", "reason"),
    [
        ("GET", "/apis/nope.example.com/v1", None, 404, "NotFound"),
        ("GET", "/api/v1/nosuchthings", None, 404, "NotFound"),
        ("GET", "/api/v1/namespaces/default/configmaps/x/status", None, 404, "NotFound"),
        ("GET", "/api/v1/namespaces/default/nodes", None, 404, "NotFound"),
        ("POST", "/api/v1/namespaces/default/pods/p", POD, 405, "MethodNotAllowed"),
        (
            "PUT",
            "/api/v1/namespaces/default/configmaps/a",
            {"metadata": {"name": "b"}},
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            {"kind": "Secret", "metadata": {"name": "s"}},
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": "s", "namespace": "other"}},
            400,
            "BadRequest",
        ),
        ("POST", "/api/v1/namespaces/default/configmaps", b"{broken", 400, "BadRequest"),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/a",
            {"data": {}},
            415,
            "UnsupportedMediaType",
        ),
        ("GET", "/api/v1/pods?dryRun=Some", None, 200, None),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps?dryRun=Some",
            {"metadata": {"name": "c"}},
            400,
            "BadRequest",
        ),
    ],
)
def test_routing_and_request_errors(
    apiserver: ApiServer,
    conn: http.client.HTTPSConnection,
    method: str,
    path: str,
    body: Any,
    code: int,
    reason: str | None,
) -> None:
    apiserver.store.seed([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}])
    status, payload = _call(conn, apiserver, method, path, body)
    assert status == code
    if reason is not None:
        assert (payload["kind"], payload["reason"], payload["code"]) == ("Status", reason, code)


def test_discovery_needs_the_token(apiserver: ApiServer, conn: http.client.HTTPSConnection) -> None:
    conn.request("GET", "/api")
    response = conn.getresponse()
    assert response.status == 401 and json.loads(response.read())["reason"] == "Unauthorized"


def test_delete_collection_by_label(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    apiserver.store.seed(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"c{i}", "labels": {"odd": str(i % 2)}},
        }
        for i in range(6)
    )
    code, deleted = _call(
        conn, apiserver, "DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=odd%3D1"
    )
    assert code == 200 and [d["metadata"]["name"] for d in deleted["items"]] == ["c1", "c3", "c5"]
    assert [c["metadata"]["name"] for c in apiserver.store.list("configmaps")] == ["c0", "c2", "c4"]
