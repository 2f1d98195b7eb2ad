"""The capacity kept change by change (LiveCluster) equals the capacity gathered from the same
objects (cluster_from_api), node by node, after random churn."""

from __future__ import annotations

from typing import Any

import pytest

from placer.accelerators import default_accelerators
from placer.fleet.capacity import (
    GPU_DEVICES_ANNOTATION,
    PodTally,
    cluster_from_api,
    node_from_api,
)
from placer.fleet.devices import node_device_groups
from placer.fleet.livecluster import LiveCluster, compact_node, compact_pod
from placer.model import GPU_SHARE, Cluster, Taint
from placer.objects import name_key
from placer.quantity import GPU
from tests.fleet.churn import Churn

LABELS = {"team": "ml"}
TAINTS = (Taint("dedicated", "ml", "NoSchedule"),)


def gathered(churn: Churn) -> Cluster:
    """What gathering the same objects gives."""
    table = default_accelerators()
    tally = PodTally(table)
    tally.add_all(churn.items("Pod"))
    slices = churn.items("ResourceSlice")
    devices = node_device_groups(slices, churn.items("ResourceClaim"), table) if slices else {}
    nodes = [node_from_api(n) for n in churn.items("Node")]
    return cluster_from_api("m1", nodes, tally, labels=LABELS, taints=TAINTS, devices=devices)


def feed(
    live: LiveCluster, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None
) -> None:
    obj = new if new is not None else old
    assert obj is not None
    key = name_key(obj)
    if kind == "Node":
        live.set_node(new, name=key[1])
    elif kind == "Pod":
        live.set_pod(key, compact_pod(new) if new is not None else None)
    elif kind == "ResourceSlice":
        live.set_slice(key, new)
    else:
        live.set_claim(key, new)


def assert_same(live: Cluster, fresh: Cluster) -> None:
    assert [n.name for n in live.nodes] == [n.name for n in fresh.nodes]
    for mine, theirs in zip(live.nodes, fresh.nodes, strict=True):
        assert mine == theirs, mine.name
    assert live.pending == fresh.pending
    assert live == fresh


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_live_cluster_equals_a_fresh_gather_after_random_churn(seed: int) -> None:
    churn = Churn(nodes=30, pods=250, seed=seed)
    live = LiveCluster("m1", default_accelerators())
    for kind in ("Node", "Pod", "ResourceSlice", "ResourceClaim"):
        for obj in churn.items(kind):
            feed(live, kind, None, obj)
    assert_same(live.cluster(labels=LABELS, taints=TAINTS), gathered(churn))
    kinds: set[str] = set()
    for _ in range(12):
        for kind, old, new in churn.changes(60):
            kinds.add(kind)
            feed(live, kind, old, new)
        built = live.cluster(labels=LABELS, taints=TAINTS)
        assert_same(built, gathered(churn))
        # the free room kept node by node is the cluster's free room
        room = live.room(built)
        assert room is not None
        assert {k: v for k, v in room.items() if v} == {k: v for k, v in built.free().items() if v}
    assert kinds == {"Node", "Pod", "ResourceSlice", "ResourceClaim"}
    built = live.cluster(labels=LABELS, taints=TAINTS)
    # the churn exercised what is counted: shared GPUs, DRA devices, pending pods, cordons
    assert any(n.requested.get(GPU_SHARE) for n in built.nodes)
    assert any(n.devices for n in built.nodes)
    annotated = {
        n["metadata"]["name"]
        for n in churn.items("Node")
        if GPU_DEVICES_ANNOTATION in (n["metadata"].get("annotations") or {})
    }
    assert any(n.name in annotated and n.requested.get(GPU) for n in built.nodes)
    assert built.pending.count > 0
    assert any(n.unschedulable for n in built.nodes)


def test_the_cluster_is_reused_while_nothing_changes_and_rebuilt_after_a_change() -> None:
    churn = Churn(nodes=5, pods=20, seed=4)
    live = LiveCluster("m1", default_accelerators())
    for kind in ("Node", "Pod"):
        for obj in churn.items(kind):
            feed(live, kind, None, obj)
    first = live.cluster(labels=LABELS)
    assert live.cluster(labels=LABELS) is first
    assert live.cluster(labels={"other": "x"}) is not first  # other labels, another cluster
    node = churn.node_names()[0]
    pod = {
        "metadata": {"name": "late", "namespace": "team-0"},
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": "3"}}}]},
        "status": {"phase": "Running"},
    }
    before = next(n for n in live.cluster().nodes if n.name == node)
    live.set_pod(("team-0", "late"), compact_pod(pod))
    after = next(n for n in live.cluster().nodes if n.name == node)
    assert after.requested["cpu"] == before.requested.get("cpu", 0) + 3000
    assert after.requested["pods"] == before.requested.get("pods", 0) + 1
    live.set_pod(("team-0", "late"), None)
    assert next(n for n in live.cluster().nodes if n.name == node) == before


def test_compact_pods_count_as_the_pods_they_come_from() -> None:
    churn = Churn(nodes=10, pods=120, seed=5)
    table = default_accelerators()
    whole, compact = PodTally(table), PodTally(table)
    for pod in churn.items("Pod"):
        pod["metadata"].setdefault("annotations", {})[
            "kubectl.kubernetes.io/last-applied-configuration"
        ] = "x" * 1000
        whole.add(pod)
        compact.add(compact_pod(pod))
        assert (
            "kubectl.kubernetes.io/last-applied-configuration"
            not in (compact_pod(pod)["metadata"]["annotations"])
        )
    assert whole.requested == compact.requested
    assert whole.pending == compact.pending
    assert whole.shares == compact.shares


def test_compact_nodes_read_as_the_nodes_they_come_from() -> None:
    churn = Churn(nodes=12, pods=0, seed=6)
    for node in churn.items("Node"):
        node["status"]["images"] = [
            {"names": [f"registry/image-{i}"], "sizeBytes": i} for i in range(50)
        ]
        node["metadata"].setdefault("annotations", {})["placer.dev/gpu-devices"] = "1000,500"
        small = compact_node(node)
        assert "images" not in small["status"]
        assert node_from_api(small) == node_from_api(node)
