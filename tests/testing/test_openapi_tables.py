"""What kubectl needs beyond REST, spoken over a raw TLS connection: the OpenAPI documents
(v2 in JSON and in gnostic protobuf, v3 root and group/version documents), ``fieldValidation``,
and Table responses for gets, lists and watches (columns of built-in kinds, a CRD's printer
columns). kubectl itself is run against them in ``tests/fleet/test_kubectl_fleet.py``."""

from __future__ import annotations

import http.client
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from placer.testing import ApiServer
from placer.testing._gnostic import encode_document
from placer.testing._tables import TABLE_MEDIA, human_duration, json_path
from tests.builders import objects

TABLE_ACCEPT = f"{TABLE_MEDIA},application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
JOBSET_COLUMNS = [
    {"name": "TerminalState", "type": "string", "jsonPath": ".status.terminalState"},
    {"name": "Restarts", "type": "string", "jsonPath": ".status.restarts"},
    {
        "name": "Completed",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Completed")].status',
    },
    {"name": "Suspended", "type": "string", "jsonPath": ".spec.suspend"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Leader", "type": "string", "jsonPath": ".spec.leader", "priority": 1},
]


def call(
    conn: http.client.HTTPSConnection,
    server: ApiServer,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes, http.client.HTTPResponse]:
    data = None if body is None else json.dumps(body).encode()
    conn.request(
        method,
        path,
        body=data,
        headers={"Authorization": f"Bearer {server.token}", **(headers or {})},
    )
    response = conn.getresponse()
    return response.status, response.read(), response


def register_jobsets(server: ApiServer) -> None:
    server.store.register_resource(
        "jobset.x-k8s.io", "v1alpha2", "JobSet", printer_columns=JOBSET_COLUMNS
    )


# -- OpenAPI ------------------------------------------------------------------------------------


def test_openapi_v3_lists_every_group_version_and_marks_field_validation(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    register_jobsets(apiserver)
    code, raw, _ = call(conn, apiserver, "GET", "/openapi/v3")
    assert code == 200
    paths = json.loads(raw)["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/jobset.x-k8s.io/v1alpha2"} <= set(
        paths
    )
    url = paths["apis/jobset.x-k8s.io/v1alpha2"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/jobset.x-k8s.io/v1alpha2?hash=")
    code, raw, _ = call(conn, apiserver, "GET", url)
    assert code == 200
    doc = json.loads(raw)
    patch = doc["paths"]["/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{name}"][
        "patch"
    ]
    gvk = {"group": "jobset.x-k8s.io", "kind": "JobSet", "version": "v1alpha2"}
    assert patch["x-kubernetes-group-version-kind"] == gvk
    assert {"name": "fieldValidation", "in": "query"}.items() <= next(
        p for p in patch["parameters"] if p["name"] == "fieldValidation"
    ).items()
    schema = doc["components"]["schemas"]["io.x-k8s.jobset.v1alpha2.JobSet"]
    assert schema["x-kubernetes-group-version-kind"] == [gvk]
    assert {"apiVersion", "kind", "metadata", "spec", "status"} <= set(schema["properties"])
    meta = doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    assert {"name", "namespace", "labels", "ownerReferences", "uid"} <= set(meta["properties"])
    assert call(conn, apiserver, "GET", "/openapi/v3/apis/nothing.example.com/v1")[0] == 404


def test_a_crd_schema_is_served_in_v3(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    schema = {
        "type": "object",
        "description": "A widget.",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
    }
    crd = objects.crd("example.com", "Widget", "widgets", schema=schema)
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert call(conn, apiserver, "POST", path, crd)[0] == 201
    code, raw, _ = call(conn, apiserver, "GET", "/openapi/v3/apis/example.com/v1")
    widget = json.loads(raw)["components"]["schemas"]["com.example.v1.Widget"]
    assert code == 200 and widget["description"] == "A widget."
    assert widget["properties"]["spec"]["properties"]["size"] == {"type": "integer"}


def test_openapi_v2_in_json_and_in_protobuf(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    register_jobsets(apiserver)
    code, raw, response = call(conn, apiserver, "GET", "/openapi/v2")
    assert code == 200 and response.getheader("Content-Type") == "application/json"
    doc = json.loads(raw)
    assert doc["swagger"] == "2.0"
    assert {"io.k8s.api.core.v1.Pod", "io.x-k8s.jobset.v1alpha2.JobSet"} <= set(doc["definitions"])
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    code, raw, response = call(conn, apiserver, "GET", "/openapi/v2", headers={"Accept": PROTOBUF})
    assert code == 200
    assert response.getheader("Content-Type") == (
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    )
    assert raw == encode_document(doc)
    assert raw.startswith(b"\n\x032.0")  # field 1 (swagger), length 3


def test_the_protobuf_encoder_refuses_what_it_cannot_encode() -> None:
    with pytest.raises(ValueError, match="schema: cannot encode oneOf"):
        encode_document({"definitions": {"x": {"oneOf": [{"type": "string"}]}}})


def test_field_validation(apiserver: ApiServer, conn: http.client.HTTPSConnection) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    odd = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "colour": "red"}}
    code, raw, _ = call(conn, apiserver, "POST", path + "?fieldValidation=Strict", odd)
    assert code == 400
    assert 'strict decoding error: unknown field "metadata.colour"' in json.loads(raw)["message"]
    code, _, response = call(conn, apiserver, "POST", path + "?fieldValidation=Warn", odd)
    assert code == 201
    assert response.getheader("Warning") == '299 - "unknown field \\"metadata.colour\\""'
    code, raw, _ = call(conn, apiserver, "POST", path + "?fieldValidation=Loose", odd)
    assert code == 400 and 'Unsupported value: "Loose"' in json.loads(raw)["message"]
    fine = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}
    assert call(conn, apiserver, "POST", path + "?fieldValidation=Strict", fine)[0] == 201


# -- Tables -------------------------------------------------------------------------------------


def test_pods_and_nodes_as_tables(apiserver: ApiServer, conn: http.client.HTTPSConnection) -> None:
    created = (datetime.now(UTC) - timedelta(minutes=3, seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    apiserver.store.seed(
        [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "n1",
                    "creationTimestamp": created,
                    "labels": {"node-role.kubernetes.io/control-plane": ""},
                },
                "spec": {"unschedulable": True},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "nodeInfo": {"kubeletVersion": "v1.31.0"},
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default", "creationTimestamp": created},
                "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
                "status": {
                    "phase": "Running",
                    "podIP": "10.244.0.7",
                    "containerStatuses": [
                        {"name": "a", "ready": True, "restartCount": 2},
                        {"name": "b", "ready": False, "restartCount": 1},
                    ],
                },
            },
        ]
    )
    code, raw, response = call(
        conn, apiserver, "GET", "/api/v1/nodes", headers={"Accept": TABLE_ACCEPT}
    )
    assert code == 200 and response.getheader("Content-Type") == TABLE_MEDIA
    nodes = json.loads(raw)
    assert nodes["kind"] == "Table" and nodes["apiVersion"] == "meta.k8s.io/v1"
    names = [(c["name"], c["priority"]) for c in nodes["columnDefinitions"]]
    assert [n for n, p in names if p == 0] == ["Name", "Status", "Roles", "Age", "Version"]
    [row] = nodes["rows"]
    assert row["cells"][:5] == [
        "n1",
        "Ready,SchedulingDisabled",
        "control-plane",
        "3m5s",
        "v1.31.0",
    ]
    assert row["cells"][5] == "10.0.0.1"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["name"] == "n1"
    code, raw, _ = call(
        conn,
        apiserver,
        "GET",
        "/api/v1/namespaces/default/pods/p?includeObject=Object",
        headers={"Accept": TABLE_ACCEPT},
    )
    pods = json.loads(raw)
    heads = [c["name"] for c in pods["columnDefinitions"]]
    assert heads == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    assert pods["rows"][0]["cells"] == [
        "p",
        "1/2",
        "Running",
        3,
        "3m5s",
        "10.244.0.7",
        "n1",
        "<none>",
        "<none>",
    ]
    assert pods["rows"][0]["object"]["kind"] == "Pod"  # includeObject=Object: the whole object
    # without the Table Accept header: the plain object, as before
    code, raw, response = call(conn, apiserver, "GET", "/api/v1/namespaces/default/pods/p")
    assert json.loads(raw)["kind"] == "Pod" and response.getheader("Content-Type") == (
        "application/json"
    )


def test_a_custom_resource_table_has_its_printer_columns(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    register_jobsets(apiserver)
    base = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "demo"},
        "spec": {"suspend": False},
    }
    assert call(conn, apiserver, "POST", base, jobset)[0] == 201
    status = {
        "status": {
            "terminalState": "Completed",
            "restarts": 2,
            "conditions": [
                {"type": "StartupPolicyCompleted", "status": "True"},
                {"type": "Completed", "status": "True"},
            ],
        }
    }
    merge = {"Content-Type": "application/merge-patch+json"}
    assert call(conn, apiserver, "PATCH", f"{base}/demo/status", status, merge)[0] == 200
    _, raw, _ = call(conn, apiserver, "GET", base, headers={"Accept": TABLE_ACCEPT})
    result = json.loads(raw)
    assert [(c["name"], c["type"], c["priority"]) for c in result["columnDefinitions"]] == [
        ("Name", "string", 0),
        ("TerminalState", "string", 0),
        ("Restarts", "string", 0),
        ("Completed", "string", 0),
        ("Suspended", "string", 0),
        ("Age", "date", 0),
        ("Leader", "string", 1),
    ]
    [row] = result["rows"]
    assert row["cells"][:5] == ["demo", "Completed", "2", "True", "false"]
    assert row["cells"][5] in ("0s", "1s", "2s")
    assert row["cells"][6] is None  # .spec.leader is not set: no cell
    assert result["metadata"]["resourceVersion"]


def test_a_crd_without_printer_columns_shows_name_and_age(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    apiserver.store.register_resource("example.com", "v1", "Gadget")
    base = "/apis/example.com/v1/namespaces/default/gadgets"
    gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    assert call(conn, apiserver, "POST", base, gadget)[0] == 201
    _, raw, _ = call(conn, apiserver, "GET", base, headers={"Accept": TABLE_ACCEPT})
    result = json.loads(raw)
    assert [c["name"] for c in result["columnDefinitions"]] == ["Name", "Age"]


def test_a_watch_streams_one_row_tables(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    for name in ("a", "b"):
        apiserver.store.seed(
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default"},
                    "data": {"k": "v"},
                }
            ]
        )
    path = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"
    code, raw, response = call(conn, apiserver, "GET", path, headers={"Accept": TABLE_ACCEPT})
    assert code == 200 and response.getheader("Content-Type") == TABLE_MEDIA
    events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    first, second = (e["object"] for e in events)
    assert first["kind"] == second["kind"] == "Table"
    assert [c["name"] for c in first["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert second["columnDefinitions"] == []  # the columns come with the first event only
    assert [first["rows"][0]["cells"][:2], second["rows"][0]["cells"][:2]] == [["a", 1], ["b", 1]]


# -- helpers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-0.5, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (121, "2m1s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (49 * 3600, "2d1h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_human_duration_is_apimachinerys(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_json_path() -> None:
    obj = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "Completed", "status": "True"},
            ],
            "replicas": 3,
            "ok": True,
        }
    }
    assert json_path(obj, '.status.conditions[?(@.type=="Completed")].status') == ["True"]
    assert json_path(obj, "{.status.conditions[-1:].type}") == ["Completed"]
    assert json_path(obj, ".status.conditions[0].type") == ["Ready"]
    assert json_path(obj, ".status.conditions[*].status") == ["False", "True"]
    assert json_path(obj, ".status.replicas") == [3]
    assert json_path(obj, ".status.missing") == []
    assert json_path(obj, '.status.conditions[?(@.type!="Ready")].type') == ["Completed"]
    with pytest.raises(ValueError, match="unsupported JSONPath"):
        json_path(obj, ".status..replicas")
