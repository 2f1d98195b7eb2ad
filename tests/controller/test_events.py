"""Events about hub objects, alone (placer.controller.events.EventRecorder), on a loopback hub."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from placer.controller.events import EventRecorder
from placer.kube import load_kubeconfigs, open_client
from placer.testing import ApiServer
from tests.controller.conftest import NAMESPACE, job


def recorded(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path], message: str
) -> list[dict[str, Any]]:
    """The hub's Events after the same Warning about one Job was recorded three times."""
    server = start_apiserver("hub")
    server.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    obj = server.store.create(job("a"))
    client = open_client(load_kubeconfigs([kubeconfig_for(server)]), "hub", name="hub")
    try:
        recorder = EventRecorder(client, instance="test")
        for _ in range(3):
            recorder.record(obj, "Warning", "Unschedulable", message)
    finally:
        client.close()
    return server.store.list("events", NAMESPACE)


def test_a_repeated_event_is_counted_on_one_event(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> None:
    events = recorded(start_apiserver, kubeconfig_for, "no cluster can run it now")
    assert [(e["count"], e["message"]) for e in events] == [(3, "no cluster can run it now")]


def test_a_repeated_long_event_is_counted_on_one_event_too(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> None:
    """A message longer than an Event takes (reasons of many clusters) is cut, and its repeats
    still aggregate (they were new Events each time: one per retry, for hours)."""
    long = "no cluster can run it now: " + "; ".join(f"m{i}: not enough GPUs" for i in range(80))
    events = recorded(start_apiserver, kubeconfig_for, long)
    assert len(events) == 1
    assert events[0]["count"] == 3
    assert len(events[0]["message"]) == 1024 and events[0]["message"].endswith("...")
