"""The placement controller grows an elastic workload when room appears on its member — only
when its definition says the framework resizes a running workload (PyTorchJob: yes; RayJob:
no, it stays as placed). Loopback hub and members over HTTPS (tests/controller/conftest.py);
the members' nodes are filled by bound pods the test seeds and deletes."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.builders import objects
from tests.controller.conftest import HubFleet, hubfleet

__all__ = ["hubfleet"]  # the fixture, imported for this module's tests

NAMESPACE = "team-a"
#: bound filler pods take every GPU of all but FREE nodes of each member (8 GPUs a node).
FREE = 2


def container(gpus: int) -> dict[str, Any]:
    return {
        "name": "main",
        "image": "trainer",
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"nvidia.com/gpu": str(gpus)},
        },
    }


def pytorchjob(name: str) -> dict[str, Any]:
    """Master and 2..10 workers of 4 GPUs: with 2 free nodes, master + 3 workers fit."""
    spec = {"template": {"spec": {"containers": [container(4)]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"placer.dev/queue": "default"},
        },
        "spec": {
            "runPolicy": {"suspend": True},
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 10},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, **spec},
                "Worker": {"replicas": 2, **spec},
            },
        },
    }


def rayjob(name: str) -> dict[str, Any]:
    """A head (no GPU) and one group of 1..10 workers of 4 GPUs."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"placer.dev/queue": "default"},
        },
        "spec": {
            "suspend": True,
            "entrypoint": "python train.py",
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [container(0)]}}},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 10,
                        "template": {"spec": {"containers": [container(4)]}},
                    }
                ],
            },
        },
    }


def setup(hubfleet: HubFleet) -> None:
    for server in (hubfleet.hub, *hubfleet.members.values()):
        server.store.register_resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
        server.store.register_resource("ray.io", "v1", "RayJob", "rayjobs")
    for member, server in hubfleet.members.items():
        server.store.seed(
            objects.pod(f"filler-{i}", node=f"{member}-n{i}", gpus=8, namespace="busy")
            for i in range(hubfleet.NODES - FREE)
        )


def placed_copy(hubfleet: HubFleet, name: str, kind: str) -> tuple[str, dict[str, Any]]:
    def found() -> tuple[str, dict[str, Any]] | None:
        copies = hubfleet.copies(name, kind=kind)
        return next(iter(copies.items())) if len(copies) == 1 else None

    result: tuple[str, dict[str, Any]] = hubfleet.wait_for(found, what=f"{name} placed")
    return result


def free_nodes(hubfleet: HubFleet, member: str, count: int) -> None:
    """Delete the filler pods of ``count`` more nodes of ``member``."""
    store = hubfleet.members[member].store
    for i in range(hubfleet.NODES - FREE - count, hubfleet.NODES - FREE):
        store.delete("pods", f"filler-{i}", "busy")


def resized_events(hubfleet: HubFleet, name: str) -> list[dict[str, Any]]:
    return [e for e in hubfleet.events(name) if e["reason"] == "Resized"]


def recorded(hubfleet: HubFleet, name: str = "elastic") -> Any:
    """The hub object's ``placer.dev/replicas`` (the counts its copy runs), read."""
    obj = hubfleet.hub.store.get("pytorchjobs", name, NAMESPACE)
    text = hubfleet.annotations(obj).get("placer.dev/replicas")
    return json.loads(text) if text else None


def test_resizable_workload_grows_when_room_appears(hubfleet: HubFleet) -> None:
    setup(hubfleet)
    hubfleet.controller()
    hubfleet.hub.store.create(pytorchjob("elastic"))
    member, copy = placed_copy(hubfleet, "elastic", "pytorchjobs")
    workers = copy["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert workers["replicas"] == 3  # 16 free GPUs: master and 3 workers of 4
    hubfleet.wait_for(lambda: recorded(hubfleet) == {"worker": 3}, what="the counts recorded")
    time.sleep(1.5)  # a few gathers: no room, no change
    assert hubfleet.copies("elastic", kind="pytorchjobs")[member] == copy
    assert resized_events(hubfleet, "elastic") == []
    free_nodes(hubfleet, member, 2)  # 16 GPUs more: 4 more workers

    def grown() -> int | None:
        now = hubfleet.copies("elastic", kind="pytorchjobs")[member]
        replicas = int(now["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])
        return replicas if replicas != 3 else None

    assert hubfleet.wait_for(grown, what="the copy resized") == 7
    [event] = hubfleet.wait_for(lambda: resized_events(hubfleet, "elastic"), what="the Event")
    assert event["type"] == "Normal"
    assert f"cluster {member}: worker 3 -> 7 of max 10 replicas" in event["message"]
    # the hub object keeps its own spec; the copy stays at 7 (no more room), once
    hub = hubfleet.hub.store.get("pytorchjobs", "elastic", NAMESPACE)
    assert hub["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    # ... and records the count its copy runs now (what its queue counts, from the hub alone)
    hubfleet.wait_for(lambda: recorded(hubfleet) == {"worker": 7}, what="the new counts")
    time.sleep(1.5)
    now = hubfleet.copies("elastic", kind="pytorchjobs")[member]
    assert now["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 7
    assert len(resized_events(hubfleet, "elastic")) == 1


def test_workload_of_a_framework_that_cannot_resize_stays_as_placed(hubfleet: HubFleet) -> None:
    setup(hubfleet)
    hubfleet.controller()
    hubfleet.hub.store.create(rayjob("fixed"))
    member, copy = placed_copy(hubfleet, "fixed", "rayjobs")
    [group] = copy["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["replicas"] == 4  # placed at the largest count that fitted: 16 GPUs
    free_nodes(hubfleet, member, 2)
    time.sleep(2.5)  # several gathers with room for 4 more workers
    now = hubfleet.copies("fixed", kind="rayjobs")[member]
    assert now["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 4
    assert resized_events(hubfleet, "fixed") == []


def test_growth_never_takes_the_drain_horizon_members_nodes(hubfleet: HubFleet) -> None:
    """With a drain horizon on m1 (the only member), a resizable workload expected to end
    within the horizon is placed there, but room appearing on m1 does not grow it: growth would
    outlast what the horizon admitted (docs/reservations.md)."""
    from placer.fleet import fleet_from_kubeconfigs
    from placer.solver.reservations import ReservationPolicy

    setup(hubfleet)
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], ["m1"], timeout=5.0)
    policy = ReservationPolicy(after_s=360_000, horizon_s=3600, horizon_cluster="m1")
    hubfleet.controller(fleet, reservations=policy)
    job = pytorchjob("kept")
    job["metadata"]["annotations"] = {"placer.dev/expected-runtime": "30m"}
    hubfleet.hub.store.create(job)
    member, copy = placed_copy(hubfleet, "kept", "pytorchjobs")
    assert member == "m1" and copy["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    free_nodes(hubfleet, member, 2)  # room for 4 more workers, on the horizon's member
    time.sleep(2.5)  # several gathers
    now = hubfleet.copies("kept", kind="pytorchjobs")[member]
    assert now["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert resized_events(hubfleet, "kept") == []


def test_an_edit_keeps_the_count_a_grown_workload_runs(hubfleet: HubFleet) -> None:
    """A PyTorchJob grown from 3 to 7 workers, then edited on the hub (a new image): the edit
    is applied to its copy, which keeps running 7 workers — not the hub's declared minimum."""
    setup(hubfleet)
    hubfleet.controller()
    hubfleet.hub.store.create(pytorchjob("elastic"))
    member, _copy = placed_copy(hubfleet, "elastic", "pytorchjobs")
    free_nodes(hubfleet, member, 2)

    def workers() -> int:
        now = hubfleet.copies("elastic", kind="pytorchjobs")[member]
        return int(now["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])

    hubfleet.wait_for(lambda: workers() == 7, what="the copy grown to 7 workers")
    hubfleet.hub.store.patch(
        "pytorchjobs",
        "elastic",
        {
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "template": {
                            "spec": {"containers": [{**container(4), "image": "trainer:v2"}]}
                        }
                    }
                }
            }
        },
        namespace=NAMESPACE,
    )

    def edited() -> bool:
        now = hubfleet.copies("elastic", kind="pytorchjobs")[member]
        master = now["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
        return bool(master["containers"][0]["image"] == "trainer:v2")

    hubfleet.wait_for(edited, what="the edit applied to the copy")
    assert workers() == 7
    time.sleep(1.0)
    assert workers() == 7
