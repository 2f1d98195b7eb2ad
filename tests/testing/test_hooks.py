"""Test hooks: faults (latency, failures, dropped connections), stop/start on the same port,
admission callbacks, reactors and the request log, all seen through the official client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from placer.testing import AdmissionRequest, ApiServer, StatusError, WriteEvent

Client = Callable[..., client.ApiClient]


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def test_fail_next_requests_with_a_status(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    rule = apiserver.faults.fail(500, times=2, verb="list", resource="pods")
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.list_pod_for_all_namespaces()
        status = json.loads(err.value.body)
        assert (status["code"], status["reason"]) == (500, "InternalError")
    assert core.list_node().items == []  # other resources are untouched
    assert core.list_pod_for_all_namespaces().items == []  # the third list passes
    assert rule.hits == 2


def test_throttling_status_and_retry_after(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    apiserver.faults.fail(429, message="slow down")
    with pytest.raises(ApiException) as err:
        core.list_node()
    status = json.loads(err.value.body)
    assert (status["reason"], status["message"]) == ("TooManyRequests", "slow down")
    # with Retry-After, urllib3 (under the official client) waits and retries by itself
    rule = apiserver.faults.fail(429, retry_after=1)
    start = time.monotonic()
    assert core.list_node().items == []
    assert rule.hits == 1 and time.monotonic() - start >= 1


def test_forbidden_on_one_resource(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    apiserver.faults.fail(403, times=None, resource="pods", verb="create")
    for _ in range(3):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod("default", _pod("p"))
        assert err.value.status == 403
    apiserver.faults.clear()
    assert core.create_namespaced_pod("default", _pod("p")).metadata.name == "p"


def test_dropped_connection(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    rule = apiserver.faults.drop(verb="create")
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.create_namespaced_pod("default", _pod("p"))
    assert rule.hits == 1
    assert core.create_namespaced_pod("default", _pod("p")).metadata.name == "p"


def test_latency_makes_a_slow_cluster(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    core.list_node()  # connect first: latency applies per request
    apiserver.faults.latency = 0.3
    start = time.monotonic()
    core.list_node()
    assert time.monotonic() - start >= 0.3
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_node(_request_timeout=0.05)


def test_stopping_interrupts_latency(
    start_apiserver: Callable[..., ApiServer], kube_client: Client
) -> None:
    server = start_apiserver("slow")
    core = client.CoreV1Api(kube_client(server))
    server.faults.latency = 30
    errors: list[Exception] = []

    def call() -> None:
        try:
            core.list_node()
        except urllib3.exceptions.HTTPError as exc:
            errors.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.2)
    start = time.monotonic()
    server.stop()
    worker.join(10)
    assert time.monotonic() - start < 10 and not worker.is_alive()  # not the 30 s latency
    assert isinstance(errors[0], urllib3.exceptions.MaxRetryError)  # cut, then refused


def test_stop_and_start_on_the_same_port(
    start_apiserver: Callable[..., ApiServer], kube_client: Client
) -> None:
    server = start_apiserver("flaky")
    core = client.CoreV1Api(kube_client(server))
    core.create_namespaced_pod("default", _pod("survivor"))
    port = server.port
    server.stop()
    assert not server.running
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_node()
    server.start()
    assert server.port == port
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["survivor"]


def test_no_thread_survives_stop(
    start_apiserver: Callable[..., ApiServer], kube_client: Client
) -> None:
    server = start_apiserver("threads")
    core = client.CoreV1Api(kube_client(server))
    core.list_node()
    prefix = f"apiserver-{server.port}-"
    assert any(t.name.startswith(prefix) for t in threading.enumerate())
    server.stop()
    assert not any(t.name.startswith(prefix) for t in threading.enumerate())


def test_admission_denies_and_mutates(apiserver: ApiServer, kube_client: Client) -> None:
    seen: list[tuple[str, bool]] = []

    def webhook(request: AdmissionRequest) -> dict[str, Any] | None:
        seen.append((request.operation, request.dry_run))
        obj = request.object
        if request.resource.plural != "pods" or obj is None:
            return None
        if obj["metadata"].get("labels", {}).get("team") == "rogue":
            raise StatusError(
                403, 'admission webhook "policy.example.com" denied the request: no rogues'
            )
        obj["metadata"].setdefault("labels", {})["admitted"] = "yes"
        return obj

    apiserver.store.add_admission(webhook)
    core = client.CoreV1Api(kube_client(apiserver))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", _pod("r", {"team": "rogue"}))
    status = json.loads(err.value.body)
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert "denied the request: no rogues" in status["message"]
    assert (
        core.create_namespaced_pod("default", _pod("ok"), dry_run="All").metadata.labels["admitted"]
        == "yes"
    )
    made = core.create_namespaced_pod("default", _pod("ok"))
    assert made.metadata.labels == {"admitted": "yes"}
    core.delete_namespaced_pod("ok", "default")
    assert seen == [("CREATE", False), ("CREATE", True), ("CREATE", False), ("DELETE", False)]


def test_reactor_materialises_pods(
    apiserver: ApiServer, kube_client: Client, tmp_path: Path
) -> None:
    store = apiserver.store
    store.register_resource("jobset.x-k8s.io", "v1alpha2", "JobSet")
    events: list[tuple[str, str]] = []

    def controller(event: WriteEvent) -> None:
        events.append((event.type, event.resource.kind))
        if event.resource.kind != "JobSet" or event.type != "ADDED":
            return
        meta = event.object["metadata"]
        owner = {
            "apiVersion": event.object["apiVersion"],
            "kind": "JobSet",
            "name": meta["name"],
            "uid": meta["uid"],
        }
        for i in range(event.object["spec"]["replicas"]):
            pod = _pod(f"{meta['name']}-{i}")
            pod["metadata"]["ownerReferences"] = [owner]
            event.store.create(pod)
        event.store.patch(
            "jobsets",
            meta["name"],
            {"status": {"ready": True}},
            namespace=meta["namespace"],
            subresource="status",
        )

    store.add_reactor(controller)
    api = kube_client(apiserver)
    jobsets = dynamic.DynamicClient(api, cache_file=str(tmp_path / "cache.json")).resources.get(
        api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet"
    )
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train"},
        "spec": {"replicas": 3},
    }
    jobsets.server_side_apply(body, name="train", namespace="default", field_manager="placer")
    core = client.CoreV1Api(api)
    # the reactor ran before the apply returned
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == [
        "train-0",
        "train-1",
        "train-2",
    ]
    assert jobsets.get(name="train", namespace="default").status.ready is True
    jobsets.delete(name="train", namespace="default")
    assert core.list_namespaced_pod("default").items == []  # garbage collected with their owner
    assert events[:5] == [
        ("ADDED", "JobSet"),
        ("ADDED", "Pod"),
        ("ADDED", "Pod"),
        ("ADDED", "Pod"),
        ("MODIFIED", "JobSet"),
    ]
    assert events.count(("DELETED", "Pod")) == 3


def test_failing_reactor_is_a_500(apiserver: ApiServer, kube_client: Client) -> None:
    def broken(event: WriteEvent) -> None:
        raise RuntimeError("controller bug")

    apiserver.store.add_reactor(broken)
    core = client.CoreV1Api(kube_client(apiserver))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", _pod("p"))
    assert err.value.status == 500 and "controller bug" in json.loads(err.value.body)["message"]
    apiserver.store.remove_reactor(broken)
    assert core.read_namespaced_pod("p", "default").metadata.name == "p"  # the write was committed


def test_request_log(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    apiserver.clear_requests()
    core.list_pod_for_all_namespaces(limit=500, field_selector="spec.nodeName=n1")
    core.create_namespaced_pod("default", _pod("p"))
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    listing, create, patch = apiserver.requests
    assert (listing.verb, listing.resource, listing.namespace) == ("list", "pods", None)
    assert listing.query["limit"] == "500" and listing.query["fieldSelector"] == "spec.nodeName=n1"
    assert listing.user_agent.startswith("OpenAPI-Generator/")
    assert (create.verb, create.namespace, create.code, create.content_type) == (
        "create",
        "default",
        201,
        "",
    )
    assert (patch.verb, patch.subresource, patch.name) == ("patch", "status", "p")


def test_delay_slows_one_resource_only(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    core.list_node()
    rule = apiserver.faults.delay(0.3, verb="list", resource="pods")
    core.list_node()
    assert rule.hits == 0  # not a pod list: not delayed
    with pytest.raises(urllib3.exceptions.MaxRetryError):  # read timeouts, retried by urllib3
        core.list_pod_for_all_namespaces(_request_timeout=0.1)
    start = time.monotonic()
    core.list_pod_for_all_namespaces()
    assert time.monotonic() - start >= 0.3
    pod_lists = [r for r in apiserver.requests if r.resource == "pods"]
    assert rule.hits == len(pod_lists) >= 2
