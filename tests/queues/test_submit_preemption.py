"""``placer submit --queues``: what an unplaced workload would evict, and ``--allow-preemption``
evicting it (placer.dispatch.reclaim), on the virtual demo fleet (loopback API servers, real
kubeconfig).

team-b (quota 0) fills the fleet's 38 GPUs with 1-GPU Jobs; team-a's Job of 2 GPUs is within
its quota. Without the flag submit only says which two of team-b's Jobs it would evict, and
nothing changes; with it, those two copies are suspended (Jobs can be) and team-a's Job is
dispatched onto their node.
"""

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

ROOT = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"
QUEUES = """\
apiVersion: placer.dev/v1alpha1
kind: Queue
metadata: {name: team-a}
spec:
  resources:
    nvidia.com/gpu: {quota: 8}
---
apiVersion: placer.dev/v1alpha1
kind: Queue
metadata: {name: team-b}
spec:
  resources:
    nvidia.com/gpu: {quota: 0}
"""


def job(name: str, team: str, gpus: int) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {GPU: gpus}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"placer.dev/queue": team}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[VirtualFleet, Path]]:
    virtual = VirtualFleet(
        load_snapshot(ROOT / "clusters" / "demo.yaml"), setup=realism_setup(pods=False)
    ).start()
    try:
        yield virtual, virtual.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        virtual.stop()


def jobs(virtual: VirtualFleet) -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o
        for name in ("east", "west", "central")
        for o in virtual.server(name).store.list("jobs", "default")
    }


def flood_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The queues file, team-b's flood of 38 one-GPU Jobs and team-a's 2-GPU Job ``a-0``."""
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    flood = tmp_path / "flood.yaml"
    flood.write_text(yaml.safe_dump_all([job(f"b-{i}", "team-b", 1) for i in range(38)]))
    mine = tmp_path / "a.yaml"
    mine.write_text(yaml.safe_dump(job("a-0", "team-a", 2)))
    return queues, flood, mine


def test_submit_says_what_it_would_preempt_and_evicts_only_when_allowed(
    fleet: tuple[VirtualFleet, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    virtual, kubeconfig = fleet
    queues, flood, mine = flood_files(tmp_path)
    base = ["submit", "--kubeconfig", str(kubeconfig), "--queues", str(queues), "-o", "json"]
    assert main([*base, "-f", str(flood)]) == 0
    assert len(json.loads(capsys.readouterr().out)["placements"]) == 38

    assert main([*base, "-f", str(mine)]) == 1
    said = json.loads(capsys.readouterr().out)
    [preemption] = said["preemptions"]
    assert preemption["preemptor"]["name"] == "a-0" and not preemption["done"]
    victims = [v["workload"]["name"] for v in preemption["victims"]]
    assert len(victims) == 2 and all(v["rule"] == "reclaim" for v in preemption["victims"])
    assert all(not o["spec"].get("suspend") for o in jobs(virtual).values())
    assert "a-0" not in jobs(virtual)

    assert main([*base, "-f", str(mine), "--allow-preemption"]) == 0
    done = json.loads(capsys.readouterr().out)
    [placement] = done["placements"]
    assert placement["workload"]["name"] == "a-0" and placement["cluster"] == preemption["cluster"]
    [preemption] = done["preemptions"]
    assert preemption["done"] and preemption["state"] == "dispatched"
    assert {v["workload"]["name"] for v in preemption["victims"]} == set(victims)
    assert {v["evicted"] for v in preemption["victims"]} == {"suspended"}
    copies = jobs(virtual)
    for name in victims:
        assert copies[name]["spec"]["suspend"] is True
        annotations = copies[name]["metadata"]["annotations"]
        assert annotations["placer.dev/preempted-by"] == "Job/default/a-0"
    assert sum(1 for o in copies.values() if not o["spec"].get("suspend")) == 37

    get = ["get", "queues", "--queues", str(queues), "--kubeconfig", str(kubeconfig), "-o", "json"]
    assert main(get) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["queues"]}
    assert rows["team-a"]["resources"][GPU]["allocated"] == 2
    assert rows["team-b"]["resources"][GPU]["allocated"] == 36


def test_allow_preemption_needs_queues(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "a.yaml"
    manifest.write_text(yaml.safe_dump(job("a-0", "team-a", 1)))
    code = main(["submit", "-f", str(manifest), "--allow-preemption", "--kubeconfig", "/none"])
    assert code == 2
    assert "--allow-preemption goes with --queues" in capsys.readouterr().err


def test_a_placement_controllers_copies_are_never_submits_victims(
    fleet: tuple[VirtualFleet, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same flood, its copies marked as a hub's (``placer.dev/hub``): they count toward
    team-b, but ``placer submit`` leaves them to their controller: no eviction is proposed."""
    virtual, kubeconfig = fleet
    queues, flood, mine = flood_files(tmp_path)
    base = ["submit", "--kubeconfig", str(kubeconfig), "--queues", str(queues), "-o", "json"]
    assert main([*base, "-f", str(flood)]) == 0
    capsys.readouterr()
    for name in ("east", "west", "central"):
        store = virtual.server(name).store
        for obj in store.list("jobs", "default"):
            labels = {**obj["metadata"].get("labels", {}), "placer.dev/hub": "hub"}
            store.patch(
                "jobs",
                obj["metadata"]["name"],
                {"metadata": {"labels": labels}},
                namespace="default",
            )
    assert main([*base, "-f", str(mine), "--allow-preemption"]) == 1
    said = json.loads(capsys.readouterr().out)
    assert said["preemptions"] == []
    assert all(not o["spec"].get("suspend") for o in jobs(virtual).values())
