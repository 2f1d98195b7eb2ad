"""What ``placer fleet show`` reports: one summary per cluster (pure).

JSON shape (amounts in base units as ``placer describe`` prints them: cpu in cores, memory in
bytes, everything else counted)::

    {"clusters": [{"name", "reachable", "reason", "labels", "nodes",
                   "allocatable": {RESOURCE: NUMBER}, "free": {RESOURCE: NUMBER},
                   "max_free_per_node": {RESOURCE: NUMBER}, "gpu_models": {MODEL: COUNT},
                   "devices": [{"node", "driver", "resource", "count", "allocated",
                                "attributes"}],
                   "scheduler": {"name", "source", "schedulerName"?, "defaultQueue"?,
                                 "queues"?, "scheduleTimeoutSeconds"?}}]}

``free`` sums what is free on usable nodes (Ready and not cordoned); ``allocatable`` counts every
node. ``max_free_per_node`` is, per resource, the most any single usable node has free — the
largest block one pod can get (8 free GPUs spread over 8 nodes is ``1`` here). ``gpu_models``
counts allocatable GPUs per model (node label ``nvidia.com/gpu.product`` or the like, else the
``productName`` of the node's DRA GPUs). ``devices`` lists every node's Dynamic Resource
Allocation devices (from ResourceSlices): per driver and attributes, how many, how many are
allocated, and the resource they count as (``""``: not mapped by the accelerator table, so not
counted); ``--nodes`` shows them in a ``DRA DEVICES`` column, and in a ``GPU SHARES`` column
the GPU capacity whole free devices do not show (:func:`gpu_shares_text`: room left on
partly used devices, MIG slices, time-sliced GPUs). ``scheduler`` is the member's
scheduler placer hands gangs to (:mod:`placer.schedulers`: the fleet file's ``scheduler:``, else
the cluster label ``placer.dev/scheduler``, else ``default``; a PlacementPolicy may still
override it for the workloads it selects), with where it was said and its settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placer.fleet.capacity import gpu_models, gpu_product
from placer.model import Cluster, DeviceGroup, Fleet, Node
from placer.quantity import CPU, GPU, MEMORY, to_base_map
from placer.schedulers import SchedulerSpec, resolve_scheduler

__all__ = [
    "cluster_rows",
    "cluster_summary",
    "fleet_summary",
    "gpu_shares_text",
    "max_free_per_node",
    "node_rows",
    "scheduler_summary",
]


_NVIDIA = "nvidia.com/"


def max_free_per_node(cluster: Cluster) -> dict[str, int]:
    """Per resource, the largest amount free on one usable node (canonical units)."""
    best: dict[str, int] = {}
    for node in cluster.nodes:
        if not node.usable:
            continue
        for name, amount in node.free.items():
            best[name] = max(best.get(name, 0), amount, 0)
    return best


def scheduler_summary(spec: SchedulerSpec) -> dict[str, Any]:
    """A member's scheduler, in the JSON shape of the module docstring."""
    out: dict[str, Any] = {"name": spec.name, "source": spec.source or "default"}
    if spec.pod_scheduler_name:
        out["schedulerName"] = spec.pod_scheduler_name
    if spec.name != "default" and spec.queue_for(""):
        out["defaultQueue"] = spec.queue_for("")
    if spec.queues:
        out["queues"] = dict(sorted(spec.queues.items()))
    if spec.schedule_timeout_seconds is not None:
        out["scheduleTimeoutSeconds"] = spec.schedule_timeout_seconds
    return out


def cluster_summary(cluster: Cluster, scheduler: SchedulerSpec | None = None) -> dict[str, Any]:
    """One cluster in the JSON shape of the module docstring (``scheduler``: the fleet file's
    for it, if any)."""
    spec = resolve_scheduler(scheduler, cluster.labels)
    return {
        "name": cluster.name,
        "reachable": cluster.reachable,
        "reason": cluster.reason,
        "labels": dict(sorted(cluster.labels.items())),
        "nodes": len(cluster.nodes),
        "allocatable": to_base_map(cluster.allocatable()),
        "free": to_base_map(cluster.free()),
        "max_free_per_node": to_base_map(max_free_per_node(cluster)),
        "gpu_models": gpu_models(cluster.nodes),
        "devices": [
            {
                "node": node.name,
                "driver": g.driver,
                "resource": g.resource,
                "count": g.count,
                "allocated": g.allocated,
                "attributes": dict(g.attributes),
            }
            for node in cluster.nodes
            for g in node.devices
        ],
        "scheduler": scheduler_summary(spec),
    }


def fleet_summary(
    fleet: Fleet, schedulers: Mapping[str, SchedulerSpec] | None = None
) -> dict[str, Any]:
    """``{"clusters": [...]}`` for the whole fleet (``schedulers``: the fleet file's)."""
    chosen = schedulers or {}
    return {"clusters": [cluster_summary(c, chosen.get(c.name)) for c in fleet.clusters]}


def cluster_rows(
    fleet: Fleet, schedulers: Mapping[str, SchedulerSpec] | None = None
) -> list[list[str]]:
    """The text table: header, then one row per cluster (``schedulers``: the fleet file's)."""
    chosen = schedulers or {}
    rows = [
        [
            "CLUSTER",
            "REACHABLE",
            "NODES",
            "GPU FREE/ALLOC",
            "MAX GPU/NODE",
            "CPU FREE/ALLOC",
            "MEMORY FREE/ALLOC",
            "PENDING",
            "SCHEDULER",
            "GPU MODELS",
        ]
    ]
    for cluster in fleet.clusters:
        scheduler = _scheduler_text(resolve_scheduler(chosen.get(cluster.name), cluster.labels))
        if not cluster.reachable:
            rows.append([cluster.name, "no", "-", "-", "-", "-", "-", "-", scheduler, "-"])
            continue
        alloc, free = cluster.allocatable(), cluster.free()
        models = gpu_models(cluster.nodes)
        rows.append(
            [
                cluster.name,
                "yes",
                str(len(cluster.nodes)),
                f"{free.get(GPU, 0)}/{alloc.get(GPU, 0)}",
                str(max_free_per_node(cluster).get(GPU, 0)),
                f"{_cores(free.get(CPU, 0))}/{_cores(alloc.get(CPU, 0))}",
                f"{_gib(free.get(MEMORY, 0))}/{_gib(alloc.get(MEMORY, 0))}Gi",
                str(cluster.pending.count),
                scheduler,
                ", ".join(f"{m}×{n}" for m, n in models.items()) or "-",
            ]
        )
    return rows


def node_rows(fleet: Fleet) -> list[list[str]]:
    """The per-node text table (``--nodes``): header, then one row per node; a ``GPU SHARES``
    column (:func:`gpu_shares_text`) when a node has any, a ``DRA DEVICES`` one likewise."""
    nodes = [node for cluster in fleet.clusters for node in cluster.nodes]
    dra = any(node.devices for node in nodes)
    shares = any(gpu_shares_text(node) for node in nodes)
    header = ["CLUSTER", "NODE", "STATE", "GPU FREE/ALLOC", "CPU FREE/ALLOC", "MEMORY", "MODEL"]
    rows = [header + (["GPU SHARES"] if shares else []) + (["DRA DEVICES"] if dra else [])]
    for cluster in fleet.clusters:
        for node in cluster.nodes:
            free = node.free
            row = [
                cluster.name,
                node.name,
                _state(node),
                f"{free.get(GPU, 0)}/{node.allocatable.get(GPU, 0)}",
                f"{_cores(free.get(CPU, 0))}/{_cores(node.allocatable.get(CPU, 0))}",
                f"{_gib(free.get(MEMORY, 0))}/{_gib(node.allocatable.get(MEMORY, 0))}Gi",
                gpu_product(node) or "-",
            ]
            if shares:
                row.append(gpu_shares_text(node) or "-")
            if dra:
                row.append(", ".join(_devices_text(g) for g in node.devices) or "-")
            rows.append(row)
    return rows


def gpu_shares_text(node: Node) -> str:
    """The GPU capacity of ``node`` that ``GPU FREE/ALLOC`` (wholly free devices) leaves out:
    what is left on its partly used devices when GPU sharing is modelled (``0.5+0.25 free on
    2 shared GPUs``: room for Run:ai / KAI fractions), then every other ``nvidia.com/``
    resource it has, free of allocatable (MIG slices ``mig-1g.10gb 5/7``, time-sliced
    ``gpu.shared 6/8``); ``""`` when there is none."""
    parts = []
    partly = [milli for milli in node.gpu_devices or () if 0 < milli < 1000]
    if partly:
        left = "+".join(f"{milli / 1000:g}" for milli in sorted(partly, reverse=True))
        parts.append(f"{left} free on {len(partly)} shared GPU{'s' if len(partly) > 1 else ''}")
    free = node.free
    for name in sorted(node.allocatable):
        if name.startswith(_NVIDIA) and name != GPU and node.allocatable[name] > 0:
            short = name.removeprefix(_NVIDIA)
            parts.append(f"{short} {max(0, free.get(name, 0))}/{node.allocatable[name]}")
    return ", ".join(parts)


def _scheduler_text(spec: SchedulerSpec) -> str:
    """``volcano (queue research)``; ``default``."""
    queue = spec.queue_for("") if spec.name != "default" else ""
    return f"{spec.name} (queue {queue})" if queue else spec.name


def _devices_text(group: DeviceGroup) -> str:
    """``gpu.nvidia.com 1/4 free (nvidia.com/gpu)``; ``not counted`` when unmapped."""
    counted = group.resource or "not counted"
    return f"{group.driver} {group.free}/{group.count} free ({counted})"


def _state(node: Node) -> str:
    if not node.ready:
        return "NotReady"
    return "Cordoned" if node.unschedulable else "Ready"


def _cores(millicores: int) -> str:
    return f"{millicores // 1000}" if millicores % 1000 == 0 else f"{millicores / 1000:.1f}"


def _gib(amount: int) -> str:
    value = amount / 2**30
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"
