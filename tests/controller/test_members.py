"""The members as the controller sees them, alone (placer.controller.members.MembersView).

Health, exclusions and the bookkeeping per hub object are plain state; the copy informers
talk to loopback member API servers over HTTPS through a real kubeconfig.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from placer.controller.informer import Informer
from placer.controller.members import MembersView
from placer.controller.metrics import Metrics
from placer.controller.records import ANNOTATION_HUB_UID, LABEL_HUB, CopyRef
from placer.definitions import Catalog
from placer.fleet import ClusterSource, FleetConfig, fleet_from_kubeconfigs
from placer.kube import ClientSettings
from placer.model import Cluster, Fleet, WorkloadRef
from placer.testing import ApiServer
from tests.controller.conftest import NAMESPACE, job, wait_for

REF = WorkloadRef("batch/v1", "Job", NAMESPACE, "a")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """The view's callbacks: copy changes and informer states."""

    def __init__(self) -> None:
        self.copies: list[tuple[str, str | None]] = []
        self.states: list[tuple[str, bool, str]] = []
        self._lock = threading.Lock()

    def on_copy(self, informer: Informer, old: Any, new: Any) -> None:
        with self._lock:
            self.copies.append((informer.cluster, new["metadata"]["name"] if new else None))

    def on_state(self, informer: Informer, reachable: bool, reason: str) -> None:
        with self._lock:
            self.states.append((informer.cluster, reachable, reason))


def metric(metrics: Metrics, prefix: str) -> str:
    return "\n".join(
        line for line in metrics.exposition().decode().splitlines() if line.startswith(prefix)
    )


def offline_view(clock: Clock | None = None) -> tuple[MembersView, Metrics]:
    """A view of two members nobody opened (state only)."""
    metrics = Metrics()
    config = FleetConfig((ClusterSource("m1", "m1"), ClusterSource("m2", "m2")))
    recorder = Recorder()
    view = MembersView(
        config,
        "hub",
        metrics,
        on_copy=recorder.on_copy,
        on_state=recorder.on_state,
        clock=clock or Clock(),
    )
    return view, metrics


@pytest.fixture
def members(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> Iterator[tuple[MembersView, dict[str, ApiServer], Recorder]]:
    servers = {name: start_apiserver(name) for name in ("m1", "m2")}
    for server in servers.values():
        server.store.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    config = fleet_from_kubeconfigs([kubeconfig_for(servers)], timeout=5.0)
    broken = ClusterSource("m3", "m3", problem="fleet.yaml: clusters[2]: no kubeconfig")
    config = replace(config, clusters=(*config.clusters, broken))
    recorder = Recorder()
    view = MembersView(
        config,
        "hub",
        Metrics(),
        on_copy=recorder.on_copy,
        on_state=recorder.on_state,
        discovery_interval=0.5,
        retry_interval=1.0,
    )
    view.open(ClientSettings())
    yield view, servers, recorder
    for informer in view.informers():
        informer.stop()
        informer.join(timeout=5)
    view.close()


def copy_of(name: str, uid: str, hub: str = "hub") -> dict[str, Any]:
    body = job(name)
    body["metadata"]["labels"][LABEL_HUB] = hub
    body["metadata"]["annotations"] = {ANNOTATION_HUB_UID: uid}
    return body


def test_health_changes_are_counted_and_shown() -> None:
    clock = Clock()
    view, metrics = offline_view(clock)
    assert view.health("m1").reachable  # nothing known: reachable
    assert not view.set_health("m1", True)
    assert view.set_health("m1", False, "connection refused")
    assert 'placer_cluster_reachable{cluster="m1"} 0.0' in metric(metrics, "placer_cluster")
    assert not view.set_health("m1", False, "TLS handshake timeout")  # still down
    assert view.health("m1").problem == "TLS handshake timeout"
    assert view.health("m1").since == 1000.0
    clock.now += 30
    assert view.lost(clock.now, 60.0) == set()
    clock.now += 30
    assert view.lost(clock.now, 60.0) == {"m1"}
    assert view.set_health("m1", True)
    assert view.lost(clock.now, 60.0) == set()


def test_listing_problems_leave_a_member_out_of_decisions_with_the_reason() -> None:
    view, metrics = offline_view()
    assert view.set_listing("m2", "batch/v1", "Job", "401 Unauthorized: refresh the token")
    assert not view.set_listing("m2", "batch/v1", "Job", "401 again")  # still not listable
    gathered = Fleet(
        (Cluster("m1"), Cluster("m2"), Cluster("m3", reachable=False, reason="unreachable"))
    )
    fleet = view.exclude(gathered, {"m1": "its in-flight ledger cannot be read: 403"})
    by_name = {c.name: c for c in fleet.clusters}
    assert not by_name["m1"].reachable and "ledger" in by_name["m1"].reason
    assert not by_name["m2"].reachable and "Job objects (batch/v1)" in by_name["m2"].reason
    assert "401 again" in by_name["m2"].reason
    shown = metric(metrics, "placer_cluster_excluded{")
    assert 'cluster="m1",reason="Forbidden"' in shown
    assert 'cluster="m2",reason="Unauthorized"' in shown
    assert 'cluster="m3"' in shown
    assert view.set_listing("m2", "batch/v1", "Job", "")  # listable again
    fleet = view.exclude(gathered, {})
    assert [c.name for c in fleet.clusters if c.reachable] == ["m1", "m2"]
    assert metric(metrics, "placer_cluster_excluded{").count("cluster=") == 1


def test_where_a_copy_may_be_unseen_and_what_waits_for_whom() -> None:
    view, _ = offline_view()
    assert view.suspects("u1") == set()
    view.dispatched("u1", ["m2"])
    view.dispatched("u1", ["m1"])
    assert view.suspects("u1") == {"m1", "m2"}
    view.inherit("u1")
    assert view.suspects("u1") is None  # an earlier leader may have put it anywhere
    view.seen_everywhere("u1")
    assert view.suspects("u1") == {"m1", "m2"}
    view.block(REF, ("m2",))
    assert view.waits_for(REF) == ("m2",)
    assert view.blocked_counts() == {"m1": 0, "m2": 1}
    view.unblock(REF)
    assert view.waits_for(REF) == ()
    view.block(REF, ("m1",))
    view.inherit("u1")
    assert view.forget(REF, "u1") == []  # (no informer runs)
    assert view.sizes() == {"touched": 0, "inherited": 0, "blocked": 0}


def test_copies_of_this_hub_are_watched_per_member_and_kind(
    members: tuple[MembersView, dict[str, ApiServer], Recorder],
) -> None:
    view, servers, recorder = members
    assert set(view.clients) == {"m1", "m2"}
    assert not view.health("m3").reachable  # a broken entry is unreachable, not fatal
    servers["m1"].store.create(copy_of("a", "u-a"))
    servers["m2"].store.create(copy_of("a", "u-other"))  # another hub object's copy
    servers["m2"].store.create(copy_of("b", "u-b", hub="another-hub"))  # not this hub's
    view.watch_all("batch/v1", "Job")
    assert view.watch("m3", "batch/v1", "Job") is None
    assert view.watch("m1", "batch/v1", "Job") is view.informer("m1", "batch/v1", "Job")
    wait_for(
        lambda: all(i.synced for i in view.informers()) and len(view.informers()) == 2,
        what="copies listed",
    )
    copies, health = view.view(REF, "u-a")
    assert list(copies) == ["m1"]
    assert health["m1"].synced and health["m2"].synced and not health["m3"].reachable
    assert ("m2", "b") not in recorder.copies  # the label selector keeps other hubs' copies
    assert view.forget(REF, "u-a") == [CopyRef("m1", "batch/v1", "Job", NAMESPACE, "a")]
    view.forget_copy("m1", REF)
    assert view.view(REF, "u-a")[0] == {}
    view.remember("m1", REF, copy_of("a", "u-a"))
    assert list(view.view(REF, "u-a")[0]) == ["m1"]


def test_the_phase_of_a_copy_is_read_once_per_version() -> None:
    view, _ = offline_view()
    catalog = Catalog.builtin()
    running = copy_of("a", "u-a")
    running["metadata"]["resourceVersion"] = "3"
    running["status"] = {"active": 1}
    phase = view.phase_of("m1", running, catalog)
    assert phase
    assert view.phase_of("m1", {**running, "status": {}}, catalog) == phase  # same version
    done = {**running, "metadata": {**running["metadata"], "resourceVersion": "4"}}
    done["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    assert view.phase_of("m1", done, catalog) != phase
    view.clear_phases()
    assert view.phase_of("m1", {**running, "status": {}}, catalog) != phase
