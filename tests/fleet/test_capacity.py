"""API objects to capacity (pure): every resource, bound vs pending, terminal and terminating."""

from __future__ import annotations

from typing import Any

from placer.fleet import PodTally, cluster_from_api, complete_labels, node_from_api
from placer.fleet.capacity import GPU_DEVICES_ANNOTATION, gpu_models
from placer.model import Node, Taint
from placer.quantity import GPU
from tests.builders import objects

MIG = "nvidia.com/mig-1g.10gb"


def node(
    name: str,
    *,
    ready: str = "True",
    spec: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An H100 node of region eu-1 with MIG slices and huge pages."""
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "topology.kubernetes.io/region": "eu-1",
        "topology.kubernetes.io/zone": f"eu-1{name[-1]}",
    }
    extra = {MIG: "7", "hugepages-1Gi": "4Gi"}
    return objects.node(
        name, labels=labels, extra=extra, ready=ready, spec=spec, annotations=annotations
    )


def pod(
    node_name: str | None,
    phase: str = "Running",
    *,
    cpu: str = "1",
    gpu: int = 0,
    deleting: bool = False,
    **resources: str,
) -> dict[str, Any]:
    return objects.pod(
        node=node_name, phase=phase, cpu=cpu, gpus=gpu, deleting=deleting, extra=resources
    )


def test_free_is_allocatable_minus_bound_non_terminal_requests_for_every_resource() -> None:
    tally = PodTally()
    tally.add_all(
        [
            pod("n1", gpu=4, cpu="8"),
            pod("n1", "Pending", gpu=1, cpu="500m"),  # bound, not yet running: counts
            pod("n1", "Succeeded", gpu=2),  # terminal: holds nothing
            pod("n1", "Failed", gpu=2),
            pod("n1", deleting=True, gpu=1),  # terminating: still holds its GPU
            pod("n1", **{MIG: "2", "hugepages-1Gi": "2Gi"}),
            pod("gone-node", gpu=8),  # bound to a node that no longer exists
            pod(None, "Pending", gpu=8),  # waiting for a node: pending, not usage
            pod(None, "Pending", gpu=8, deleting=True),  # never ran and going away
        ]
    )
    cluster = cluster_from_api("east", [node("n1"), node("n2")], tally)
    n1, n2 = cluster.nodes
    assert n1.requested == {
        "cpu": 8000 + 500 + 1000 + 1000,
        "memory": 4 * 2**30,
        GPU: 6,
        MIG: 2,
        "hugepages-1Gi": 2 * 2**30,
        "pods": 4,
    }
    assert n1.free[GPU] == 2 and n1.free[MIG] == 5 and n1.free["pods"] == 106
    assert n1.free["hugepages-1Gi"] == 2 * 2**30
    assert n2.requested == {} and n2.free[GPU] == 8
    assert tally.terminating == 1
    assert cluster.pending.count == 1 and cluster.pending.requests[GPU] == 8


def test_node_state_taints_and_devices() -> None:
    cordoned = node(
        "n3",
        spec={
            "unschedulable": True,
            "taints": [
                {"key": "gpu", "value": "h100", "effect": "NoSchedule"},
                {"key": "weird", "effect": "Sometimes"},  # not a real effect: ignored
            ],
        },
        annotations={GPU_DEVICES_ANNOTATION: "1000,500,0"},
    )
    built = node_from_api(cordoned)
    assert built.unschedulable and built.ready and not built.usable
    assert built.taints == (Taint("gpu", "h100", "NoSchedule"),)
    assert built.gpu_devices == (1000, 500, 0)
    assert not node_from_api(node("n4", ready="Unknown")).ready
    assert not node_from_api({"metadata": {"name": "bare"}, "status": {}}).ready


def test_pod_requests_follow_the_scheduler_rules_for_init_containers() -> None:
    with_init = pod("n1", cpu="1")
    with_init["spec"]["initContainers"] = [
        {"name": "init", "resources": {"requests": {"cpu": "4"}}},
    ]
    tally = PodTally()
    tally.add(with_init)
    assert tally.requested["n1"]["cpu"] == 4000  # max(init, running)


def test_cluster_labels_are_completed_from_nodes_and_given_labels_win() -> None:
    nodes = [node_from_api(node(n)) for n in ("n1", "n2", "n3")]
    assert complete_labels({}, nodes) == {
        "gpu-products": "NVIDIA-H100-80GB-HBM3",
        "region": "eu-1",
        "zones": "eu-11,eu-12,eu-13",
    }
    assert complete_labels({"region": "mine", "cost": "2"}, nodes)["region"] == "mine"
    assert gpu_models(nodes) == {"NVIDIA-H100-80GB-HBM3": 24}
    plain = Node("cpu-only", {"cpu": 8000})
    assert complete_labels({}, [plain]) == {}


def test_an_annotated_node_takes_its_pods_gpus_off_the_annotation() -> None:
    """``placer.dev/gpu-devices`` is the devices before the node's pods: whole GPUs bound there
    (after the annotation was written, and never written back into it) take whole devices,
    fractions pack onto the devices, finished pods give theirs back."""
    annotated = node("n1", annotations={GPU_DEVICES_ANNOTATION: "1000,1000,1000,1000,500,0"})
    tally = PodTally()
    fraction = {"gpu-fraction": "0.5"}
    tally.add_all(
        [
            objects.pod("a", node="n1", gpus=2),
            objects.pod("b", node="n1", gpus=1, phase="Succeeded"),  # finished: holds none
            objects.pod("c", node="n1", annotations=fraction),  # onto the device at 500
            objects.pod("d", node="n1", annotations={"gpu-fraction": "0.25"}),
        ]
    )
    built = cluster_from_api("east", [annotated], tally).nodes[0]
    assert built.requested[GPU] == 2
    # 2 whole GPUs on the first free devices, 0.5 fills the 500 device, 0.25 the fullest left
    assert built.gpu_devices == (0, 0, 750, 1000, 0, 0)
    assert built.free[GPU] == 1

    # more whole GPUs than free devices: none counted free (never more than the annotation)
    tally.add(objects.pod("e", node="n1", gpus=3))
    crowded = cluster_from_api("east", [annotated], tally).nodes[0]
    assert crowded.free[GPU] == 0 and crowded.gpu_devices == (0, 0, 0, 0, 0, 0)


def test_an_annotated_node_without_pods_reads_as_its_annotation() -> None:
    annotated = node("n1", annotations={GPU_DEVICES_ANNOTATION: "1000,250,0"})
    built = cluster_from_api("east", [annotated], PodTally()).nodes[0]
    assert built.gpu_devices == (1000, 250, 0) and built.free[GPU] == 1
