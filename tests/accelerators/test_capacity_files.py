"""DRA devices and the accelerator table in the files placer reads and writes: snapshots (round
trip through text and through a virtual fleet), fleet files, ``fleet show``, ``simulate``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from placer.cli import main
from placer.errors import FleetConfigError, SnapshotError
from placer.fleet import fleet_from_kubeconfigs, gather_fleet, load_fleet_file
from placer.model import Cluster, DeviceGroup, Fleet, Node
from placer.quantity import CPU, GPU, MEMORY, PODS
from placer.snapshot import dumps_snapshot, loads_snapshot
from placer.virtual.fleet import VirtualFleet
from tests.accelerators.conftest import H100, claim_template

GI = 2**30


def dra_node(name: str, devices: int, allocated: int) -> Node:
    """A node whose GPUs are DRA devices only (already folded into allocatable/requested)."""
    group = DeviceGroup(
        "gpu.nvidia.com", GPU, devices, allocated, {"productName": H100, "type": "gpu"}
    )
    return Node(
        name=name,
        allocatable={CPU: 32000, MEMORY: 256 * GI, PODS: 110, GPU: devices},
        requested={CPU: 2000, MEMORY: 8 * GI, PODS: 1, GPU: allocated},
        labels={"kubernetes.io/hostname": name},
        devices=(group,),
    )


FLEET = Fleet(
    clusters=(Cluster("alpha", nodes=(dra_node("dra-a", 4, 3), dra_node("dra-b", 4, 1))),),
    captured_at="2026-12-01T00:00:00Z",
    accelerators={"gpuMemoryPerDevice": "40Gi"},
)


def test_a_snapshot_keeps_dra_devices_and_the_table_through_text() -> None:
    text = dumps_snapshot(FLEET)
    data = yaml.safe_load(text)
    group = data["clusters"][0]["nodeGroups"][0]["devices"][0]
    assert group == {
        "driver": "gpu.nvidia.com",
        "resource": GPU,
        "count": 4,
        "allocated": 3,
        "attributes": {"productName": H100, "type": "gpu"},
    }
    assert data["accelerators"] == {"gpuMemoryPerDevice": "40Gi"}
    assert loads_snapshot(text) == FLEET


def test_the_virtual_fleet_serves_dra_devices_that_gather_back_the_same(tmp_path: Path) -> None:
    with VirtualFleet(FLEET) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kc")
        fleet_file = virtual.write_fleet_file(tmp_path / "fleet.yaml", kubeconfig=kubeconfig)
        gathered = gather_fleet(fleet_from_kubeconfigs([kubeconfig]))
        through_file = gather_fleet(load_fleet_file(fleet_file))
        slices = virtual.server("alpha").store.list("resourceslices")
    assert gathered.clusters[0].nodes == FLEET.clusters[0].nodes
    assert len(slices) == 2
    # the fleet file carries the snapshot's table, and a snapshot taken through it too
    assert through_file.accelerators == FLEET.accelerators
    assert loads_snapshot(dumps_snapshot(through_file)).accelerators == FLEET.accelerators


def test_a_bad_device_group_or_table_is_a_clear_error() -> None:
    data = yaml.safe_load(dumps_snapshot(FLEET))
    data["clusters"][0]["nodeGroups"][0]["devices"][0]["allocated"] = 9
    with pytest.raises(SnapshotError, match=r"nodeGroups\[0\]\.devices\[0\]\.allocated"):
        loads_snapshot(yaml.safe_dump(data), source="s.yaml")
    data = yaml.safe_load(dumps_snapshot(FLEET))
    data["accelerators"] = {"deviceClasess": []}
    with pytest.raises(SnapshotError, match=r"unknown key.*deviceClasess"):
        loads_snapshot(yaml.safe_dump(data), source="s.yaml")


def test_a_fleet_files_accelerator_section_is_checked_and_used(tmp_path: Path) -> None:
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "a"}],
                "accelerators": {"sharedResources": [{"resource": "nvidia.com/gpu.shared"}]},
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(FleetConfigError, match=r"accelerators\.sharedResources\[0\]\.replicas"):
        load_fleet_file(fleet_file)
    fleet_file.write_text(
        yaml.safe_dump({"clusters": [{"name": "a"}], "accelerators": {"gpuGroupLabel": "grp"}}),
        encoding="utf-8",
    )
    config = load_fleet_file(fleet_file)
    assert config.accelerators.gpu_group_label == "grp"
    assert config.accelerators.device_classes  # the other keys keep placer's defaults


def test_fleet_show_lists_dra_devices_per_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(dumps_snapshot(FLEET), encoding="utf-8")
    assert main(["fleet", "show", str(snapshot), "--nodes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-2:] == ["DRA", "DEVICES"]
    assert "gpu.nvidia.com 1/4 free (nvidia.com/gpu)" in lines[1]
    assert H100 in lines[1]  # the model from the devices' productName
    assert main(["fleet", "show", str(snapshot), "-o", "json"]) == 0
    devices = json.loads(capsys.readouterr().out)["clusters"][0]["devices"]
    assert [(d["node"], d["count"], d["allocated"]) for d in devices] == [
        ("dra-a", 4, 3),
        ("dra-b", 4, 1),
    ]


def test_simulate_counts_dra_devices_and_claims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(dumps_snapshot(replace(FLEET, accelerators={})), encoding="utf-8")
    jobs = []
    for name, count in (("two", 2), ("four", 4)):
        jobs.append(claim_template(f"{name}-gpus", count=count))
        jobs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "team-a"},
                "spec": {
                    "resourceClaims": [{"name": "g", "resourceClaimTemplateName": f"{name}-gpus"}],
                    "containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
    workloads = tmp_path / "jobs.yaml"
    workloads.write_text(yaml.safe_dump_all(jobs), encoding="utf-8")
    code = main(
        ["simulate", "--snapshot", str(snapshot), "--workloads", str(workloads), "-o", "json"]
    )
    assert code == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    where = {w["workload"]["name"]: w.get("cluster") for w in run["workloads"]}
    # 2 devices fit on dra-b (3 free); 4 fit on no node (1 and 3 free)
    assert where == {"two": "alpha", "four": None}
    (cluster,) = run["clusters"]
    assert (cluster["gpus"], cluster["before"]["gpus_used"]) == (8.0, 4.0)
    assert cluster["after"]["gpus_used"] == 6.0
