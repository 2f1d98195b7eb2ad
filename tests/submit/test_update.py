"""Issue 13, the lifecycle: `placer submit` of a changed manifest updates the copy where it runs,
refuses a change that no longer fits (nothing changed), and `--move` moves it — never with two
running copies.

The demo fleet (clusters/demo.yaml) served virtually with pods: central has three nodes with 4
free GPUs, east two nodes with 4 free (and one with 2), west no node with 4 free.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.dispatch.record import ANNOTATION_MOVING_FROM, PlacementRecord
from placer.dispatch.submit import gather_charged
from placer.fleet import fleet_from_kubeconfigs, member_clients
from placer.testing import WriteEvent
from tests.submit.conftest import ROOT, SEED, Fleet, submit

GPU = "nvidia.com/gpu"
JOBSETS = "jobsets.jobset.x-k8s.io"
LWS = "leaderworkersets.leaderworkerset.x-k8s.io"
EAST_FIRST = """\
apiVersion: placer.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: east-first}
spec:
  preferredClusters: [east]
"""


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def seed() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(SEED.read_text())
    return data


def images(obj: dict[str, Any]) -> set[str]:
    return {
        c["image"]
        for job in obj["spec"]["replicatedJobs"]
        for c in job["template"]["spec"]["template"]["spec"]["containers"]
    }


def jobset(name: str, workers: int, *, namespace: str = "team-m") -> dict[str, Any]:
    """A JobSet of a leader and ``workers`` workers, 4 GPUs each."""
    data = seed()
    data["metadata"] = {"name": name, "namespace": namespace}
    data["spec"]["replicatedJobs"][1]["replicas"] = workers
    return data


def lws(name: str, size: int, *, namespace: str = "team-m", gpus: int = 4) -> dict[str, Any]:
    """A LeaderWorkerSet of one group of ``size`` pods of ``gpus`` GPUs (it cannot be
    suspended)."""
    pod = {
        "containers": [
            {
                "name": "server",
                "image": "vllm/vllm-openai:v0.6.0",
                "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {GPU: gpus}},
            }
        ]
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": {"spec": pod},
                "workerTemplate": {"spec": pod},
            },
        },
    }


def store(fleet: Fleet, cluster: str) -> Any:
    return fleet.virtual.server(cluster).store


def placement(data: dict[str, Any]) -> dict[str, Any]:
    [item] = data["placements"]
    return dict(item)


def pods_on(fleet: Fleet, cluster: str, namespace: str) -> list[dict[str, Any]]:
    return list(store(fleet, cluster).list("pods", namespace))


class Timeline:
    """Every write of a kind on every cluster, in order: (cluster, event, suspended)."""

    def __init__(self, fleet: Fleet, resource: str) -> None:
        self.events: list[tuple[str, str, bool]] = []
        self.lock = threading.Lock()
        for name in ("east", "west", "central"):
            store(fleet, name).add_reactor(self._reactor(name, resource))

    def _reactor(self, cluster: str, resource: str) -> Callable[[WriteEvent], None]:
        def react(event: WriteEvent) -> None:
            if event.resource.plural != resource.split(".")[0]:
                return
            suspended = bool((event.object.get("spec") or {}).get("suspend"))
            with self.lock:
                self.events.append((cluster, event.type, suspended))

        return react

    def running_copies(self) -> int:
        """The most copies that existed unsuspended at one moment."""
        alive: dict[str, bool] = {}
        most = 0
        for cluster, kind, suspended in self.events:
            if kind == "DELETED":
                alive.pop(cluster, None)
            else:
                alive[cluster] = not suspended
            most = max(most, sum(alive.values()))
        return most


# --------------------------------------------------------------------------------------------
# in place


def test_a_changed_image_is_applied_where_it_runs_with_a_new_decision(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    code, first, _ = submit(capsys, fleet, SEED)
    assert code == 0 and placement(first)["cluster"] == "central"
    # central's free GPUs are all taken by the seed's own pods now: the change fits only
    # because they are counted as freed
    changed = seed()
    for job in changed["spec"]["replicatedJobs"]:
        job["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = "trainer:v2"
    code, second, _ = submit(capsys, fleet, write(tmp_path, "v2.yaml", changed))
    assert code == 0
    item = placement(second)
    assert item["state"] == "updated" and item["dispatched"] is True
    assert item["cluster"] == "central"
    assert item["previous"]["decision"] == first["decision"]
    assert item["record"]["decision"] == second["decision"] != first["decision"]
    assert any(
        "image trainer nvcr.io/nvidia/pytorch:24.05-py3 -> trainer:v2" in c
        and c.startswith("replicatedjob/worker: ")
        for c in item["changes"]
    )
    [obj] = fleet.jobsets("central")
    assert images(obj) == {"trainer:v2"}
    record = PlacementRecord.from_object(obj)
    assert record is not None and record.decision == second["decision"]
    assert fleet.jobsets("east") == [] and fleet.jobsets("west") == []
    assert len(pods_on(fleet, "central", "default")) == 3  # the framework rolled its pods

    code, third, _ = submit(capsys, fleet, write(tmp_path, "v2-again.yaml", changed))
    assert code == 0 and placement(third)["state"] == "unchanged"


def test_text_output_says_what_changed(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from placer.cli import main

    fleet = demo_fleet(pods=True)
    assert submit(capsys, fleet, SEED)[0] == 0
    changed = seed()
    changed["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]["requests"]["cpu"] = "16"
    path = write(tmp_path, "cpu.yaml", changed)
    code = main(["submit", "--kubeconfig", str(fleet.kubeconfig), "-f", str(path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "updated on central (was decision" in out
    assert "replicatedjob/worker: requests per pod cpu 8 -> 16" in out
    assert "1 updated" in out


def test_a_change_that_no_longer_fits_fails_with_the_reason_and_changes_nothing(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    assert submit(capsys, fleet, SEED)[0] == 0
    [before] = fleet.jobsets("central")
    entries = len(fleet.entries("central"))
    bigger = seed()
    bigger["spec"]["replicatedJobs"][1]["replicas"] = 3  # 4 pods x 4 GPUs; central has 3 nodes
    code, data, _ = submit(capsys, fleet, write(tmp_path, "bigger.yaml", bigger))
    assert code == 1
    assert data["placements"] == []
    [item] = data["unplaced"]
    assert item["state"] == "failed"
    error = item["error"]
    assert "the change no longer fits on cluster central" in error
    assert "nothing was changed (--move places it on another cluster)" in error
    assert "replicatedjob/worker: replicas 2 -> 3" in item["changes"]
    [after] = fleet.jobsets("central")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert len(fleet.entries("central")) == entries
    assert len(pods_on(fleet, "central", "default")) == 3


def test_a_dry_run_shows_the_change_and_changes_nothing(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    assert submit(capsys, fleet, SEED)[0] == 0
    [before] = fleet.jobsets("central")
    changed = seed()
    changed["metadata"]["labels"] = {"team": "vision"}
    code, data, _ = submit(
        capsys, fleet, write(tmp_path, "label.yaml", changed), extra=("--dry-run",)
    )
    assert code == 0
    item = placement(data)
    assert item["state"] == "dry-run" and item["cluster"] == "central"
    assert item["changes"] == ["metadata.labels.team: (none) -> vision"]
    [after] = fleet.jobsets("central")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_the_ledger_charges_the_difference_of_an_update(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A LeaderWorkerSet of 2-GPU pods grown from 2 to 3 pods while its 2 pods run: the
    update's entry plans 3 pods, the 2 running ones retire 2 of them, and 1 pod of 2 GPUs
    stays charged until the new pod is seen."""
    fleet = demo_fleet()  # no framework: the pods below are the copy's, placed by hand
    policy = ("--policy", str(write(tmp_path, "policy.yaml", yaml.safe_load(EAST_FIRST))))
    code, first, _ = submit(
        capsys, fleet, write(tmp_path, "a.yaml", lws("server", 2, gpus=2)), extra=policy
    )
    assert code == 0 and placement(first)["cluster"] == "east"
    [obj] = store(fleet, "east").list(LWS)
    record = PlacementRecord.from_object(obj)
    assert record is not None
    nodes = [n for planned in record.plan.values() for n in planned]
    store(fleet, "east").seed(
        [running_pod(obj, f"server-{i}", node, gpus=2) for i, node in enumerate(nodes)]
    )

    code, data, _ = submit(
        capsys, fleet, write(tmp_path, "b.yaml", lws("server", 3, gpus=2)), extra=policy
    )
    assert code == 0, data
    item = placement(data)
    assert item["state"] == "updated" and item["cluster"] == "east"
    config = fleet_from_kubeconfigs([str(fleet.kubeconfig)])
    with member_clients(config) as clients:
        _, ledger, _, _ = gather_charged(config, clients, delete=False)
    [entry] = [e for e in ledger.entries() if e.cluster == "east"]
    assert entry.update and entry.decision == data["decision"]
    assert [p.requests.get(GPU, 0) for p in entry.placement.pods] == [2]
    # the first decision's entry went with it
    [stored] = fleet.entries("east")
    [text] = stored["data"].values()
    assert json.loads(text)["update"] is True and json.loads(text)["decision"] == data["decision"]


def running_pod(owner: dict[str, Any], name: str, node: str, *, gpus: int) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "server",
                    "image": "vllm/vllm-openai:v0.6.0",
                    "resources": {
                        "requests": {"cpu": "8", "memory": "64Gi"},
                        "limits": {GPU: gpus},
                    },
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def test_a_copy_placed_by_the_controller_is_changed_on_the_hub_not_here(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet()
    assert submit(capsys, fleet, SEED)[0] == 0
    [obj] = fleet.jobsets("central")
    obj["metadata"]["labels"]["placer.dev/hub"] = "hub-1"
    store(fleet, "central").put(obj)
    changed = seed()
    changed["metadata"]["labels"] = {"x": "y"}
    code, data, _ = submit(capsys, fleet, write(tmp_path, "x.yaml", changed))
    assert code == 1
    [item] = data["unplaced"]
    assert "placed by the placement controller of hub hub-1" in item["error"]


# --------------------------------------------------------------------------------------------
# moving


def test_move_of_a_jobset_creates_it_suspended_removes_the_old_then_resumes(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    policy = ("--policy", str(write(tmp_path, "policy.yaml", yaml.safe_load(EAST_FIRST))))
    code, first, _ = submit(
        capsys, fleet, write(tmp_path, "m1.yaml", jobset("mover", 1)), extra=policy
    )
    assert code == 0 and placement(first)["cluster"] == "east"
    assert "team-m" in fleet.namespaces("east")  # made by placer for it
    timeline = Timeline(fleet, JOBSETS)
    grown = write(tmp_path, "m2.yaml", jobset("mover", 2))  # 3 pods of 4 GPUs: not on east

    code, data, _ = submit(capsys, fleet, grown, extra=policy)
    assert code == 1
    [item] = data["unplaced"]
    assert "the change no longer fits on cluster east" in item["error"]
    assert fleet.jobsets("central") == [] and len(fleet.jobsets("east")) == 1

    code, data, _ = submit(capsys, fleet, grown, extra=(*policy, "--move"))
    assert code == 0, data
    item = placement(data)
    assert item["state"] == "moved" and item["cluster"] == "central"
    assert item["movedFrom"] == "east"
    assert item["previous"]["cluster"] == "east"
    assert fleet.jobsets("east") == []
    [obj] = fleet.jobsets("central", "team-m")
    assert not obj["spec"].get("suspend")
    assert ANNOTATION_MOVING_FROM not in obj["metadata"].get("annotations", {})
    assert len(pods_on(fleet, "central", "team-m")) == 3
    assert pods_on(fleet, "east", "team-m") == []
    assert "team-m" not in fleet.namespaces("east")  # empty, and placer made it
    assert fleet.entries("east") == []
    # the order: new copy suspended, old copy gone, new copy resumed
    central = [
        (kind, suspended) for cluster, kind, suspended in timeline.events if cluster == "central"
    ]
    assert central[0] == ("ADDED", True)
    deleted = timeline.events.index(("east", "DELETED", False))
    resumed = timeline.events.index(("central", "MODIFIED", False))
    assert deleted < resumed
    assert timeline.running_copies() == 1


def test_move_of_a_kind_that_cannot_suspend_needs_allow_restart(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    policy = ("--policy", str(write(tmp_path, "policy.yaml", yaml.safe_load(EAST_FIRST))))
    code, first, _ = submit(
        capsys, fleet, write(tmp_path, "l2.yaml", lws("server", 2)), extra=policy
    )
    assert code == 0 and placement(first)["cluster"] == "east"
    timeline = Timeline(fleet, LWS)
    grown = write(tmp_path, "l3.yaml", lws("server", 3))

    code, data, _ = submit(capsys, fleet, grown, extra=(*policy, "--move"))
    assert code == 1
    [item] = data["unplaced"]
    assert "cannot be suspended" in item["error"] and "--allow-restart" in item["error"]
    assert len(store(fleet, "east").list(LWS)) == 1 and timeline.events == []

    code, data, _ = submit(capsys, fleet, grown, extra=(*policy, "--move", "--allow-restart"))
    assert code == 0, data
    item = placement(data)
    assert item["state"] == "moved" and item["cluster"] == "central"
    assert store(fleet, "east").list(LWS) == []
    assert len(store(fleet, "central").list(LWS)) == 1
    order = [(c, kind) for c, kind, _ in timeline.events if kind in ("ADDED", "DELETED")]
    assert order.index(("east", "DELETED")) < order.index(("central", "ADDED"))
    assert timeline.running_copies() == 1


def test_allow_restart_without_move_is_a_usage_error(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    from placer.cli import main

    fleet = demo_fleet()
    code = main(
        ["submit", "--kubeconfig", str(fleet.kubeconfig), "-f", str(SEED), "--allow-restart"]
    )
    assert code == 2
    assert "--allow-restart only applies to moves" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# under the claim


def test_two_processes_submitting_the_same_change_update_it_once(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    assert submit(capsys, fleet, SEED)[0] == 0
    changed = seed()
    changed["metadata"]["labels"] = {"run": "2"}
    path = write(tmp_path, "run2.yaml", changed)
    command = [
        sys.executable,
        "-m",
        "placer",
        "submit",
        "--kubeconfig",
        str(fleet.kubeconfig),
        "-f",
        str(path),
        "-o",
        "json",
    ]
    processes = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], [err for _, err in results]
    states = sorted(placement(json.loads(out))["state"] for out, _ in results)
    assert states == ["unchanged", "updated"]
    [obj] = fleet.jobsets("central")
    assert obj["metadata"]["labels"]["run"] == "2"
