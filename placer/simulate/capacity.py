"""Reading a fleet's capacity for simulation: GPU thousandths, free totals, node GPU state.

GPUs are measured on one axis, thousandths of a GPU (``milli``), so that whole GPUs
(``nvidia.com/gpu``) and shares of one device (``placer.dev/gpu-milli``) add up — the axis of
FGD's allocation ratio. A node with a device model (``gpu_devices``) has exactly the free
thousandths its devices list; a node without one has ``(allocatable - requested) × 1000``.

These are measurements, independent of the solver's internal state, so simulation metrics and
the solver cannot share a bookkeeping mistake.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from placer.model import GPU_SHARE, Fleet, Node, PodDemand, Workload
from placer.quantity import CPU, GPU, MEMORY, PODS, format_quantity, to_base

__all__ = [
    "FreeTotals",
    "NodeRoom",
    "free_totals",
    "gpu_milli",
    "node_free_devices",
    "node_gpu_free_milli",
    "shortfall",
    "used_gpu_milli",
    "whole_free_nodes",
]

#: nodes with at least this many GPUs count as "big-gang ready" when all are idle.
BIG_NODE_GPUS = 8


def gpu_milli(requests: Mapping[str, int]) -> int:
    """GPU thousandths in a request map: whole GPUs × 1000 plus the shared thousandths."""
    return requests.get(GPU, 0) * 1000 + requests.get(GPU_SHARE, 0)


def node_free_devices(node: Node) -> tuple[int, ...]:
    """Free thousandths per GPU device (synthesised, free first, without a device model)."""
    if node.gpu_devices is not None:
        return tuple(max(0, d) for d in node.gpu_devices)
    total = node.allocatable.get(GPU, 0)
    free = max(0, min(total, total - node.requested.get(GPU, 0)))
    return (1000,) * free + (0,) * (total - free)


def node_gpu_free_milli(node: Node) -> int:
    """Free GPU thousandths of a node."""
    return sum(node_free_devices(node))


def used_gpu_milli(fleet: Fleet) -> int:
    """GPU thousandths in use on every node of the fleet (whole GPUs and shares)."""
    used = 0
    for cluster in fleet.clusters:
        for node in cluster.nodes:
            used += node.allocatable.get(GPU, 0) * 1000 - node_gpu_free_milli(node)
    return used


def whole_free_nodes(nodes: tuple[Node, ...], gpus: int = BIG_NODE_GPUS) -> int:
    """Usable nodes with at least ``gpus`` GPUs, every one of them idle."""
    count = 0
    for node in nodes:
        total = node.allocatable.get(GPU, 0)
        if node.usable and total >= gpus and node_gpu_free_milli(node) == total * 1000:
            count += 1
    return count


class NodeRoom:
    """A node's free capacity, read once, for many "does this pod fit" questions."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.free = node.free
        self.slots = node.free_pods
        self.devices = node_free_devices(node)
        self.idle = sum(1 for d in self.devices if d >= 1000)
        self.largest = max(self.devices, default=0)

    def fits(self, pod: PodDemand) -> bool:
        """Whether one pod fits by its requests (selectors and taints are not looked at)."""
        if self.slots < 1:
            return False
        for name, amount in pod.requests.items():
            if name == GPU:
                if self.idle < amount:
                    return False
            elif name == GPU_SHARE:
                if self.largest < amount:
                    return False
            elif self.free.get(name, 0) < amount:
                return False
        return True


@dataclass
class FreeTotals:
    """Free capacity of one reachable cluster's usable nodes, summed and per-node maxima."""

    #: scalar resources (cpu, memory, extended), GPUs excluded.
    resources: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    gpu_milli: int = 0
    #: most idle devices on one node, and most free thousandths on one device.
    max_idle_devices: int = 0
    max_device_milli: int = 0


def free_totals(fleet: Fleet) -> dict[str, FreeTotals]:
    """:class:`FreeTotals` per reachable cluster with nodes (fleet order)."""
    result: dict[str, FreeTotals] = {}
    for cluster in fleet.clusters:
        if not cluster.reachable or not cluster.nodes:
            continue
        totals = FreeTotals()
        for node in cluster.nodes:
            if not node.usable:
                continue
            for name, amount in node.free.items():
                if name in (GPU, GPU_SHARE, PODS) or amount <= 0:
                    continue
                totals.resources[name] = totals.resources.get(name, 0) + amount
            totals.pods += max(0, node.free_pods)
            devices = node_free_devices(node)
            totals.gpu_milli += sum(devices)
            idle = sum(1 for d in devices if d >= 1000)
            totals.max_idle_devices = max(totals.max_idle_devices, idle)
            totals.max_device_milli = max(totals.max_device_milli, max(devices, default=0))
        result[cluster.name] = totals
    return result


def shortfall(workload: Workload, free: FreeTotals) -> str | None:
    """Why ``workload`` cannot fit ``free`` whatever the packing, or ``None`` if it might.

    Only necessary conditions: the workload's total of each resource, its pod count and GPU
    thousandths against the cluster's free totals, and each pod's whole GPUs (or share) against
    the most idle devices on one node (the most free on one device).
    """
    milli = sum(gpu_milli(c.pod.requests) * c.replicas for c in workload.components)
    if milli > free.gpu_milli:
        return f"needs {milli / 1000:g} GPUs, {free.gpu_milli / 1000:g} free in the cluster"
    for component in workload.components:
        requests = component.pod.requests
        whole = requests.get(GPU, 0)
        if whole > free.max_idle_devices:
            return (
                f"a pod of {component.label} needs {whole} idle GPUs on one node, "
                f"at most {free.max_idle_devices} are"
            )
        share = requests.get(GPU_SHARE, 0)
        if share > free.max_device_milli:
            return (
                f"a pod of {component.label} needs {share}/1000 of one GPU, "
                f"at most {free.max_device_milli}/1000 is free on a device"
            )
    if workload.pod_count > free.pods:
        return f"needs {workload.pod_count} pod slots, {free.pods} free"
    for name, amount in workload.total_requests().items():
        if name in (GPU, GPU_SHARE):
            continue
        available = free.resources.get(name, 0)
        if amount > available:
            return f"needs {_amount(name, amount)} {name}, {_amount(name, available)} free"
    return None


def _amount(name: str, amount: int) -> str:
    if name == CPU:
        return f"{to_base(CPU, amount):g}"
    if name == MEMORY:
        return format_quantity(MEMORY, amount)
    return str(amount)
