"""The controller never overcommits a node that models its GPUs per device.

Members are a virtual fleet (real loopback HTTPS servers, realism binding the copies' pods)
whose nodes carry ``placer.dev/gpu-devices``, as every node of the openb snapshots. The
annotation is written once, at seeding; the pods bound later are the only record of the GPUs
they hold. Gangs arrive in waves, each after the previous wave's pods are bound and their
in-flight entries retired — so each later decision reads the capacity from the watch cache,
where only the bound pods tell that the devices are taken. Checked: at every pod write on a
member, no node has more whole GPUs bound than devices; at the end, every placement the members
hold (their records' pod-to-node plans) passes the independent verifier against the fleet as it
was, the gangs that did not fit are ``Unschedulable``, and no placed pod waits for a node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from placer.controller import Controller
from placer.fleet import fleet_from_kubeconfigs, gather_fleet
from placer.fleet.capacity import GPU_DEVICES_ANNOTATION
from placer.kube import ClientSettings, load_kubeconfigs, open_client
from placer.model import Fleet
from placer.podspec import pod_requests
from placer.quantity import GPU
from placer.solver import verify
from placer.testing import ApiServer, WriteEvent
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.builders import fleets
from tests.controller.conftest import (
    NAMESPACE,
    condition,
    job,
    placed_cluster,
    settings,
    wait_for,
)
from tests.controller.test_placement import _decision_from_copies

MEMBERS = ("m1", "m2")
NODES = 3
GPUS = 4


def snapshot() -> Fleet:
    """Two members of ``NODES`` nodes with ``GPUS`` devices each, all free."""
    return fleets.fleet(
        *(
            fleets.cluster(
                member,
                *(
                    fleets.node(
                        f"{member}-n{i}",
                        gpus=GPUS,
                        devices=(1000,) * GPUS,
                        labels={"kubernetes.io/hostname": f"{member}-n{i}"},
                    )
                    for i in range(NODES)
                ),
            )
            for member in MEMBERS
        )
    )


def overcommitted(server: ApiServer) -> list[str]:
    """The member's nodes with more whole GPUs bound (non-terminal pods) than devices free in
    their annotation, as ``"node: N GPUs bound, M devices"``."""
    store = server.store
    whole: dict[str, int] = {}
    found: list[str] = []
    for pod in store.list("pods"):
        node = pod["spec"].get("nodeName")
        if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            gpus = pod_requests(pod["spec"], strict=False).get(GPU, 0)
            whole[node] = whole.get(node, 0) + gpus
    for node in store.list("nodes"):
        name = node["metadata"]["name"]
        devices = node["metadata"]["annotations"][GPU_DEVICES_ANNOTATION].split(",")
        if whole.get(name, 0) > sum(1 for d in devices if int(d) >= 1000):
            found.append(f"{name}: {whole[name]} GPUs bound, {len(devices)} devices")
    return found


class Scenario:
    def __init__(self, tmp: Path) -> None:
        self.violations: list[str] = []
        self.virtual = VirtualFleet(snapshot(), setup=self.setup, hub="hub").start()
        self.kubeconfig = self.virtual.write_kubeconfig(tmp / "kubeconfig")
        self.hub = self.virtual.server("hub")
        self.hub.store.seed(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
        )
        self.client = open_client(
            load_kubeconfigs([self.kubeconfig]),
            "hub",
            name="hub",
            settings=ClientSettings(pool_size=48),
        )
        self.members = fleet_from_kubeconfigs([self.kubeconfig], timeout=5.0)
        self.stop = threading.Event()
        self.controller: Controller | None = None
        self.thread: threading.Thread | None = None

    def setup(self, cluster: Any, server: ApiServer) -> None:
        realism_setup()(cluster, server)
        server.store.add_reactor(lambda event: self.check(server, event))

    def check(self, server: ApiServer, event: WriteEvent) -> None:
        """After every write of a copy or a pod (realism, a reactor before this one, has bound
        the copy's pods by then): no node has more whole GPUs bound than devices."""
        if event.resource.kind in ("Job", "Pod"):
            self.violations += overcommitted(server)

    def start(self) -> None:
        self.controller = Controller(self.client, self.members, settings(capacity="watch"))
        self.thread = threading.Thread(
            target=lambda: self.controller.run(self.stop) if self.controller else None,
            daemon=True,
        )
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=60)
        self.client.close()
        self.virtual.stop()

    # ----------------------------------------------------------------------------------------

    def copies(self, name: str, namespace: str = NAMESPACE, kind: str = "jobs") -> dict[str, Any]:
        """The copies of hub Job ``name`` on the members, by member name."""
        return {
            member: obj
            for member in MEMBERS
            for obj in self.virtual.server(member).store.list(kind, namespace)
            if obj["metadata"]["name"] == name
        }

    def hub_job(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.hub.store.get("jobs", name, NAMESPACE)
        return found

    def decided(self, names: list[str]) -> bool:
        """Every job placed (its copy's pods all bound) or found unschedulable."""
        for name in names:
            placed = condition(self.hub_job(name)) or {}
            if placed.get("status") == "False" and placed.get("reason") == "Unschedulable":
                continue
            member = placed_cluster(self.hub_job(name))
            if placed.get("status") != "True" or not member:
                return False
            pods = [
                p
                for p in self.virtual.server(member).store.list("pods", NAMESPACE)
                if p["metadata"].get("ownerReferences", [{}])[0].get("name") == name
            ]
            if not pods or not all(p["spec"].get("nodeName") for p in pods):
                return False
        return True

    def entries_retired(self) -> bool:
        assert self.controller is not None
        return all(not e.placement.pods for e in self.controller.ledger.entries())

    def waves(self, count: int, jobs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
        """``jobs`` created on the hub in ``count`` waves, each once the previous one is
        decided, its pods bound and its in-flight entries retired (so that the next wave reads
        those GPUs from the bound pods only); the names placed and those not."""
        names: list[str] = []
        size = len(jobs) // count
        for wave in range(count):
            batch = jobs[wave * size : (wave + 1) * size]
            for body in batch:
                self.hub.store.create(body)
            batch_names = [b["metadata"]["name"] for b in batch]
            names += batch_names
            wait_for(lambda b=batch_names: self.decided(b), timeout=60, what=f"wave {wave}")  # type: ignore[misc]
            wait_for(self.entries_retired, timeout=30, what="in-flight entries retired")
            time.sleep(0.5)
        placed = [n for n in names if (condition(self.hub_job(n)) or {}).get("status") == "True"]
        return placed, [n for n in names if n not in placed]


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    made = Scenario(tmp_path)
    yield made
    made.close()


def test_waves_of_gangs_onto_annotated_nodes_never_overcommit_a_node(scenario: Scenario) -> None:
    fleet_before = gather_fleet(scenario.members)
    capacity = len(MEMBERS) * NODES * GPUS  # 24 GPUs
    assert sum(c.free().get(GPU, 0) for c in fleet_before.clusters) == capacity
    scenario.start()
    # 3 waves of 6 gangs of 2 GPUs (2 pods of 1, or 1 of 2): 36 GPUs asked, 24 there
    jobs = [
        job(f"w{i // 6}-{i % 6}", gpus=2 // (2 if i % 2 else 1), pods=2 if i % 2 else 1)
        for i in range(18)
    ]
    placed, unschedulable = scenario.waves(3, jobs)
    assert scenario.violations == []
    for member in MEMBERS:
        assert overcommitted(scenario.virtual.server(member)) == []
    assert len(placed) == capacity // 2 and len(unschedulable) == len(jobs) - capacity // 2
    for name in unschedulable:
        assert scenario.copies(name) == {}
    decision, workloads = _decision_from_copies(scenario, placed)
    # the records plan nodes, not devices: the verifier counts the (whole) GPUs per node
    counted = replace(
        fleet_before,
        clusters=tuple(
            replace(c, nodes=tuple(replace(n, gpu_devices=None) for n in c.nodes))
            for c in fleet_before.clusters
        ),
    )
    assert verify(decision, workloads, counted) == []
    # the fleet is full, node by node, with the annotations as seeded
    after = gather_fleet(scenario.members)
    assert sum(c.free().get(GPU, 0) for c in after.clusters) == 0
    for cluster in after.clusters:
        for node in cluster.nodes:
            assert node.gpu_devices == (0,) * GPUS, node.name
            seeded = scenario.virtual.server(cluster.name).store.get("nodes", node.name)
            assert (
                seeded["metadata"]["annotations"][GPU_DEVICES_ANNOTATION] == "1000,1000,1000,1000"
            )


def half_gpu_job(name: str) -> dict[str, Any]:
    """A Job of 2 pods asking for half a GPU each (Run:ai / KAI ``gpu-fraction``)."""
    body = job(name, gpus=0, pods=2)
    template = body["spec"]["template"]
    del template["spec"]["containers"][0]["resources"]["limits"]
    template["metadata"] = {"annotations": {"gpu-fraction": "0.5"}}
    return body


def test_waves_of_fractional_gangs_share_devices_and_never_overcommit_one(
    scenario: Scenario,
) -> None:
    scenario.start()
    # 3 waves of 10 gangs of 2 half-GPU pods: 30 GPUs asked, 24 devices there
    placed, unschedulable = scenario.waves(3, [half_gpu_job(f"h{i}") for i in range(30)])
    assert len(placed) == 24 and len(unschedulable) == 6
    for name in unschedulable:
        assert scenario.copies(name) == {}
    # every placed pod bound (decided), no device past its room, every device used up
    after = gather_fleet(scenario.members)
    for cluster in after.clusters:
        store = scenario.virtual.server(cluster.name).store
        for node in cluster.nodes:
            halves = [
                p for p in store.list("pods", NAMESPACE) if p["spec"].get("nodeName") == node.name
            ]
            assert node.gpu_devices == (0,) * GPUS, node.name
            assert len(halves) == 2 * GPUS, node.name
