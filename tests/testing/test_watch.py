"""Watches through ``kubernetes.watch.Watch``: initial events, replay from a resourceVersion,
410 Expired, bookmarks, timeouts, selector filtering."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from placer.testing import ApiServer

Client = Callable[..., client.ApiClient]


def _cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
    }


def _events(stream: Any) -> list[tuple[str, str]]:
    return [(e["type"], e["object"].metadata.name) for e in stream]


def _first(w: watch.Watch, stream: Any, count: int) -> list[tuple[str, str]]:
    """The first ``count`` events, then stop the watch (instead of waiting for its timeout)."""
    seen: list[tuple[str, str]] = []
    for event in stream:
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == count:
            w.stop()
    return seen


def test_watch_without_version_starts_with_synthetic_added(
    apiserver: ApiServer, kube_client: Client
) -> None:
    apiserver.store.seed([_cm("a"), _cm("b")])
    core = client.CoreV1Api(kube_client(apiserver))
    w = watch.Watch()
    events = _first(w, w.stream(core.list_namespaced_config_map, "default", timeout_seconds=5), 2)
    assert events == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_replays_from_a_resource_version(apiserver: ApiServer, kube_client: Client) -> None:
    store = apiserver.store
    store.create(_cm("a"))
    rv = store.resource_version
    store.patch("configmaps", "a", {"data": {"k": "v"}})
    store.create(_cm("b"))
    store.delete("configmaps", "a")
    core = client.CoreV1Api(kube_client(apiserver))
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=1
    )
    assert _events(stream) == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]


def test_watch_sees_writes_made_while_it_runs(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    w = watch.Watch()
    seen: list[tuple[str, str]] = []

    def writer() -> None:
        time.sleep(0.1)
        apiserver.store.create(_cm("late"))

    thread = threading.Thread(target=writer)
    thread.start()
    for event in w.stream(
        core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name))
        w.stop()
    thread.join()
    assert seen == [("ADDED", "late")]


def test_too_old_resource_version_is_410_expired(apiserver: ApiServer, kube_client: Client) -> None:
    store = apiserver.store
    store.create(_cm("a"))
    old = store.resource_version
    store.patch("configmaps", "a", {"data": {"k": "v"}})
    store.compact()
    core = client.CoreV1Api(kube_client(apiserver))
    with pytest.raises(ApiException) as err:
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=1
            )
        )
    assert err.value.status == 410
    # the raw event, as a reflector sees it: the oldest version still known follows the compaction
    oldest = int(store.resource_version) + 1
    raw = list(store.watch("configmaps", "default", resource_version=old, timeout=1))
    assert raw == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {old} ({oldest})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


def test_bookmarks_carry_the_current_version(
    start_apiserver: Callable[..., ApiServer], kube_client: Client
) -> None:
    server = start_apiserver("bm", bookmark_interval=0.1)
    server.store.create(_cm("a"))
    core = client.CoreV1Api(kube_client(server))
    rv = server.store.resource_version
    server.store.create(
        _cm("elsewhere", {"x": "y"}) | {"kind": "Secret"}
    )  # another resource moves the global version
    types = []
    for event in watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=1,
    ):
        types.append(event["type"])
        if event["type"] == "BOOKMARK":
            assert (
                event["raw_object"]["metadata"]["resourceVersion"] == server.store.resource_version
            )
    assert types and set(types) == {"BOOKMARK"}


def test_timeout_ends_the_stream_cleanly(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    start = time.monotonic()
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    assert (
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=1
            )
        )
        == []
    )
    assert 0.9 < time.monotonic() - start < 10


def test_selectors_filter_the_stream(apiserver: ApiServer, kube_client: Client) -> None:
    store = apiserver.store
    store.create(_cm("a", {"team": "x"}))
    rv = store.resource_version
    store.create(_cm("b", {"team": "y"}))  # never matches
    store.patch("configmaps", "b", {"metadata": {"labels": {"team": "x"}}})  # starts matching
    store.patch("configmaps", "a", {"metadata": {"labels": {"team": "y"}}})  # stops matching
    store.patch("configmaps", "a", {"data": {"k": "v"}})  # no longer selected: no event
    store.create(_cm("z", {"team": "x"}))  # sentinel: nothing else came before it
    core = client.CoreV1Api(kube_client(apiserver))
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        "default",
        label_selector="team=x",
        resource_version=rv,
        timeout_seconds=5,
    )
    assert _first(w, stream, 3) == [("ADDED", "b"), ("DELETED", "a"), ("ADDED", "z")]


def test_stopping_the_server_ends_open_watches(
    start_apiserver: Callable[..., ApiServer], kube_client: Client
) -> None:
    server = start_apiserver("stop")
    core = client.CoreV1Api(kube_client(server))
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            list(
                watch.Watch().stream(
                    core.list_namespaced_config_map,
                    "default",
                    resource_version=rv,
                    timeout_seconds=30,
                )
            )
        except Exception as exc:  # the cut connection surfaces as a protocol error
            errors.append(exc)

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(0.2)
    start = time.monotonic()
    server.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - start < 10  # not the 30 s watch timeout


def test_send_initial_events_ends_with_an_annotated_bookmark(apiserver: ApiServer) -> None:
    store = apiserver.store
    store.create(_cm("a"))
    events = list(
        store.watch(
            "configmaps",
            "default",
            send_initial_events=True,
            allow_bookmarks=True,
            timeout=0.2,
        )
    )
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_bookmarks_come_a_minute_apart_and_2_s_before_the_watch_ends(
    start_apiserver: Callable[..., ApiServer],
) -> None:
    """As the real watch cache: with a bookmark interval of a minute, a 3 s watch gets one
    bookmark, 2 s before its timeout (so that the client resumes from a recent version), and
    nothing else."""
    server = start_apiserver("minute", bookmark_interval=60.0)
    started = time.monotonic()
    seen: list[tuple[str, float]] = []
    for event in server.store.watch("configmaps", "default", allow_bookmarks=True, timeout=3.0):
        seen.append((event["type"], time.monotonic() - started))
    assert [kind for kind, _ in seen] == ["BOOKMARK"]
    assert 0.9 <= seen[0][1] < 3.5
