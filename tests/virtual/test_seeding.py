"""Seeding objects from a snapshot gives the snapshot's capacity back (pure round trip)."""

from __future__ import annotations

from pathlib import Path

from placer.fleet import PodTally, cluster_from_api
from placer.model import GPU_SHARE, Cluster, Node, PendingPods, Taint
from placer.quantity import GPU
from placer.snapshot import load_snapshot
from placer.virtual.seeding import cluster_objects, split

ROOT = Path(__file__).resolve().parents[2]


def regather(cluster: Cluster) -> Cluster:
    objects = list(cluster_objects(cluster))
    nodes = [o for o in objects if o["kind"] == "Node"]
    tally = PodTally()
    tally.add_all(o for o in objects if o["kind"] == "Pod")
    return cluster_from_api(
        cluster.name, nodes, tally, labels=cluster.labels, taints=cluster.taints
    )


def capacity(cluster: Cluster) -> dict[str, object]:
    return {
        node.name: (
            {k: v for k, v in node.free.items() if v},
            node.labels,
            node.taints,
            node.ready,
            node.unschedulable,
            node.gpu_devices,
        )
        for node in cluster.nodes
    }


def test_split_sums_to_the_total() -> None:
    shares = split({"cpu": 1001, GPU: 3, "memory": 0}, 3)
    assert shares == [{"cpu": 335, GPU: 1}, {"cpu": 333, GPU: 1}, {"cpu": 333, GPU: 1}]
    assert split({"cpu": 1}, 0) == []


def test_demo_fleet_round_trips_node_by_node() -> None:
    for cluster in load_snapshot(ROOT / "clusters" / "demo.yaml").clusters:
        again = regather(cluster)
        assert capacity(again) == capacity(cluster)
        pods = {n.name: n.requested.get("pods", 0) for n in cluster.nodes}
        assert {n.name: n.requested.get("pods", 0) for n in again.nodes} == pods


def test_devices_taints_state_and_pending_round_trip() -> None:
    node = Node(
        "n0",
        {GPU: 4, "cpu": 16000, "memory": 2**36, "pods": 110, GPU_SHARE: 4000},
        requested={GPU: 1, GPU_SHARE: 750, "cpu": 2500, "pods": 3},
        labels={"kubernetes.io/hostname": "n0"},
        taints=(Taint("dedicated", "ml", "NoExecute"), Taint("spot", "", "PreferNoSchedule")),
        unschedulable=True,
        ready=False,
        gpu_devices=(0, 250, 1000, 1000),
    )
    orphan = Node("n1", {"cpu": 1000}, requested={"cpu": 500})  # requests but no pod count
    cluster = Cluster("c", (node, orphan), pending=PendingPods(2, {GPU: 9, "cpu": 3}))
    again = regather(cluster)
    assert capacity(again)["n0"] == capacity(cluster)["n0"]
    assert again.nodes[0].requested == node.requested
    # a node with requests but no pod count gets one pod: only its pod count differs
    assert again.nodes[1].requested == {"cpu": 500, "pods": 1}
    assert again.pending == cluster.pending
