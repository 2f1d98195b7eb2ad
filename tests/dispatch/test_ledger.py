"""The in-flight ledger: observation arithmetic, storage on the member, charging the fleet."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from placer.dispatch.claims import Claims, Succession
from placer.dispatch.ledger import (
    APPLY_GRACE,
    LEDGER_NAMESPACE,
    OBSERVED_KEEP,
    InFlight,
    Ledger,
    decode_entry,
    delete_entry,
    encode_entry,
    entry_from_configmap,
    entry_to_configmap,
    observe,
    read_entries,
    remove_entries,
    sync_cluster,
    write_entries,
    write_entry,
)
from placer.dispatch.record import PlacementRecord, dispatch_manifest
from placer.kube import KubeClient, load_kubeconfigs, open_client
from placer.model import Cluster, Fleet, Node, Placement, PodAssignment, WorkloadRef
from placer.quantity import CPU, GPU, PODS
from placer.testing import ApiServer

REF = WorkloadRef("jobset.x-k8s.io/v1alpha2", "JobSet", "default", "train")
GPU4 = {GPU: 4, CPU: 8000}


def pod(component: str, index: int, node: str, requests: dict[str, int] = GPU4) -> PodAssignment:
    return PodAssignment("replicatedjob", component, index, node, dict(requests), ())


def entry(*pods: PodAssignment, created: float = 1000.0, ttl: float = 600.0) -> InFlight:
    total: dict[str, int] = {}
    for p in pods:
        for k, v in p.requests.items():
            total[k] = total.get(k, 0) + v
    return InFlight(Placement(REF, "c1", tuple(pods), total), "d-1", created, created + ttl)


def test_observed_pods_retire_the_matching_planned_pods() -> None:
    e = entry(pod("leader", 0, "n1"), pod("worker", 0, "n1"), pod("worker", 1, "n2"))
    # same node and requests first
    after = observe(e, [("n2", GPU4)])
    assert [p.node for p in after.placement.pods] == ["n1", "n1"]
    assert after.placement.requests == {GPU: 8, CPU: 16000}
    # bound elsewhere than planned: one planned pod with the same requests goes
    after = observe(e, [("n9", GPU4), ("n9", GPU4)])
    assert [p.node for p in after.placement.pods] == ["n2"]
    # different requests (a mutating webhook added a sidecar): same node, then any
    after = observe(e, [("n2", {GPU: 4, CPU: 8500}), ("n7", {CPU: 1})])
    assert len(after.placement.pods) == 1
    # more observed than planned: nothing negative
    after = observe(e, [("n1", GPU4)] * 5)
    assert after.placement.pods == () and after.placement.requests == {GPU: 0, CPU: 0}
    assert observe(e, []) is e


def test_entries_round_trip_through_their_configmap() -> None:
    e = entry(pod("leader", 0, "n1"), PodAssignment("c", "", 0, "n2", {GPU: 1}, (3,)))
    cm = entry_to_configmap(e)
    assert cm["metadata"]["namespace"] == LEDGER_NAMESPACE
    back = entry_from_configmap(cm)
    assert back is not None
    assert back.placement == e.placement and back.decision == "d-1"
    assert back.created == pytest.approx(e.created) and back.expires == pytest.approx(e.expires)
    assert entry_from_configmap({"data": {"entry": "{}"}}) is None
    assert entry_from_configmap({"data": {"entry": "not json"}}) is None


def test_charge_counts_unexpired_entries_on_known_nodes_only() -> None:
    node = Node("n1", {GPU: 8, CPU: 64000, PODS: 110})
    fleet = Fleet((Cluster("c1", (node,)), Cluster("c2", (Node("m1", {GPU: 8}),))))
    ledger = Ledger()
    ledger.add(entry(pod("leader", 0, "n1"), pod("worker", 0, "gone-node"), created=1000))
    charged = ledger.charge(fleet, now=1100)
    assert charged.cluster("c1").nodes[0].free[GPU] == 4
    assert charged.cluster("c2") is fleet.cluster("c2")
    assert ledger.charge(fleet, now=1600).cluster("c1").nodes[0].free[GPU] == 8  # expired
    ledger.discard("c1", REF)
    assert len(ledger) == 0


# --------------------------------------------------------------------------------------------
# on a loopback member


@pytest.fixture
def member(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> Iterator[tuple[ApiServer, KubeClient]]:
    server = start_apiserver("c1")
    server.store.register_resource("jobset.x-k8s.io", "v1alpha2", "JobSet")
    client = open_client(load_kubeconfigs([kubeconfig_for(server)]), "c1")
    yield server, client
    client.close()


def owned(name: str, owner: dict[str, Any], **extra: Any) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    return {"metadata": {"name": name, "namespace": "default", "ownerReferences": [ref]}, **extra}


def placed_root(e: InFlight) -> dict[str, Any]:
    """The object placer applies for entry ``e``: with its placement record."""
    record = PlacementRecord.for_placement(e.placement, e.decision)
    ref = e.workload
    return dispatch_manifest(
        {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": {"name": ref.name}},
        ref,
        record,
    )


def test_sync_retires_pods_seen_through_the_owner_chain(
    member: tuple[ApiServer, KubeClient],
) -> None:
    server, client = member
    now = 10_000.0
    e = entry(pod("leader", 0, "n1"), pod("worker", 0, "n2"), created=now - 5)
    write_entry(client, e)
    assert [x.workload for x in read_entries(client)] == [REF]
    store = server.store
    root = store.create(placed_root(e))
    job = store.put({"apiVersion": "batch/v1", "kind": "Job", **owned("train-leader", root)})
    container = {
        "name": "c",
        "image": "i",
        "resources": {"requests": {"nvidia.com/gpu": "4", "cpu": "8"}},
    }
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            **owned("train-leader-0", job),
            "spec": {"containers": [container], "nodeName": "n1"},
        }
    )
    store.create(  # pending, not bound: not yet in the gathered capacity
        {
            "apiVersion": "v1",
            "kind": "Pod",
            **owned("train-worker-0", job),
            "spec": {"containers": [container]},
        }
    )
    [left] = sync_cluster(client, now=now)
    assert [p.node for p in left.placement.pods] == ["n2"]
    assert len(read_entries(client)) == 1  # partly observed: kept
    store.patch("pods", "train-worker-0", {"spec": {"nodeName": "n2"}}, namespace="default")
    [observed] = sync_cluster(client, now=now)
    assert observed.placement.pods == ()  # fully observed: charges nothing,
    assert len(read_entries(client)) == 1  # but stays for a concurrent decision's read-back
    assert sync_cluster(client, now=now + OBSERVED_KEEP) == []
    assert read_entries(client) == []  # deleted once that is over


def test_sync_drops_expired_entries_and_entries_whose_workload_never_came(
    member: tuple[ApiServer, KubeClient],
) -> None:
    _, client = member
    now = 50_000.0
    fresh = InFlight(Placement(REF, "c1", (pod("leader", 0, "n1"),), GPU4), "d", now - 5, now + 600)
    write_entry(client, fresh)
    # just reserved, the apply is still on its way: kept
    assert sync_cluster(client, now=now) == [fresh]
    # the workload never appeared within the grace period: dropped and deleted
    assert sync_cluster(client, now=now + APPLY_GRACE + 10) == []
    assert read_entries(client) == []
    write_entry(client, fresh)
    assert sync_cluster(client, now=now + 700, delete=False) == []  # expired
    assert len(read_entries(client)) == 1  # delete=False (dry runs) leaves it


def test_batched_entries_share_configmaps_and_leave_one_by_one(
    member: tuple[ApiServer, KubeClient],
) -> None:
    server, client = member
    refs = [WorkloadRef(REF.api_version, "JobSet", "default", f"w{i}") for i in range(5)]
    entries = [
        InFlight(Placement(r, "c1", (pod("leader", 0, "n1"),), GPU4), "d", 1.0, 9e9) for r in refs
    ]
    first = write_entries(client, entries[:3], name="inflight-d")
    # the same name again (parts of one decision dispatched in parallel): a new ConfigMap
    second = write_entries(client, entries[3:], name="inflight-d")
    stores = {e.store for e in first} | {e.store for e in second}
    assert len(stores) == 2
    assert len(server.store.list("configmaps", LEDGER_NAMESPACE)) == 2
    assert sorted(e.workload.name for e in read_entries(client)) == [f"w{i}" for i in range(5)]
    [store] = {e.store for e in first}
    remove_entries(client, store, refs[:2])
    assert sorted(e.workload.name for e in read_entries(client)) == ["w2", "w3", "w4"]
    delete_entry(client, refs[2])  # found by a list: its ConfigMap goes with its last entry
    assert len(server.store.list("configmaps", LEDGER_NAMESPACE)) == 1
    assert sorted(e.workload.name for e in read_entries(client)) == ["w3", "w4"]


# --------------------------------------------------------------------------------------------
# entries written under a claim: the claim says whether the decider may still apply


def claimed_entry(client: KubeClient, claims: Claims) -> InFlight:
    """Claim REF and reserve it, as a dispatch does before it applies (it never does here)."""
    assert claims.acquire([REF]).won == (REF,)
    e = replace(entry(pod("leader", 0, "n1"), created=time.time()), decision=claims.decision)
    [stored] = write_entries(client, [replace(e, claimed=True)], name="inflight-test")
    return stored


def kept(client: KubeClient, **options: Any) -> list[str]:
    """The decisions of the entries a sync keeps counting."""
    return [e.decision for e in sync_cluster(client, **options)]


LEASE = "hub/placer-system/placer-controller"


def test_an_unapplied_entry_counts_while_its_decider_holds_the_claim(
    member: tuple[ApiServer, KubeClient],
) -> None:
    _, client = member
    submitter = Claims({"c1": client}, decision="d-submit")
    e = claimed_entry(client, submitter)
    assert kept(client) == [e.decision]
    # an elected controller reading it: a submit's claim is not its predecessor's
    assert kept(client, succession=Succession(LEASE, "ctl (b)")) == [e.decision]
    submitter.release()  # the decider stepped back without applying
    assert kept(client) == []
    assert read_entries(client) == []


def test_a_new_controller_retires_its_predecessors_unapplied_entries_at_once(
    member: tuple[ApiServer, KubeClient],
) -> None:
    _, client = member
    old = Claims({"c1": client}, decision="d-old", succession=Succession(LEASE, "ctl (a)"))
    e = claimed_entry(client, old)
    # the predecessor itself, and any other reader, keep it while its claim lives
    assert kept(client, succession=Succession(LEASE, "ctl (a)")) == [e.decision]
    assert kept(client) == [e.decision]
    # its successor, elected through the same Lease (so the predecessor has stopped), does not
    new = Succession(LEASE, "ctl (b)")
    assert kept(client, succession=new) == []
    # and takes the predecessor's claim over at once
    assert Claims({"c1": client}, decision="d-new", succession=new).acquire([REF]).won == (REF,)
    old.renew()
    assert old.taken(REF) is not None and not old.holds(REF)


def test_an_update_entry_charges_what_the_running_pods_do_not_cover() -> None:
    """An update's entry (a changed workload over its running copy): a running 4-GPU pod
    retires the 8-GPU pod planned on its node only in part; 4 GPUs stay charged there, and
    one pod of the new size covers it whole."""
    ref = WorkloadRef("v1", "Pod", "default", "grown")
    pods = tuple(PodAssignment("w", "", i, f"n{i}", {GPU: 8, "cpu": 1000}) for i in range(2))
    placement = Placement(ref, "c", pods, {GPU: 16, "cpu": 2000})
    entry = InFlight.new(placement, "d2", update=True, now=1_700_000_000.0)
    old = {GPU: 4, "cpu": 1000}
    partly = observe(entry, [("n0", old), ("n1", old)])
    assert [(p.node, dict(p.requests)) for p in partly.placement.pods] == [
        ("n0", {GPU: 4}),
        ("n1", {GPU: 4}),
    ]
    assert partly.placement.requests[GPU] == 8
    new = {GPU: 8, "cpu": 1000}
    assert observe(entry, [("n0", new), ("n1", old)]).placement.requests[GPU] == 4
    assert observe(entry, [("n0", new), ("n1", new)]).placement.pods == ()
    # a first placement's entry is retired whole by any matching pod, as before
    plain = InFlight.new(placement, "d1")
    assert observe(plain, [("n0", old), ("n1", old)]).placement.pods == ()
    # the mark survives the ConfigMap
    assert decode_entry(encode_entry(entry)) == entry
