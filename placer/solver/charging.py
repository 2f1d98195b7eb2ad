"""Charging placements to a fleet's nodes, and releasing them again (pure arithmetic).

``charge(fleet, placements)`` returns the fleet as it will be once the placed pods are bound:
each pod's requests are added to its node's ``requested`` (and one ``pods`` slot), and its GPU
devices lose what the pod uses (whole devices drop to 0 — the recorded ones while idle, other
idle ones when a placement decided apart already took them — and a shared pod's device loses
its thousandths). ``release`` undoes exactly that. Both are pure: the input fleet is not changed,
untouched clusters and nodes are the same objects in the result.

The in-flight ledger (:mod:`placer.dispatch.ledger`, the book of placements not yet visible
as pods) charges its entries through :func:`charge`; the simulator binds and frees with both.

They need per-pod ``requests`` (and ``devices`` for GPU pods on device-modelled nodes) in the
:class:`~placer.model.PodAssignment` — the solver always fills them in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from placer.model import GPU_SHARE, Cluster, Fleet, Node, Placement, PodAssignment
from placer.quantity import GPU, PODS
from placer.solver.state import node_devices

__all__ = ["charge", "release", "whole_devices"]


def charge(fleet: Fleet, placements: Iterable[Placement]) -> Fleet:
    """The fleet with ``placements``' pods added to their nodes (see module docstring)."""
    return _apply(fleet, placements, +1)


def release(fleet: Fleet, placements: Iterable[Placement]) -> Fleet:
    """The fleet with ``placements``' pods taken off their nodes again."""
    return _apply(fleet, placements, -1)


def _apply(fleet: Fleet, placements: Iterable[Placement], sign: int) -> Fleet:
    by_cluster: dict[str, dict[str, list[PodAssignment]]] = {}
    for placement in placements:
        nodes = by_cluster.setdefault(placement.cluster, {})
        for pod in placement.pods:
            if not pod.requests and placement.requests:
                raise ValueError(
                    f"placement of {placement.workload} has pod {pod.component}[{pod.index}] "
                    "without requests; charge needs per-pod requests as the solver writes them"
                )
            nodes.setdefault(pod.node, []).append(pod)
    unknown = set(by_cluster) - set(fleet.names)
    if unknown:
        raise ValueError(f"placements name clusters not in the fleet: {', '.join(sorted(unknown))}")
    clusters = []
    for cluster in fleet.clusters:
        pods_by_node = by_cluster.get(cluster.name)
        clusters.append(cluster if not pods_by_node else _cluster(cluster, pods_by_node, sign))
    return replace(fleet, clusters=tuple(clusters))


def _cluster(cluster: Cluster, pods_by_node: dict[str, list[PodAssignment]], sign: int) -> Cluster:
    names = {n.name for n in cluster.nodes}
    missing = set(pods_by_node) - names
    if missing:
        raise ValueError(
            f"placements name nodes not in cluster {cluster.name}: {', '.join(sorted(missing))}"
        )
    nodes = tuple(
        _node(node, pods_by_node[node.name], sign) if node.name in pods_by_node else node
        for node in cluster.nodes
    )
    return replace(cluster, nodes=nodes)


def _node(node: Node, pods: list[PodAssignment], sign: int) -> Node:
    requested = dict(node.requested)
    devices = list(node.gpu_devices) if node.gpu_devices is not None else None
    if devices is None and any(p.requests.get(GPU_SHARE, 0) for p in pods):
        # a shared pod on a node without a device model: materialise the devices exactly as
        # the solver saw them (``node_devices`` of the node before these pods), so the device
        # indices recorded in the assignments mean the same devices here
        devices = list(node_devices(node))
    for pod in pods:
        for name, amount in pod.requests.items():
            if name == GPU_SHARE:
                continue
            requested[name] = max(0, requested.get(name, 0) + sign * amount)
        requested[PODS] = max(0, requested.get(PODS, 0) + sign)
        whole = pod.requests.get(GPU, 0)
        share = pod.requests.get(GPU_SHARE, 0)
        if devices is None:
            continue  # whole GPUs counted in ``requested`` only
        used = list(pod.devices)
        if whole and sign > 0:
            for i in whole_devices(devices, used[:whole], whole):
                devices[i] = 0
        elif whole:
            indices = used[:whole] or [i for i, d in enumerate(devices) if d == 0][:whole]
            for i in indices:
                devices[i] = 1000
        if share:
            index = used[-1] if used else _device_for(devices, share, sign)
            devices[index] = min(1000, max(0, devices[index] - sign * share))
    gpu_devices = tuple(devices) if devices is not None else None
    return replace(node, requested=requested, gpu_devices=gpu_devices)


def whole_devices(devices: list[int], recorded: list[int], whole: int) -> list[int]:
    """The devices ``whole`` GPUs of a pod take: its recorded ones while they are idle, idle
    others for the rest. Which device a whole-GPU pod gets is the device plugin's choice, so
    two placements decided apart that both planned "device 0" of a node with two idle devices
    take devices 0 and 1 — they do not both zero device 0 and leave the node looking emptier
    than it is."""
    taken = [i for i in recorded if 0 <= i < len(devices) and devices[i] == 1000]
    spare = [i for i, d in enumerate(devices) if d == 1000 and i not in taken]
    return taken + spare[: whole - len(taken)]


def _device_for(devices: list[int], share: int, sign: int) -> int:
    """A device for a share without a recorded device: best fit to take, fullest to give."""
    if sign > 0:
        fitting = [(d, i) for i, d in enumerate(devices) if d >= share]
        return min(fitting)[1] if fitting else 0
    giving = [(d, i) for i, d in enumerate(devices) if d + share <= 1000]
    return min(giving)[1] if giving else 0
