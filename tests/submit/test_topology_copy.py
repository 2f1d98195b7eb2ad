"""Issue 17, topology on the dispatched copy: the member is told the domain placer chose — a
required node affinity ``LEVEL In (value)`` in the pod templates of the constrained pods,
added to the template's own required terms — so that kube-scheduler alone keeps the gang in
the rack. Over HTTPS to a virtual fleet of clusters/racks.yaml."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.submit.conftest import ROOT

RACKS = ROOT / "clusters" / "racks.yaml"
TRAINING = ROOT / "deploy" / "examples" / "rack-training.yaml"
LEAF = "network.topology.nvidia.com/leaf"


@pytest.fixture
def racks(tmp_path: Path) -> Iterator[tuple[VirtualFleet, Path]]:
    with VirtualFleet(load_snapshot(RACKS), setup=realism_setup(pods=False)) as virtual:
        yield virtual, virtual.write_kubeconfig(tmp_path / "kubeconfig")


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"])


def test_the_copy_requires_the_chosen_rack(
    racks: tuple[VirtualFleet, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    virtual, kubeconfig = racks
    # the user's own required term stays, and must hold as well
    data = yaml.safe_load(TRAINING.read_text())
    own = {"key": "network.topology.nvidia.com/spine", "operator": "Exists"}
    data["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [own]}]
            }
        }
    }
    path = tmp_path / "training.yaml"
    path.write_text(yaml.safe_dump(data))
    code = main(["submit", "-f", str(path), "--kubeconfig", str(kubeconfig), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    [placement] = out["placements"]
    assert placement["cluster"] == "dc2"
    assert (
        "pods of replicatedjob/worker kept in network.topology.nvidia.com/leaf=r3 (required"
        in " ".join(placement["notes"])
    )
    [copy] = virtual.server("dc2").store.list("jobsets.jobset.x-k8s.io", "default")
    terms = pod_spec(copy)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [own, {"key": LEAF, "operator": "In", "values": ["r3"]}]}]
    # the planned nodes carry that value (the affinity admits the decision's own nodes)
    nodes = {n["metadata"]["name"]: n for n in virtual.server("dc2").store.list("nodes")}
    for node in {p["node"] for p in placement["pods"]}:
        assert nodes[node]["metadata"]["labels"][LEAF] == "r3"


def test_no_affinity_without_a_topology_constraint(
    racks: tuple[VirtualFleet, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = yaml.safe_load(TRAINING.read_text())
    del data["metadata"]["annotations"]
    path = tmp_path / "free.yaml"
    path.write_text(yaml.safe_dump(data))
    virtual, kubeconfig = racks
    code = main(["submit", "-f", str(path), "--kubeconfig", str(kubeconfig), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    cluster = out["placements"][0]["cluster"]
    [copy] = virtual.server(cluster).store.list("jobsets.jobset.x-k8s.io", "default")
    assert "affinity" not in pod_spec(copy)


def test_an_update_in_place_keeps_the_chosen_rack(
    racks: tuple[VirtualFleet, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A changed manifest applied where it is keeps the required rack (the update is handed
    over as the dispatch was: placer.dispatch.handoff)."""
    virtual, kubeconfig = racks
    args = ["submit", "--kubeconfig", str(kubeconfig), "-o", "json"]
    assert main([*args, "-f", str(TRAINING)]) == 0
    capsys.readouterr()
    data = yaml.safe_load(TRAINING.read_text())
    data["metadata"].setdefault("labels", {})["team"] = "vision"
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(data))
    code = main([*args, "-f", str(path)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    [placement] = out["placements"]
    assert placement["state"] == "updated"
    [copy] = virtual.server(placement["cluster"]).store.list("jobsets.jobset.x-k8s.io", "default")
    assert copy["metadata"]["labels"]["team"] == "vision"
    terms = pod_spec(copy)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": LEAF, "operator": "In", "values": ["r3"]}]}]
