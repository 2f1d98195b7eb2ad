"""`fleet show` summaries: the JSON shape of the issue, base units, largest block per node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from placer.cli import main
from placer.fleet.summary import cluster_rows, fleet_summary, node_rows
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from tests.builders import fleets

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
        "scheduler",
    ]
    assert central["name"] == "central" and central["reachable"] is True
    assert central["nodes"] == 4
    assert central["allocatable"]["nvidia.com/gpu"] == 24
    assert central["free"]["nvidia.com/gpu"] == 12
    assert central["max_free_per_node"]["nvidia.com/gpu"] == 4
    assert central["allocatable"]["cpu"] == 3 * 126 + 31  # cores
    assert central["free"]["memory"] == (3 * 800 + 112) * 2**30  # bytes
    assert central["gpu_models"] == {"NVIDIA-L40S": 24}
    assert central["scheduler"] == {"name": "default", "source": "default"}
    west = summary["clusters"][1]
    # 16 free GPUs, but never more than 2 on one usable node (the cordoned node has 8)
    assert (west["free"]["nvidia.com/gpu"], west["max_free_per_node"]["nvidia.com/gpu"]) == (16, 2)


def test_text_rows() -> None:
    rows = cluster_rows(load_snapshot(ROOT / "clusters" / "demo.yaml"))
    assert rows[0][:5] == ["CLUSTER", "REACHABLE", "NODES", "GPU FREE/ALLOC", "MAX GPU/NODE"]
    assert rows[3][:5] == ["central", "yes", "4", "12/24", "4"]
    assert rows[3][-1] == "NVIDIA-L40S×24"


def test_fleet_show_says_each_members_scheduler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`placer fleet show --fleet FILE`: the scheduler the fleet file (or a cluster label)
    names for each member, with its queue, in the JSON and the text table."""
    with VirtualFleet(load_snapshot(ROOT / "clusters" / "demo.yaml")) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kc")
        fleet = tmp_path / "fleet.yaml"
        fleet.write_text(
            yaml.safe_dump(
                {
                    "clusters": [
                        {
                            "name": "east",
                            "kubeconfig": str(kubeconfig),
                            "scheduler": {"name": "kai", "queues": {"team-a": "research"}},
                        },
                        {
                            "name": "west",
                            "kubeconfig": str(kubeconfig),
                            "labels": {"placer.dev/scheduler": "volcano"},
                        },
                        {"name": "central", "kubeconfig": str(kubeconfig)},
                    ]
                }
            )
        )
        assert main(["fleet", "show", "--fleet", str(fleet), "-o", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        east, west, central = (c["scheduler"] for c in data["clusters"])
        assert east == {
            "name": "kai",
            "source": f"{fleet}: clusters[0].scheduler",
            "schedulerName": "kai-scheduler",
            "defaultQueue": "default-queue",
            "queues": {"team-a": "research"},
        }
        assert west["name"] == "volcano"
        assert west["source"] == "cluster label placer.dev/scheduler"
        assert central == {"name": "default", "source": "default"}
        assert main(["fleet", "show", "--fleet", str(fleet)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert "SCHEDULER" in lines[0]
        assert "kai (queue default-queue)" in lines[1]
        assert "volcano (queue default)" in lines[2]


def test_fleet_show_nodes_shows_shared_gpu_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Room left on partly used devices (Run:ai / KAI fractions), MIG slices and time-sliced
    GPUs are not whole free GPUs: `--nodes` shows them in GPU SHARES, gathered over HTTPS."""
    model = fleets.fleet(
        fleets.cluster(
            "a",
            fleets.node("a-0", gpus=4, devices=[1000, 500, 250, 1000]),
            fleets.node(
                "a-1", gpus=0, extra={"nvidia.com/mig-1g.10gb": 7, "nvidia.com/gpu.shared": 8}
            ),
            fleets.node("a-2", gpus=8),
        )
    )
    with VirtualFleet(model) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kc")
        assert main(["fleet", "show", "--nodes", "--kubeconfig", str(kubeconfig)]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split("   ")[-1].strip() == "GPU SHARES"
    column = header.index("GPU SHARES")
    cells = {row.split()[1]: (row.split()[3], row[column:].strip()) for row in rows}
    assert cells == {
        "a-0": ("2/4", "0.5+0.25 free on 2 shared GPUs"),
        "a-1": ("0/0", "gpu.shared 8/8, mig-1g.10gb 7/7"),
        "a-2": ("8/8", "-"),
    }


def test_no_gpu_shares_column_without_shared_capacity() -> None:
    rows = node_rows(load_snapshot(ROOT / "clusters" / "demo.yaml"))
    assert "GPU SHARES" not in rows[0]
