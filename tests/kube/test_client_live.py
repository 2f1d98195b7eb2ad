"""The generic client against a loopback API server, through a real kubeconfig file."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from placer.errors import (
    ConflictError,
    FleetConfigError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    TooManyRequestsError,
    UnauthorizedError,
)
from placer.kube import (
    ClientSettings,
    KubeClient,
    Listed,
    PatchType,
    WatchEvent,
    WatchSettings,
    load_kubeconfigs,
    open_client,
)
from placer.testing import ApiServer
from tests.builders import objects
from tests.builders.waiting import wait_until

GROUP = "jobset.x-k8s.io"
API_VERSION = f"{GROUP}/v1alpha2"


def jobset(name: str, replicas: int = 1) -> dict[str, Any]:
    return objects.jobset(name, replicas=replicas, namespace=None, labels={"app": "demo"})


@pytest.fixture
def server(start_apiserver: Callable[..., ApiServer]) -> ApiServer:
    server = start_apiserver("hub")
    server.store.register_resource(GROUP, "v1alpha2", "JobSet")
    return server


@pytest.fixture
def client(server: ApiServer, kubeconfig_for: Callable[..., Path]) -> Iterator[KubeClient]:
    kubeconfig = kubeconfig_for(server, namespaces={"hub": "team-a"})
    with open_client(load_kubeconfigs([kubeconfig]), "hub") as kube:
        yield kube


def test_custom_resource_round_trip(client: KubeClient, server: ApiServer) -> None:
    assert client.namespace == "team-a"
    assert client.ensure_namespace("team-a") is True
    assert client.ensure_namespace("team-a") is False
    created = client.create(jobset("demo"))
    assert created["metadata"]["namespace"] == "team-a" and created["metadata"]["uid"]
    ref = client.resource(API_VERSION, "JobSet")
    assert (ref.plural, ref.namespaced, "status" in ref.subresources) == ("jobsets", True, True)

    with pytest.raises(ConflictError) as conflict:
        client.create(jobset("demo"))
    assert conflict.value.reason == "AlreadyExists" and conflict.value.code == 409

    patched = client.patch(API_VERSION, "JobSet", "demo", {"metadata": {"labels": {"x": "1"}}})
    assert patched["metadata"]["labels"] == {"app": "demo", "x": "1"}
    patched = client.patch(
        API_VERSION,
        "JobSet",
        "demo",
        [{"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 3}],
        patch_type=PatchType.JSON,
    )
    assert patched["spec"]["replicatedJobs"][0]["replicas"] == 3
    status = client.patch_status(API_VERSION, "JobSet", "demo", {"status": {"ready": 1}})
    assert status["status"] == {"ready": 1}

    current = client.get(API_VERSION, "JobSet", "demo")
    current["spec"]["suspend"] = True
    replaced = client.replace(current)
    assert replaced["spec"]["suspend"] is True
    stale = dict(current, metadata={**current["metadata"], "resourceVersion": "1"})
    with pytest.raises(ConflictError) as stale_write:
        client.replace(stale)
    assert stale_write.value.reason == "Conflict"

    dry = client.apply(jobset("applied", 2), field_manager="placer", dry_run=True)
    assert dry["spec"]["replicatedJobs"][0]["replicas"] == 2
    with pytest.raises(NotFoundError):
        client.get(API_VERSION, "JobSet", "applied")
    applied = client.apply(jobset("applied", 2), field_manager="placer", force=True)
    assert applied["metadata"]["name"] == "applied"
    methods = {(r.method, r.content_type) for r in server.requests if r.name == "applied"}
    assert ("PATCH", "application/apply-patch+yaml") in methods

    listed = client.list(API_VERSION, "JobSet", label_selector="app=demo", page_size=1)
    assert sorted(o["metadata"]["name"] for o in listed.items) == ["applied", "demo"]
    assert all(o["kind"] == "JobSet" for o in listed.items) and listed.resource_version

    client.delete(API_VERSION, "JobSet", "demo", propagation_policy="Foreground")
    with pytest.raises(NotFoundError) as missing:
        client.delete(API_VERSION, "JobSet", "demo")
    assert missing.value.reason == "NotFound" and missing.value.details["name"] == "demo"
    assert client.delete(API_VERSION, "JobSet", "demo", missing_ok=True) is None


def test_errors_keep_the_status(client: KubeClient, server: ApiServer) -> None:
    with pytest.raises(NotFoundError, match="does not serve kind Widget"):
        client.resource("example.com/v1", "Widget")
    server.faults.fail(422, verb="create", reason="Invalid", message="spec.x: Invalid value")
    with pytest.raises(InvalidError) as invalid:
        client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    assert invalid.value.status_message == "spec.x: Invalid value"
    server.faults.fail(429, verb="get", retry_after=3)
    with pytest.raises(TooManyRequestsError) as throttled:
        client.get("v1", "Namespace", "default")
    assert throttled.value.details.get("retryAfterSeconds") == 3
    server.faults.fail(403, verb="list", resource="nodes")
    with pytest.raises(ForbiddenError):
        client.list("v1", "Node")


def test_wrong_token_is_unauthorized_and_never_echoed(
    server: ApiServer, kubeconfig_for: Callable[..., Path]
) -> None:
    kubeconfig = kubeconfig_for(server, tokens={"hub": "not-the-token"})
    with open_client(load_kubeconfigs([kubeconfig]), "hub") as kube:
        with pytest.raises(UnauthorizedError) as info:
            kube.list("v1", "Node")
    assert info.value.code == 401 and "not-the-token" not in str(info.value)


def test_unusable_context_names_file_and_context(tmp_path: Path) -> None:
    path = tmp_path / "kc.yaml"
    path.write_text(
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1',"
        " certificate-authority: missing-ca.pem}}]\n"
        "users: [{name: u, user: {token: sekret-123}}]\n"
        "contexts: [{name: ctx, context: {cluster: c, user: u}}]\n",
        encoding="utf-8",
    )
    with pytest.raises(FleetConfigError) as info:
        open_client(load_kubeconfigs([path]), "ctx")
    text = str(info.value)
    assert str(path) in text and "ctx" in text and "missing-ca.pem" in text
    assert "sekret-123" not in text


def test_watch_lists_then_streams_tracks_bookmarks_and_relists_on_410(
    client: KubeClient, server: ApiServer
) -> None:
    client.ensure_namespace("team-a")
    client.create(jobset("one"))
    settings = WatchSettings(server_timeout=2, reconnect_backoff=0.05)
    watcher = client.watch(API_VERSION, "JobSet", namespace="team-a", settings=settings)
    items: list[Listed | WatchEvent] = []
    relisted = threading.Event()

    def consume() -> None:
        for item in watcher:
            items.append(item)
            if isinstance(item, Listed) and len([i for i in items if isinstance(i, Listed)]) == 2:
                relisted.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    wait_until(lambda: len(items) >= 1, timeout=10, what="the first event")
    first = items[0]
    assert isinstance(first, Listed) and [o["metadata"]["name"] for o in first.items] == ["one"]

    client.create(jobset("two"))
    client.delete(API_VERSION, "JobSet", "one")
    wait_until(lambda: len(items) >= 3, timeout=10, what="three events")
    assert [(i.type, i.object["metadata"]["name"]) for i in items[1:3]] == [  # type: ignore[union-attr]
        ("ADDED", "two"),
        ("DELETED", "one"),
    ]
    # bookmarks (every second on this server) move the resourceVersion without events
    version = watcher.resource_version
    server.store.seed(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "other", "namespace": "team-a"},
            }
        ]
    )
    wait_until(
        lambda: int(watcher.resource_version) > int(version), timeout=5, what="a newer version"
    )
    assert len(items) == 3

    # changes while the watch is down, then history compacted: the watch from the old
    # resourceVersion gets 410 Expired and the watcher re-lists (and sees the change)
    server.stop()
    three = jobset("three")
    three["metadata"]["namespace"] = "team-a"
    server.store.create(three)
    server.store.compact()
    server.start()
    assert relisted.wait(10)
    latest = items[-1]
    names = sorted(o["metadata"]["name"] for o in latest.items)  # type: ignore[union-attr]
    assert isinstance(latest, Listed) and names == ["three", "two"]
    watcher.stop()
    thread.join(10)
    assert not thread.is_alive()


def test_watch_stop_unblocks_a_quiet_stream(client: KubeClient) -> None:
    watcher = client.watch(
        "v1", "Namespace", settings=WatchSettings(server_timeout=60, allow_bookmarks=False)
    )
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.extend(watcher), daemon=True)
    thread.start()
    wait_until(lambda: len(seen) >= 1, timeout=10, what="an event")
    watcher.stop()
    thread.join(5)
    assert not thread.is_alive()


def test_client_settings_reach_the_requests(
    server: ApiServer, kubeconfig_for: Callable[..., Path]
) -> None:
    settings = ClientSettings(user_agent="placer-test/1", page_size=7)
    with open_client(load_kubeconfigs([kubeconfig_for(server)]), "hub", settings=settings) as kube:
        kube.list("v1", "Namespace")
    record = [r for r in server.requests if r.resource == "namespaces"][-1]
    assert record.user_agent == "placer-test/1" and record.query["limit"] == "7"


def test_watch_retries_the_list_while_the_server_is_down(
    client: KubeClient, server: ApiServer
) -> None:
    server.stop()
    restart = threading.Timer(0.3, server.start)
    restart.start()
    watcher = client.watch(
        "v1", "Namespace", settings=WatchSettings(server_timeout=5, reconnect_backoff=0.1)
    )
    first = next(iter(watcher))
    watcher.stop()
    restart.join()
    assert isinstance(first, Listed) and "default" in {o["metadata"]["name"] for o in first.items}


class _Gate:
    """Counts how often it is entered and whether it is held."""

    def __init__(self) -> None:
        self.entered = 0
        self.held = False

    def __enter__(self) -> None:
        assert not self.held
        self.entered += 1
        self.held = True

    def __exit__(self, *_: object) -> None:
        self.held = False


def test_pages_are_handed_over_inside_the_page_gate(
    server: ApiServer, kubeconfig_for: Callable[..., Path]
) -> None:
    server.store.seed(
        [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}} for i in range(5)]
    )
    gate = _Gate()
    kubeconfigs = load_kubeconfigs([kubeconfig_for(server)])
    with open_client(kubeconfigs, "hub", page_gate=gate) as kube:
        pages = kube.iter_pages("v1", "Node", page_size=2)
        held = []
        for page in pages:
            held.append((gate.held, len(page["items"])))
            del page
    assert held == [(True, 2), (True, 2), (True, 1)]
    assert gate.entered == 3 and not gate.held
