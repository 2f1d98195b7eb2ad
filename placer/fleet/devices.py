"""Dynamic Resource Allocation capacity: ResourceSlices and ResourceClaims in, devices per node out.

Pure functions over raw ``resource.k8s.io`` objects (v1, and the v1beta1 ``basic`` device
shape), as listed by :mod:`placer.fleet.gather`:

* **devices** come from ResourceSlices with ``spec.nodeName`` (devices local to one node). Per
  pool (driver + pool name) only the slices of the highest ``spec.pool.generation`` count, as
  the API asks of consumers. Slices shared by several nodes (``nodeSelector``, ``allNodes``,
  per-device node selection) are not node capacity and are left out;
* **allocated** devices are the ``status.allocation.devices.results`` of ResourceClaims
  (``driver``, ``pool``, ``device``), except admin-access results, which consume nothing;
* devices are **grouped** per node by driver and the attributes the accelerator table keeps
  (``deviceAttributes``: productName, type...), into :class:`placer.model.DeviceGroup`; each
  group is counted as the resource its DeviceClass maps to (``gpu.nvidia.com`` devices of type
  gpu -> ``nvidia.com/gpu``), or as nothing (``""``) when no class of the table covers it.

:func:`with_devices` then folds a node's mapped groups into its ``allocatable`` (devices) and
``requested`` (allocated devices), so that placement, the verifier and the simulator count DRA
devices like any other resource of the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from placer.accelerators import AcceleratorTable
from placer.model import DeviceGroup, Node

__all__ = ["DRA_API_VERSION", "device_attributes", "node_device_groups", "with_devices"]

#: The Dynamic Resource Allocation API placer reads (Kubernetes 1.34+).
DRA_API_VERSION = "resource.k8s.io/v1"


def device_attributes(device: Mapping[str, Any]) -> dict[str, str]:
    """A ResourceSlice device's attributes as text (v1 flat, or v1beta1 under ``basic``)."""
    body = device.get("basic") if isinstance(device.get("basic"), Mapping) else device
    assert isinstance(body, Mapping)
    attributes = body.get("attributes")
    out: dict[str, str] = {}
    if not isinstance(attributes, Mapping):
        return out
    for name, value in attributes.items():
        if not isinstance(value, Mapping):
            continue
        for key in ("string", "version", "int", "bool"):
            if key in value and value[key] is not None:
                item = value[key]
                out[str(name)] = ("true" if item else "false") if key == "bool" else str(item)
                break
    return out


def node_device_groups(
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    table: AcceleratorTable,
) -> dict[str, tuple[DeviceGroup, ...]]:
    """Node name -> its DRA device groups (see the module docstring)."""
    latest: dict[tuple[str, str], int] = {}
    usable: list[tuple[str, str, str, Mapping[str, Any]]] = []
    for item in slices:
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        driver = str(spec.get("driver") or "")
        pool = spec.get("pool") or {}
        if not node or not driver or not isinstance(pool, Mapping):
            continue
        name = str(pool.get("name") or node)
        generation = pool.get("generation") or 0
        generation = generation if isinstance(generation, int) else 0
        key = (driver, name)
        if generation < latest.get(key, generation):
            continue
        if generation > latest.get(key, generation):
            usable = [u for u in usable if (u[1], u[2]) != key]
        latest[key] = generation
        usable.append((str(node), driver, name, spec))
    allocated = _allocated(claims)
    counts: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], list[int]] = {}
    for node, driver, pool, spec in usable:
        for device in spec.get("devices") or ():
            if not isinstance(device, Mapping):
                continue
            attributes = device_attributes(device)
            kept = tuple(
                (name, attributes[name]) for name in table.device_attributes if name in attributes
            )
            # NB: the class mapping reads every attribute (type: gpu or mig), the group keeps some
            resource = table.resource_of_device(driver, attributes)
            group = counts.setdefault((node, driver, resource, kept), [0, 0])
            group[0] += 1
            if (driver, pool, str(device.get("name") or "")) in allocated:
                group[1] += 1
    result: dict[str, list[DeviceGroup]] = {}
    for (node, driver, resource, kept), (count, used) in sorted(counts.items()):
        result.setdefault(node, []).append(
            DeviceGroup(driver, resource, count, allocated=used, attributes=dict(kept))
        )
    return {node: tuple(groups) for node, groups in result.items()}


def _allocated(claims: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    taken: set[tuple[str, str, str]] = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or ()
        for result in results:
            if not isinstance(result, Mapping) or result.get("adminAccess"):
                continue
            taken.add(
                (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            )
    return taken


def with_devices(node: Node, groups: Iterable[DeviceGroup]) -> Node:
    """``node`` with its DRA device groups: mapped groups add their devices to ``allocatable``
    and their allocated devices to ``requested``."""
    groups = tuple(groups)
    if not groups:
        return node
    allocatable = dict(node.allocatable)
    requested = dict(node.requested)
    for group in groups:
        if not group.resource:
            continue
        allocatable[group.resource] = allocatable.get(group.resource, 0) + group.count
        if group.allocated:
            requested[group.resource] = requested.get(group.resource, 0) + group.allocated
    return replace(
        node,
        allocatable=allocatable,
        requested=requested,
        devices=(*node.devices, *groups),
    )
