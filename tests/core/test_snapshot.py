"""Snapshot format: load, validate, round-trip, grouping of identical nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.errors import SnapshotError
from placer.model import Cluster, Fleet, Node, Taint
from placer.quantity import GPU
from placer.snapshot import dumps_snapshot, fleet_to_dict, load_snapshot, loads_snapshot

ROOT = Path(__file__).resolve().parents[2]


def test_demo_fleet_loads_with_expected_free_gpus() -> None:
    fleet = load_snapshot(ROOT / "clusters" / "demo.yaml")
    assert fleet.names == ("east", "west", "central")
    free = {c.name: c.free().get(GPU, 0) for c in fleet.clusters}
    # west-a100-8 is cordoned: its 8 free GPUs do not count as usable
    assert free == {"east": 10, "west": 16, "central": 12}
    blocks = {
        c.name: sorted(n.free.get(GPU, 0) for n in c.nodes if n.usable and GPU in n.allocatable)
        for c in fleet.clusters
    }
    assert blocks["central"] == [4, 4, 4]
    assert blocks["east"] == [2, 4, 4]
    assert max(blocks["west"]) == 2


def test_round_trip_keeps_every_node_and_groups_identical_ones() -> None:
    fleet = load_snapshot(ROOT / "clusters" / "demo.yaml")
    data = fleet_to_dict(fleet)
    west = next(c for c in data["clusters"] if c["name"] == "west")
    assert [len(g["names"]) for g in west["nodeGroups"]] == [8, 1]
    again = loads_snapshot(dumps_snapshot(fleet))
    assert again == fleet


def test_devices_and_taints_round_trip() -> None:
    node = Node(
        name="n0",
        allocatable={GPU: 2, "cpu": 8000, "memory": 2**34, "pods": 110},
        requested={"cpu": 500, "pods": 1},
        labels={"kubernetes.io/hostname": "n0", "gpu": "t4"},
        taints=(Taint("dedicated", "ml", "NoExecute"),),
        gpu_devices=(1000, 250),
    )
    fleet = Fleet((Cluster("c", (node,), labels={"region": "x"}),), "2026-01-01T00:00:00Z")
    again = loads_snapshot(dumps_snapshot(fleet))
    assert again == fleet
    assert again.clusters[0].nodes[0].free[GPU] == 1  # one device fully free


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[1, 2", "not valid YAML"),
        ("kind: Other\napiVersion: placer.dev/v1alpha1\nclusters: []", "kind"),
        (
            "kind: FleetSnapshot\napiVersion: placer.dev/v1alpha1\nclusters:\n- name: a\n"
            "  nodeGroups:\n  - names: [n]\n    allocatable: {cpu: lots}",
            "clusters[0].nodeGroups[0].allocatable.cpu",
        ),
        (
            "kind: FleetSnapshot\napiVersion: placer.dev/v1alpha1\nclusters:\n- name: a\n- name: a",
            "duplicate cluster name",
        ),
        (
            "kind: FleetSnapshot\napiVersion: placer.dev/v1alpha1\nclusters:\n- name: a\n"
            "  nodeGroups:\n  - count: 2\n    allocatable: {cpu: 1}",
            "namePrefix",
        ),
    ],
)
def test_malformed_snapshot_names_file_and_field(text: str, fragment: str) -> None:
    with pytest.raises(SnapshotError) as info:
        loads_snapshot(text, source="bad.yaml")
    assert "bad.yaml" in str(info.value)
    assert fragment in str(info.value)


def test_missing_snapshot_file(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no such file"):
        load_snapshot(tmp_path / "nope.yaml")
