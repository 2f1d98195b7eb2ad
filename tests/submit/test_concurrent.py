"""Issue 12, item 1: ``placer submit`` processes racing on the same members.

Real ``python -m placer submit`` processes against a loopback fleet served in this process
(three clusters of six 8-GPU nodes: 48 GPUs each, pods materialised, so capacity really goes
down), with every apply slowed to 150 ms and the second process started 0-0.6 s after the
first — the window in which the same manifests were placed twice and a 48-GPU cluster got 51
GPUs. ``placer get -A`` must then list each workload on exactly one cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli.submit import read_manifests
from placer.dispatch.ledger import InFlight, read_entries, write_entry
from placer.dispatch.record import PlacementRecord, dispatch_manifest
from placer.dispatch.submit import submit as submit_in_process
from placer.fleet import fleet_from_kubeconfigs, member_clients
from placer.model import Fleet, Placement, PodAssignment, WorkloadRef
from placer.snapshot import load_snapshot
from placer.testing import ApiServer
from placer.testing._faults import Target
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.builders import fleets, objects

#: concurrent `placer submit` processes: slow (make test-fast leaves them out).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "jobset-demo.yaml"
GPU = "nvidia.com/gpu"
JOBSETS = "jobsets.jobset.x-k8s.io"
CLUSTERS = ("alpha", "beta", "gamma")
#: GPUs per workload: 16 JobSets, 172 GPUs asked of 144 (some stay unplaced).
SIZES = [(1, 8), (2, 4), (1, 4), (2, 8), (1, 2), (2, 2), (1, 8), (2, 4)] * 2


def gpu_fleet() -> Fleet:
    return fleets.fleet(
        *(
            fleets.cluster(name, *(fleets.node(f"{name}-n{i}") for i in range(6)))
            for name in CLUSTERS
        )
    )


def jobset(name: str, replicas: int, gpus: int) -> dict[str, Any]:
    return objects.jobset(name, replicas=replicas, gpus=gpus, cpu="4")


def gpus_of(obj: dict[str, Any]) -> int:
    total = 0
    for job in obj["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]["spec"]
        total += job["replicas"] * int(pod["containers"][0]["resources"]["limits"][GPU])
    return total


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[VirtualFleet, Path]]:
    with VirtualFleet(gpu_fleet(), setup=realism_setup(pods=True)) as virtual:
        yield virtual, virtual.write_kubeconfig(tmp_path / "kubeconfig")


def placer(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "placer", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("stagger", [0.0, 0.3, 0.6])
def test_two_submit_processes_place_each_workload_once(
    fleet: tuple[VirtualFleet, Path], tmp_path: Path, stagger: float
) -> None:
    virtual, kubeconfig = fleet
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for i, (replicas, gpus) in enumerate(SIZES):
        (jobs / f"js-{i:02d}.yaml").write_text(
            yaml.safe_dump(jobset(f"js-{i:02d}", replicas, gpus))
        )
    for server in virtual.servers.values():
        server.faults.delay(0.15, verb="patch", resource=JOBSETS)
    command = ("submit", "-f", str(jobs), "--kubeconfig", str(kubeconfig), "-o", "json")
    processes = [placer(*command)]
    time.sleep(stagger)
    processes.append(placer(*command))
    finished = [process.communicate(timeout=120) for process in processes]
    reports = []
    for process, (out, err) in zip(processes, finished, strict=True):
        assert process.returncode == 0, err  # nothing the retried job did looks like a failure
        reports.append(json.loads(out))

    listed = placer("get", "-A", "--kubeconfig", str(kubeconfig), "-o", "json")
    out, err = listed.communicate(timeout=60)
    assert listed.returncode == 0, err
    where: dict[str, list[str]] = {}
    for item in json.loads(out)["items"]:
        where.setdefault(item["name"], []).append(item["cluster"])
    assert where and all(len(clusters) == 1 for clusters in where.values()), where

    # each placed workload was dispatched by exactly one of the two; the other says so
    for name, [cluster] in where.items():
        states = []
        for report in reports:
            [item] = [p for p in report["placements"] if p["workload"]["name"] == name]
            states.append(item["state"])
            assert item["cluster"] == cluster
        assert sorted(states) == ["dispatched", "unchanged"], (name, states)
    # no cluster holds more than its 48 GPUs, and no pod waits for room
    for name, server in virtual.servers.items():
        assert sum(gpus_of(o) for o in server.store.list(JOBSETS)) <= 48, name
        assert all(p["spec"].get("nodeName") for p in server.store.list("pods")), name


# --------------------------------------------------------------------------------------------
# the overcommit at its cause


def bind_when_the_ledger_is_read(server: ApiServer, bind: Any) -> None:
    """Run ``bind()`` when the first list of ConfigMaps (a ledger read) reaches ``server``:
    pods of an in-flight workload get bound exactly between two reads of a decider."""
    take = server.faults.take
    done: list[bool] = []

    def hooked(target: Target) -> Any:
        if target.verb == "list" and target.resource == "configmaps" and not done:
            done.append(True)
            bind()
        return take(target)

    server.faults.take = hooked  # type: ignore[method-assign]


def test_pods_bound_while_a_submission_reads_the_fleet_are_counted_once_not_never(
    tmp_path: Path,
) -> None:
    """Another decider's workload is in flight on ``central`` (its entry written, its pods
    created but not yet bound); its pods get bound while this submission reads the fleet.
    Read in the order gather-then-ledger, the bound pods were missing from the gathered
    capacity *and* their entry was retired as observed: the seed JobSet went to ``central``
    on top of them (24 GPUs on 12). Read ledger-then-capacity, they are counted once."""
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    with VirtualFleet(snapshot, setup=realism_setup(pods=False)) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kubeconfig")
        store = virtual.server("central").store
        ref = WorkloadRef("jobset.x-k8s.io/v1alpha2", "JobSet", "default", "other")
        nodes = ["central-l40s-0", "central-l40s-1", "central-l40s-2"]
        requests = {GPU: 4, "cpu": 8000}
        pods = tuple(PodAssignment("w", "", i, n, dict(requests)) for i, n in enumerate(nodes))
        placement = Placement(ref, "central", pods, {GPU: 12, "cpu": 24_000})
        record = PlacementRecord.for_placement(placement, "d-other")
        root = store.create(dispatch_manifest(jobset("other", 3, 4), ref, record))
        owner = {
            "apiVersion": ref.api_version,
            "kind": "JobSet",
            "name": "other",
            "uid": root["metadata"]["uid"],
            "controller": True,
        }
        container = {"name": "c", "image": "i", "resources": {"limits": {GPU: "4"}}}
        for i in range(3):
            store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"other-{i}",
                        "namespace": "default",
                        "ownerReferences": [owner],
                    },
                    "spec": {"containers": [container]},
                }
            )
        config = fleet_from_kubeconfigs([kubeconfig])
        with member_clients(config) as clients:
            write_entry(clients["central"], InFlight.new(placement, "d-other"))

            def bind() -> None:
                for i, node in enumerate(nodes):
                    store.patch(
                        "pods", f"other-{i}", {"spec": {"nodeName": node}}, namespace="default"
                    )

            bind_when_the_ledger_is_read(virtual.server("central"), bind)
            report = submit_in_process(read_manifests([str(SEED)], []), config, clients)
            # its 12 GPUs were counted (as bound pods), so central had none left for the seed
            assert report.fleet.cluster("central").free()[GPU] == 0
            [outcome] = report.outcomes
            assert not outcome.placed and outcome.state == "unplaced"
            assert [o["metadata"]["name"] for o in store.list(JOBSETS)] == ["other"]
            assert all(p["spec"].get("nodeName") for p in store.list("pods", "default"))
            assert [e.workload.name for e in read_entries(clients["central"])] == ["other"]
