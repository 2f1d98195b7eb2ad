"""Per-device GPUs in a virtual fleet, over real HTTPS: nodes annotated ``placer.dev/gpu-devices``
(as every node of the openb snapshots) count the whole-GPU pods bound after seeding — the
annotation is the devices before the node's pods and is never rewritten — the virtual scheduler
binds no GPU past the devices, and fractional pods share devices."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from placer.fleet import fleet_from_kubeconfigs, gather_fleet
from placer.fleet.capacity import GPU_DEVICES_ANNOTATION
from placer.kube import KubeClient, load_kubeconfigs, open_client
from placer.model import GPU_SHARE, Fleet, Node
from placer.quantity import GPU
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.builders import fleets, objects
from tests.builders.waiting import wait_until


def snapshot() -> Fleet:
    """One cluster: ``busy`` (4 devices; a snapshot's usage holds one whole GPU and 0.75 of a
    device) and ``idle`` (4 devices, all free)."""
    busy = fleets.node("busy", gpus=4, devices=(0, 250, 1000, 1000))
    busy = Node(
        busy.name,
        busy.allocatable,
        requested={GPU: 1, GPU_SHARE: 750, "cpu": 2000, "pods": 2},
        labels={"kubernetes.io/hostname": "busy"},
        gpu_devices=busy.gpu_devices,
    )
    idle = fleets.node(
        "idle", gpus=4, devices=(1000,) * 4, labels={"kubernetes.io/hostname": "idle"}
    )
    return fleets.fleet(fleets.cluster("gpu", busy, idle))


def gang(name: str, replicas: int, *, gpus: int = 0, fraction: str = "") -> dict[str, Any]:
    """A JobSet of ``replicas`` pods, each ``gpus`` whole GPUs or a ``fraction`` of one."""
    body = objects.jobset(name, replicas=replicas, gpus=gpus or None, cpu="1")
    if fraction:
        template = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        template["metadata"] = {"annotations": {"gpu-fraction": fraction}}
    return body


class Served:
    def __init__(self, tmp: Path) -> None:
        self.virtual = VirtualFleet(snapshot(), setup=realism_setup()).start()
        self.kubeconfig = self.virtual.write_kubeconfig(tmp / "kubeconfig")
        self.client: KubeClient = open_client(
            load_kubeconfigs([self.kubeconfig]), "gpu", name="gpu"
        )

    def nodes(self) -> dict[str, Node]:
        fleet = gather_fleet(fleet_from_kubeconfigs([self.kubeconfig]))
        return {n.name: n for n in fleet.cluster("gpu").nodes}

    def pods(self, owner: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.client.list("v1", "Pod", namespace="default").items
            if [r["name"] for r in p["metadata"].get("ownerReferences") or ()] == [owner]
        ]

    def settled(self, owner: str, count: int) -> list[dict[str, Any]]:
        return wait_until(
            lambda: (found := self.pods(owner)) and len(found) == count and found,
            timeout=60,
            what=f"{count} pods of {owner}",
        )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    made = Served(tmp_path)
    yield made
    made.client.close()
    made.virtual.stop()


def used_milli(node: Node) -> int:
    return sum(1000 - d for d in node.gpu_devices or ())


def test_whole_gpus_bound_after_seeding_are_counted_and_never_bound_twice(
    served: Served,
) -> None:
    before = served.nodes()
    # the snapshot's devices read back, usage pods counted once
    assert before["busy"].gpu_devices == (0, 250, 1000, 1000)
    assert before["busy"].requested[GPU] == 1 and before["busy"].free[GPU] == 2
    assert before["idle"].free[GPU] == 4
    annotations = {
        name: served.client.get("v1", "Node", name)["metadata"]["annotations"]
        for name in ("busy", "idle")
    }
    # the annotation is the devices before the usage pods: their whole GPU given back
    assert annotations["busy"] == {GPU_DEVICES_ANNOTATION: "1000,250,1000,1000"}

    served.client.create(gang("four", 2, gpus=2))  # 4 of the 6 free GPUs
    pods = served.settled("four", 2)
    assert all(p["spec"].get("nodeName") for p in pods)
    after = served.nodes()
    assert after["busy"].free[GPU] + after["idle"].free[GPU] == 2
    assert sum(n.requested.get(GPU, 0) for n in after.values()) == 1 + 4
    # nothing rewrote the annotations
    for name in ("busy", "idle"):
        assert served.client.get("v1", "Node", name)["metadata"]["annotations"] == annotations[name]

    # 3 more whole GPUs do not fit (2 are free): one pod binds, the other waits
    served.client.create(gang("three", 2, gpus=2))
    pods = served.settled("three", 2)
    bound = [p for p in pods if p["spec"].get("nodeName")]
    waiting = [p for p in pods if not p["spec"].get("nodeName")]
    assert len(bound) == 1 and len(waiting) == 1
    assert waiting[0]["status"]["conditions"][0]["reason"] == "Unschedulable"
    full = served.nodes()
    assert full["busy"].free[GPU] == full["idle"].free[GPU] == 0
    # no device holds more than it has: the bound whole GPUs fill devices exactly
    for node in full.values():
        assert all(0 <= d <= 1000 for d in node.gpu_devices or ())
        assert used_milli(node) == 1000 * node.requested.get(GPU, 0) + node.requested.get(
            GPU_SHARE, 0
        )

    # the gang deleted: its devices are free again
    served.client.delete(objects.JOBSET_API_VERSION, "JobSet", "four", namespace="default")
    wait_until(lambda: sum(n.free[GPU] for n in served.nodes().values()) == 4, timeout=60)


def test_fractional_pods_share_devices_and_wait_when_no_device_has_room(served: Served) -> None:
    served.client.create(gang("halves", 3, fraction="0.5"))
    pods = served.settled("halves", 3)
    assert all(p["spec"].get("nodeName") for p in pods)
    nodes = served.nodes()
    # 3 halves on devices: 1.5 devices' worth taken, on top of the snapshot's usage
    assert sum(used_milli(n) for n in nodes.values()) == 1750 + 1500
    for node in nodes.values():
        assert all(0 <= d <= 1000 for d in node.gpu_devices or ())
    # the whole GPUs left, then a 0.75 share: one device must have 750 left
    free_whole = sum(n.free[GPU] for n in nodes.values())
    served.client.create(gang("rest", free_whole, gpus=1))
    assert all(p["spec"].get("nodeName") for p in served.settled("rest", free_whole))
    left = max(d for n in served.nodes().values() for d in n.gpu_devices or ())
    served.client.create(gang("big-share", 1, fraction="0.75"))
    [share] = served.settled("big-share", 1)
    assert bool(share["spec"].get("nodeName")) == (left >= 750)
    assert left < 750  # (what the numbers above give: the share waits)
