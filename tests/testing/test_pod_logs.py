"""The pod log subresource of the loopback API server, over HTTPS with the kubernetes client:
the text for a running pod, the real server's 400s otherwise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from placer.testing import ApiServer

RUNNING = {
    "phase": "Running",
    "startTime": "2026-01-01T00:00:00Z",
    "containerStatuses": [
        {"name": "main", "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}},
        {
            "name": "side",
            "state": {
                "terminated": {
                    "startedAt": "2026-01-01T00:00:01Z",
                    "finishedAt": "2026-01-01T00:05:00Z",
                    "exitCode": 3,
                    "reason": "Error",
                }
            },
        },
    ],
}


def _pod(name: str, containers: list[str], node: str = "", status: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": f"img/{c}"} for c in containers]}
    if node:
        spec["nodeName"] = node
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    if status is not None:
        pod["status"] = status
    return pod


@pytest.fixture
def core(apiserver: ApiServer, kube_client: Callable[..., client.ApiClient]) -> client.CoreV1Api:
    apiserver.store.put(_pod("two", ["main", "side"], node="n1", status=RUNNING))
    apiserver.store.put(_pod("one", ["main"], node="n1", status=RUNNING))
    apiserver.store.put(_pod("unbound", ["main"]))
    apiserver.store.put(_pod("starting", ["main"], node="n1", status={"phase": "Pending"}))
    return client.CoreV1Api(kube_client(apiserver))


def _log(core: client.CoreV1Api, name: str, **query: Any) -> tuple[int, str]:
    try:
        text = core.read_namespaced_pod_log(name, "default", **query)
    except ApiException as exc:
        return int(exc.status), str(exc.body)
    return 200, str(text)


def test_a_running_container_and_a_terminated_one(core: client.CoreV1Api) -> None:
    code, text = _log(core, "one")
    assert code == 200
    assert text == (
        "placer loopback cluster: container main of pod default/one started on node n1 "
        "(image img/main); no process runs here, so this log holds only what the API server "
        "records\n"
    )
    code, text = _log(core, "two", container="side", timestamps=True)
    lines = text.splitlines()
    assert code == 200 and len(lines) == 2
    assert lines[0].startswith("2026-01-01T00:00:01Z placer loopback cluster")
    assert lines[1] == (
        "2026-01-01T00:05:00Z placer loopback cluster: container side exited with code 3 (Error)"
    )
    assert _log(core, "two", container="side", tail_lines=1)[1].startswith(
        "placer loopback cluster: container side exited"
    )
    assert _log(core, "one", limit_bytes=7) == (200, "placer ")


@pytest.mark.parametrize(
    ("name", "query", "message"),
    [
        ("two", {}, "a container name must be specified for pod two, choose one of: [main side]"),
        ("one", {"container": "x"}, "container x is not valid for pod one"),
        ("one", {"previous": True}, 'previous terminated container \\"main\\" in pod'),
        ("unbound", {}, "pod unbound does not have a host assigned"),
        ("starting", {}, 'in pod \\"starting\\" is waiting to start: ContainerCreating'),
        ("one", {"tail_lines": -1}, "tailLines: Invalid value: -1"),
    ],
)
def test_the_real_servers_errors(
    core: client.CoreV1Api, name: str, query: dict[str, Any], message: str
) -> None:
    code, body = _log(core, name, **query)
    assert code == 400 and message in body, body


def test_a_missing_pod_is_not_found(core: client.CoreV1Api) -> None:
    code, body = _log(core, "nope")
    assert code == 404 and 'pods \\"nope\\" not found' in body
