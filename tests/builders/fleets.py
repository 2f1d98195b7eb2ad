"""placer's model for tests: nodes, clusters, fleets, pod demands and workloads, in the units of
:mod:`placer.quantity` (millicores, bytes) from the numbers people write (cores, GiB).

* :func:`node` — a Ready node with ``gpus`` GPUs of which ``used`` are taken;
* :func:`cluster`, :func:`fleet` — nodes into clusters into a fleet;
* :func:`pod` — one pod's demand; :func:`workload` — a JobSet of ``(name, replicas, pod)``
  components.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from placer.model import (
    Cluster,
    ComponentDemand,
    Fleet,
    Node,
    PodDemand,
    Taint,
    Toleration,
    Workload,
    WorkloadRef,
)
from placer.quantity import CPU, GPU, MEMORY, PODS

__all__ = ["GIB", "cluster", "fleet", "node", "pod", "workload"]

GIB = 2**30


def node(
    name: str,
    gpus: int = 8,
    used: int = 0,
    *,
    cpu: int = 64,
    memory: int = 512,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    devices: Sequence[int] | None = None,
    extra: Mapping[str, int] | None = None,
    ready: bool = True,
) -> Node:
    """A node with ``gpus`` GPUs of which ``used`` are taken (cpu cores, memory GiB)."""
    allocatable = {CPU: cpu * 1000, MEMORY: memory * GIB, PODS: 110, **(extra or {})}
    if gpus:
        allocatable[GPU] = gpus
    return Node(
        name=name,
        allocatable=allocatable,
        requested={GPU: used} if used else {},
        labels=dict(labels or {}),
        taints=tuple(taints),
        gpu_devices=tuple(devices) if devices is not None else None,
        ready=ready,
    )


def cluster(name: str, *nodes: Node, **kwargs: Any) -> Cluster:
    return Cluster(name=name, nodes=tuple(nodes), **kwargs)


def fleet(*clusters: Cluster, **kwargs: Any) -> Fleet:
    return Fleet(clusters=tuple(clusters), **kwargs)


def pod(
    gpus: int = 0,
    cpu: int = 1,
    *,
    share: int = 0,
    selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Toleration] = (),
    extra: Mapping[str, int] | None = None,
) -> PodDemand:
    """One pod's demand: ``gpus`` whole GPUs, ``cpu`` cores, 1 GiB, a ``share`` of a GPU (in
    thousandths), a node selector and tolerations."""
    requests = {CPU: cpu * 1000, MEMORY: GIB, **(extra or {})}
    if gpus:
        requests[GPU] = gpus
    if share:
        requests["placer.dev/gpu-milli"] = share
    return PodDemand(
        requests=requests, node_selector=dict(selector or {}), tolerations=tuple(tolerations)
    )


def workload(
    name: str,
    *components: tuple[str, int, PodDemand],
    namespace: str = "default",
    **kwargs: Any,
) -> Workload:
    """A JobSet of ``components`` given as (name, replicas, pod)."""
    return Workload(
        ref=WorkloadRef("jobset.x-k8s.io/v1alpha2", "JobSet", namespace, name),
        components=tuple(ComponentDemand(n, "", r, p) for n, r, p in components),
        **kwargs,
    )
