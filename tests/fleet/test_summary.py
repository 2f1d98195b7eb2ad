"""`fleet show` summaries: the JSON shape of the issue, base units, largest block per node."""

from __future__ import annotations

from pathlib import Path

from placer.fleet.summary import cluster_rows, fleet_summary
from placer.snapshot import load_snapshot

ROOT = Path(__file__).resolve().parents[2]


def test_demo_fleet_summary_shape_and_values() -> None:
    fleet = load_snapshot(ROOT / "clusters" / "demo.yaml")
    summary = fleet_summary(fleet)
    assert list(summary) == ["clusters"]
    central = summary["clusters"][2]
    assert list(central) == [
        "name",
        "reachable",
        "reason",
        "labels",
        "nodes",
        "allocatable",
        "free",
        "max_free_per_node",
        "gpu_models",
        "devices",
    ]
    assert central["name"] == "central" and central["reachable"] is True
    assert central["nodes"] == 4
    assert central["allocatable"]["nvidia.com/gpu"] == 24
    assert central["free"]["nvidia.com/gpu"] == 12
    assert central["max_free_per_node"]["nvidia.com/gpu"] == 4
    assert central["allocatable"]["cpu"] == 3 * 126 + 31  # cores
    assert central["free"]["memory"] == (3 * 800 + 112) * 2**30  # bytes
    assert central["gpu_models"] == {"NVIDIA-L40S": 24}
    west = summary["clusters"][1]
    # 16 free GPUs, but never more than 2 on one usable node (the cordoned node has 8)
    assert (west["free"]["nvidia.com/gpu"], west["max_free_per_node"]["nvidia.com/gpu"]) == (16, 2)


def test_text_rows() -> None:
    rows = cluster_rows(load_snapshot(ROOT / "clusters" / "demo.yaml"))
    assert rows[0][:5] == ["CLUSTER", "REACHABLE", "NODES", "GPU FREE/ALLOC", "MAX GPU/NODE"]
    assert rows[3][:5] == ["central", "yes", "4", "12/24", "4"]
    assert rows[3][-1] == "NVIDIA-L40S×24"
