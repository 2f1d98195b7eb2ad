"""Issue 15: the virtual fleet plays each member scheduler (placer.virtual.scheduling).

Two 3-pod gangs (deploy/examples/two-gangs.yaml) sent together to a cluster with room for one
and a half (clusters/gangs.yaml, `small`) by `placer submit --snapshot-free` (the member's
scheduler does the fitting): with the default scheduler both are half-started — two pods each
bound, each waiting forever for its third (the deadlock); handed to a gang scheduler (volcano,
kai, coscheduling) one runs whole and the other waits whole, holding nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.model import PodDemand
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from placer.virtual.scheduling import Ask, assign
from tests.builders.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
GANGS = ROOT / "deploy" / "examples" / "two-gangs.yaml"


class Room:
    def __init__(self, free: dict[str, int]) -> None:
        self.free = {name: {"gpu": gpus} for name, gpus in free.items()}

    def save(self) -> object:
        return {name: dict(room) for name, room in self.free.items()}

    def restore(self, saved: object) -> None:
        assert isinstance(saved, dict)
        self.free = saved


def bind(room: Room, demand: PodDemand, planned: str) -> str:
    need = demand.requests.get("gpu", 0)
    for name in sorted(room.free):
        if room.free[name]["gpu"] >= need:
            room.free[name]["gpu"] -= need
            return name
    return ""


def asks(scheduler: str) -> list[Ask]:
    pod = PodDemand(requests={"gpu": 2})
    return [
        Ask(f"{w}{i}", w, pod, scheduler=scheduler, group=w if scheduler else "", min_member=3)
        for w in ("a", "b")
        for i in range(3)
    ]


def test_assign_interleaves_default_pods_and_keeps_gangs_whole() -> None:
    half = assign(Room({"n0": 4, "n1": 4, "n2": 1}), asks(""), bind)
    assert sorted(k for k, (node, _) in half.items() if node) == ["a0", "a1", "b0", "b1"]
    assert "no node fits" in half["a2"][1]
    whole = assign(Room({"n0": 4, "n1": 4, "n2": 1}), asks("volcano"), bind)
    assert sorted(k for k, (node, _) in whole.items() if node) == ["a0", "a1", "a2"]
    assert all(not whole[f"b{i}"][0] for i in range(3))
    assert "pod group b: 3 pod(s) must start together, 1 fit now" in whole["b0"][1]
    blocked = Ask("x", "w", PodDemand(requests={"gpu": 2}), blocked="no queue")
    assert assign(Room({"n0": 8}), [blocked], bind) == {"x": ("", "no queue")}


class Members:
    def __init__(self, virtual: VirtualFleet, kubeconfig: Path, tmp_path: Path) -> None:
        self.virtual = virtual
        self.kubeconfig = kubeconfig
        self.tmp_path = tmp_path

    def submit(self, capsys: pytest.CaptureFixture[str], scheduler: Any) -> dict[str, Any]:
        clusters = []
        for name in ("small", "big"):
            entry: dict[str, Any] = {"name": name, "kubeconfig": str(self.kubeconfig)}
            if scheduler is not None:
                entry["scheduler"] = scheduler
            clusters.append(entry)
        fleet = self.tmp_path / "fleet.yaml"
        fleet.write_text(yaml.safe_dump({"clusters": clusters}))
        policy = self.tmp_path / "policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "placer.dev/v1alpha1",
                    "kind": "PlacementPolicy",
                    "metadata": {"name": "small-first"},
                    "spec": {"preferredClusters": ["small", "big"]},
                }
            )
        )
        args = ["submit", "--snapshot-free", "--fleet", str(fleet), "--policy", str(policy)]
        code = main([*args, "-f", str(GANGS), "-o", "json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        data: dict[str, Any] = json.loads(out)
        assert [p["cluster"] for p in data["placements"]] == ["small", "small"]
        return data

    def pods(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """workload -> {"bound": [...], "waiting": [...]} on small, once all were looked at."""
        deadline = time.monotonic() + 30
        while True:
            pods = self.virtual.server("small").store.list("pods", "default")
            seen = [p for p in pods if p["spec"].get("nodeName") or p["status"].get("conditions")]
            if len(pods) == 6 and len(seen) == 6:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"pods not all looked at: {[p['metadata']['name'] for p in pods]}")
            time.sleep(0.1)
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for pod in pods:
            owner = pod["metadata"]["ownerReferences"][0]["name"]
            state = "bound" if pod["spec"].get("nodeName") else "waiting"
            out.setdefault(owner, {"bound": [], "waiting": []})[state].append(pod)
        return out


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    snapshot = load_snapshot(ROOT / "clusters" / "gangs.yaml")
    # pods of workloads created within 2 s are bound together, as if created side by side
    with VirtualFleet(snapshot, setup=realism_setup(window=2.0)) as virtual:
        yield Members(virtual, virtual.write_kubeconfig(tmp_path / "kc"), tmp_path)


def test_default_scheduler_half_starts_both_gangs(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    members.submit(capsys, None)
    pods = members.pods()
    for gang in ("gang-a", "gang-b"):
        assert (len(pods[gang]["bound"]), len(pods[gang]["waiting"])) == (2, 1), gang
        [waiting] = pods[gang]["waiting"]
        [condition] = waiting["status"]["conditions"]
        assert (condition["reason"], condition["status"]) == ("Unschedulable", "False")
        assert "virtual default-scheduler" in condition["message"]
    # deadlock: 4 of 6 pods hold 8 GPUs, and neither gang can ever start


@pytest.mark.parametrize(
    "scheduler",
    [{"name": "volcano"}, {"name": "kai", "defaultQueue": "research"}, {"name": "coscheduling"}],
)
def test_a_gang_scheduler_runs_one_whole_and_keeps_the_other_waiting_whole(
    members: Members, capsys: pytest.CaptureFixture[str], scheduler: dict[str, Any]
) -> None:
    members.submit(capsys, scheduler)
    pods = members.pods()
    counts = sorted((len(p["bound"]), len(p["waiting"])) for p in pods.values())
    assert counts == [(0, 3), (3, 0)]
    [waiting] = [p for p in pods.values() if p["waiting"]]
    for pod in waiting["waiting"]:
        [condition] = pod["status"]["conditions"]
        assert condition["reason"] == "Unschedulable"
        assert (
            "3 pod(s) must start together, 1 fit now; the group waits whole"
            in (condition["message"])
        )


def test_kai_without_a_queue_label_schedules_nothing(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    store = members.virtual.server("small").store
    body = yaml.safe_load_all(GANGS.read_text())
    [first, _] = list(body)
    for job in first["spec"]["replicatedJobs"]:
        job["template"]["spec"]["template"]["spec"]["schedulerName"] = "kai-scheduler"
    store.create(first)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pods = store.list("pods", "default")
        if len(pods) == 3 and all(p["status"].get("conditions") for p in pods):
            break
        time.sleep(0.1)
    assert len(pods) == 3
    for pod in pods:
        assert not pod["spec"].get("nodeName")
        assert "no kai.scheduler/queue label" in pod["status"]["conditions"][0]["message"]


def kubectl_delete(members: Members, *names: str) -> None:
    """``kubectl delete jobset NAMES`` on small, through the fleet's kubeconfig."""
    kubectl = shutil.which("kubectl") or "/usr/bin/kubectl"
    if not Path(kubectl).exists():
        pytest.skip("kubectl not installed")
    result = subprocess.run(
        [
            *(kubectl, "--kubeconfig", str(members.kubeconfig), "--context", "small"),
            *("delete", "jobset", *names, "-n", "default", "--wait=false"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def bound_by_owner(members: Members) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for pod in members.virtual.server("small").store.list("pods", "default"):
        owner = pod["metadata"]["ownerReferences"][0]["name"]
        bound, waiting = out.get(owner, (0, 0))
        if pod["spec"].get("nodeName"):
            out[owner] = (bound + 1, waiting)
        else:
            out[owner] = (bound, waiting + 1)
    return out


@pytest.mark.kubectl
def test_a_gang_waiting_whole_starts_when_the_other_goes(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    members.submit(capsys, {"name": "volcano"})
    pods = members.pods()
    [running] = [name for name, p in pods.items() if not p["waiting"]]
    [waiting] = [name for name, p in pods.items() if p["waiting"]]
    since = {
        p["metadata"]["name"]: p["status"]["conditions"][0]["lastTransitionTime"]
        for p in pods[waiting]["waiting"]
    }
    time.sleep(1.1)  # timestamps have whole seconds: a rewritten one would differ
    # a pod of another workload going frees too little: the gang keeps waiting whole, and its
    # pods keep the time they began waiting
    store = members.virtual.server("small").store
    store.seed(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "bystander", "namespace": "default"},
                "spec": {"nodeName": "small-2", "containers": [{"name": "c", "image": "x"}]},
                "status": {"phase": "Running"},
            }
        ]
    )
    store.delete("pods", "bystander", "default")
    time.sleep(3.0)  # past the next pass (window 2 s)
    assert bound_by_owner(members)[waiting] == (0, 3)
    for pod in store.list("pods", "default"):
        if pod["metadata"]["name"] in since:
            condition = pod["status"]["conditions"][0]
            assert condition["lastTransitionTime"] == since[pod["metadata"]["name"]]
    kubectl_delete(members, running)
    wait_until(
        lambda: bound_by_owner(members) == {waiting: (3, 0)},
        timeout=30,
        interval=0.1,
        what=f"{waiting} started whole once {running} went",
    )


@pytest.mark.kubectl
def test_default_scheduler_binds_the_third_pod_once_a_deadlocked_gang_goes(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    members.submit(capsys, None)
    assert {k: (len(v["bound"]), len(v["waiting"])) for k, v in members.pods().items()} == {
        "gang-a": (2, 1),
        "gang-b": (2, 1),
    }
    kubectl_delete(members, "gang-a")
    wait_until(
        lambda: bound_by_owner(members) == {"gang-b": (3, 0)},
        timeout=30,
        interval=0.1,
        what="gang-b's third pod bound once gang-a went",
    )
