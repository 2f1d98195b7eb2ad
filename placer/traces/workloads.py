"""Timed workloads: what trace readers and generators hand to the simulator.

A simulation replays workloads in time: each one arrives at ``arrival_s`` and, if it was placed,
leaves ``duration_s`` seconds after it started (``None``: it never leaves, as in FGD's replay).
The workload itself is an ordinary :class:`placer.model.Workload`, exactly what the definition
interpreter produces from a manifest, so the solver cannot tell a trace task from a real object.

Sequences of :class:`TimedWorkload` are always in arrival order (ties keep the generator's
order), which is also the order ``online`` mode decides in; ``batch`` mode ignores the times.

GPU demand is counted in thousandths of a GPU (``gpu_milli``) so that whole GPUs
(``nvidia.com/gpu``) and shared ones (``placer.dev/gpu-milli``) add up on one axis — the axis of
FGD's "arrived GPU request" and of every GPU-allocation figure in the benchmark.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from placer.model import GPU_SHARE, Fleet, Node, Workload
from placer.quantity import GPU

__all__ = [
    "TimedWorkload",
    "fleet_gpu_milli",
    "fleet_nodes",
    "gpu_milli",
    "largest_cluster_gpu_milli",
    "total_gpu_milli",
]


@dataclass(frozen=True)
class TimedWorkload:
    """A workload with its arrival time and run time in seconds."""

    workload: Workload
    #: seconds from the start of the replay.
    arrival_s: float
    #: run time once placed; ``None`` = never departs.
    duration_s: float | None = None

    @property
    def name(self) -> str:
        """The workload reference as text (``kind/namespace/name``)."""
        return str(self.workload.ref)


def gpu_milli(workload: Workload) -> int:
    """GPU demand of a workload in thousandths: whole GPUs × 1000 plus shared-GPU thousandths."""
    total = 0
    for component in workload.components:
        requests = component.pod.requests
        per_pod = requests.get(GPU, 0) * 1000 + requests.get(GPU_SHARE, 0)
        total += per_pod * component.replicas
    return total


def total_gpu_milli(items: Iterable[TimedWorkload]) -> int:
    """Summed GPU demand of timed workloads, in thousandths."""
    return sum(gpu_milli(item.workload) for item in items)


def fleet_nodes(fleet: Fleet) -> tuple[Node, ...]:
    """Every node of every cluster (reachable or not), in fleet order."""
    return tuple(node for cluster in fleet.clusters for node in cluster.nodes)


def fleet_gpu_milli(fleet: Fleet) -> int:
    """GPU capacity of the fleet in thousandths: allocatable GPUs of all nodes × 1000.

    This is FGD's "cluster GPU capacity", the denominator of its load and allocation ratios.
    """
    return sum(node.allocatable.get(GPU, 0) for node in fleet_nodes(fleet)) * 1000


def largest_cluster_gpu_milli(fleet: Fleet) -> int:
    """GPU capacity of the fleet's largest cluster, in thousandths."""
    sizes = (sum(n.allocatable.get(GPU, 0) for n in c.nodes) for c in fleet.clusters)
    return max(sizes, default=0) * 1000
