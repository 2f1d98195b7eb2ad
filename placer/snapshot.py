"""Fleet capacity snapshots: the YAML file ``placer snapshot`` writes and ``simulate`` reads.

Format (``apiVersion: placer.dev/v1alpha1``, ``kind: FleetSnapshot``)::

    apiVersion: placer.dev/v1alpha1
    kind: FleetSnapshot
    capturedAt: "2026-11-29T13:00:00Z"
    clusters:
    - name: east
      reachable: true            # false with a reason when gathering failed
      reason: ""
      labels: {region: us-east}
      taints: []                 # cluster-wide taints, [{key, value, effect}]
      pending: {pods: 2, requests: {cpu: "4", nvidia.com/gpu: "2"}}
      nodeGroups:                # identical nodes stored once
      - names: [east-gpu-0, east-gpu-1]      # or  namePrefix: east-gpu  with  count: 2
        labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
        taints: []
        allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}
        requested: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "4", pods: "3"}
        unschedulable: false
        ready: true
        gpuDevices: [1000, 1000, 500, 0]     # optional: free thousandths per GPU device
        devices:                             # optional: DRA devices (ResourceSlices)
        - {driver: gpu.nvidia.com, resource: nvidia.com/gpu, count: 8, allocated: 2,
           attributes: {productName: NVIDIA H100 80GB HBM3, type: gpu}}
    accelerators: {...}          # optional: the fleet file's accelerator table it was gathered with

A node's DRA ``devices`` whose ``resource`` is set are also in its ``allocatable`` (``count``)
and ``requested`` (``allocated``) amounts; they say where that capacity comes from (and let the
virtual fleet serve it back as ResourceSlices). Quantities are Kubernetes quantity strings
(numbers are accepted too). A node's
``kubernetes.io/hostname`` label is not stored when it equals the node name (so identical nodes
group); it is restored on load. Snapshots never hold credentials: only names, labels, taints and
amounts.

``fleet_from_dict``/``fleet_to_dict`` are pure; ``load_snapshot``/``dump_snapshot`` add the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from placer.accelerators import accelerators_from_dict
from placer.errors import InputError, SnapshotError
from placer.model import Cluster, DeviceGroup, Fleet, Node, PendingPods, Taint
from placer.quantity import format_resources, resource_amount
from placer.yamlload import parse_yaml, read_text
from placer.yamltext import dump_plain

__all__ = [
    "API_VERSION",
    "KIND",
    "dump_snapshot",
    "dumps_snapshot",
    "fleet_from_dict",
    "fleet_to_dict",
    "load_snapshot",
    "loads_snapshot",
    "parse_labels",
    "parse_taints",
]

API_VERSION = "placer.dev/v1alpha1"
KIND = "FleetSnapshot"
HOSTNAME_LABEL = "kubernetes.io/hostname"
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def load_snapshot(path: str | Path) -> Fleet:
    """Read a snapshot file. Raises ``SnapshotError`` naming the file and field on bad input."""
    source = str(path)
    if not Path(path).exists() and str(path) != "-":
        raise SnapshotError(
            "no such file",
            source=source,
            hint="check the path, or write one with `placer snapshot`",
        )
    return loads_snapshot(read_text(path, SnapshotError), source=source)


def loads_snapshot(text: str, *, source: str = "<snapshot>") -> Fleet:
    """Parse snapshot YAML text."""
    return fleet_from_dict(parse_yaml(text, source, SnapshotError), source=source)


def dump_snapshot(fleet: Fleet, path: str | Path) -> None:
    """Write a snapshot file (YAML), atomically: a reader never sees half a snapshot.

    Raises ``SnapshotError`` naming the file when it cannot be written.
    """
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        temporary.write_text(dumps_snapshot(fleet), encoding="utf-8")
        temporary.replace(target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise SnapshotError(f"cannot write: {exc.strerror}", source=str(path)) from None


def dumps_snapshot(fleet: Fleet) -> str:
    """Snapshot YAML text for ``fleet``: PyYAML's ``safe_dump`` bytes, written several times
    faster by :mod:`placer.yamltext`."""
    return dump_plain(fleet_to_dict(fleet))


# --------------------------------------------------------------------------------------------
# dict -> Fleet


def fleet_from_dict(data: object, *, source: str = "<snapshot>") -> Fleet:
    """Build a :class:`Fleet` from parsed snapshot data, validating every field."""
    if not isinstance(data, Mapping):
        raise SnapshotError(
            "a snapshot must be a mapping with apiVersion, kind and clusters",
            source=source,
            hint="create one with `placer snapshot -o FILE` or copy one from clusters/",
        )
    if data.get("kind") != KIND:
        raise SnapshotError(
            f"kind is {data.get('kind')!r}, expected {KIND!r}", source=source, field="kind"
        )
    if data.get("apiVersion") != API_VERSION:
        raise SnapshotError(
            f"apiVersion is {data.get('apiVersion')!r}, expected {API_VERSION!r}",
            source=source,
            field="apiVersion",
        )
    clusters_data = data.get("clusters")
    if not isinstance(clusters_data, list):
        raise SnapshotError("must be a list of clusters", source=source, field="clusters")
    clusters: list[Cluster] = []
    seen: set[str] = set()
    for index, item in enumerate(clusters_data):
        where = f"clusters[{index}]"
        cluster = _cluster_from_dict(item, source, where)
        if cluster.name in seen:
            raise SnapshotError(
                f"duplicate cluster name {cluster.name!r}", source=source, field=f"{where}.name"
            )
        seen.add(cluster.name)
        clusters.append(cluster)
    captured = data.get("capturedAt", "")
    accelerators = data.get("accelerators") or {}
    try:
        accelerators_from_dict(accelerators, source=source, field="accelerators")
    except InputError as err:
        raise SnapshotError(err.message, hint=err.hint) from None
    return Fleet(
        clusters=tuple(clusters), captured_at=str(captured or ""), accelerators=dict(accelerators)
    )


def _cluster_from_dict(item: object, source: str, where: str) -> Cluster:
    if not isinstance(item, Mapping):
        raise SnapshotError("must be a mapping", source=source, field=where)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise SnapshotError("must be a non-empty string", source=source, field=f"{where}.name")
    reachable = item.get("reachable", True)
    if not isinstance(reachable, bool):
        raise SnapshotError("must be true or false", source=source, field=f"{where}.reachable")
    nodes: list[Node] = []
    names: set[str] = set()
    groups = item.get("nodeGroups", []) or []
    if not isinstance(groups, list):
        raise SnapshotError("must be a list", source=source, field=f"{where}.nodeGroups")
    for gi, group in enumerate(groups):
        for node in _nodes_from_group(group, source, f"{where}.nodeGroups[{gi}]"):
            if node.name in names:
                raise SnapshotError(
                    f"duplicate node name {node.name!r}",
                    source=source,
                    field=f"{where}.nodeGroups[{gi}]",
                )
            names.add(node.name)
            nodes.append(node)
    pending_data = item.get("pending") or {}
    if not isinstance(pending_data, Mapping):
        raise SnapshotError("must be a mapping", source=source, field=f"{where}.pending")
    pending = PendingPods(
        count=_int(pending_data.get("pods", 0), source, f"{where}.pending.pods"),
        requests=_resources(pending_data.get("requests"), source, f"{where}.pending.requests"),
    )
    return Cluster(
        name=name,
        nodes=tuple(nodes),
        labels=_string_map(item.get("labels"), source, f"{where}.labels"),
        taints=_taints(item.get("taints"), source, f"{where}.taints"),
        reachable=reachable,
        reason=str(item.get("reason") or ""),
        pending=pending,
    )


def _nodes_from_group(group: object, source: str, where: str) -> list[Node]:
    if not isinstance(group, Mapping):
        raise SnapshotError("must be a mapping", source=source, field=where)
    names_data = group.get("names")
    if names_data is not None:
        if not isinstance(names_data, list) or not all(
            isinstance(n, str) and n for n in names_data
        ):
            raise SnapshotError(
                "must be a list of node names", source=source, field=f"{where}.names"
            )
        names = list(names_data)
        if "count" in group and _int(group["count"], source, f"{where}.count") != len(names):
            raise SnapshotError(
                f"count {group['count']} differs from the {len(names)} names",
                source=source,
                field=f"{where}.count",
            )
    else:
        prefix = group.get("namePrefix")
        if not isinstance(prefix, str) or not prefix:
            raise SnapshotError(
                "a node group needs `names` or `namePrefix` with `count`",
                source=source,
                field=where,
            )
        count = _int(group.get("count", 1), source, f"{where}.count")
        names = [f"{prefix}-{i}" for i in range(count)]
    labels = _string_map(group.get("labels"), source, f"{where}.labels")
    allocatable = _resources(group.get("allocatable"), source, f"{where}.allocatable")
    if not allocatable:
        raise SnapshotError(
            "must list the node's resources", source=source, field=f"{where}.allocatable"
        )
    requested = _resources(group.get("requested"), source, f"{where}.requested")
    taints = _taints(group.get("taints"), source, f"{where}.taints")
    unschedulable = group.get("unschedulable", False)
    ready = group.get("ready", True)
    for key, value in (("unschedulable", unschedulable), ("ready", ready)):
        if not isinstance(value, bool):
            raise SnapshotError("must be true or false", source=source, field=f"{where}.{key}")
    devices_data = group.get("gpuDevices")
    devices: tuple[int, ...] | None = None
    if devices_data is not None:
        if not isinstance(devices_data, list):
            raise SnapshotError(
                "must be a list of free thousandths per GPU device",
                source=source,
                field=f"{where}.gpuDevices",
            )
        devices = tuple(
            _int(v, source, f"{where}.gpuDevices[{i}]") for i, v in enumerate(devices_data)
        )
        if any(not 0 <= d <= 1000 for d in devices):
            raise SnapshotError(
                "each device's free share must be between 0 and 1000",
                source=source,
                field=f"{where}.gpuDevices",
            )
    device_groups = _device_groups(group.get("devices"), source, f"{where}.devices")
    nodes = []
    for name in names:
        node_labels = dict(labels)
        node_labels.setdefault(HOSTNAME_LABEL, name)
        nodes.append(
            Node(
                name=name,
                allocatable=allocatable,
                requested=requested,
                labels=node_labels,
                taints=taints,
                unschedulable=unschedulable,
                ready=ready,
                gpu_devices=devices,
                devices=device_groups,
            )
        )
    return nodes


def _device_groups(value: object, source: str, where: str) -> tuple[DeviceGroup, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SnapshotError("must be a list of DRA device groups", source=source, field=where)
    groups = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise SnapshotError("must be a mapping", source=source, field=at)
        driver = item.get("driver")
        if not isinstance(driver, str) or not driver:
            raise SnapshotError("must be a non-empty string", source=source, field=f"{at}.driver")
        resource = item.get("resource") or ""
        if not isinstance(resource, str):
            raise SnapshotError("must be a string", source=source, field=f"{at}.resource")
        count = _int(item.get("count", 0), source, f"{at}.count")
        allocated = _int(item.get("allocated", 0), source, f"{at}.allocated")
        if allocated > count:
            raise SnapshotError(
                f"{allocated} allocated of {count} devices", source=source, field=f"{at}.allocated"
            )
        attributes = _string_map(item.get("attributes"), source, f"{at}.attributes")
        groups.append(DeviceGroup(driver, resource, count, allocated, attributes))
    return tuple(groups)


#: Largest count a snapshot may give (nodes of a group, pending pods): far above any cluster.
MAX_COUNT = 100_000


def _int(value: object, source: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise SnapshotError(
            f"must be a whole number from 0 to {MAX_COUNT:,}, got {value!r}",
            source=source,
            field=where,
        )
    return value


def parse_labels(
    value: object, *, source: str, field: str, error: type[InputError] = SnapshotError
) -> dict[str, str]:
    """A ``{string: string}`` map (labels) from data; numbers and booleans become their JSON
    text. Raises ``error`` naming ``source`` and ``field``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise error("must be a mapping of strings", source=source, field=field)
    result: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or isinstance(item, (Mapping, list)) or item is None:
            raise error(f"entry {key!r} must map a string to a string", source=source, field=field)
        result[key] = item if isinstance(item, str) else json.dumps(item)
    return result


def _string_map(value: object, source: str, where: str) -> dict[str, str]:
    return parse_labels(value, source=source, field=where)


def _resources(value: object, source: str, where: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SnapshotError("must be a mapping of resource quantities", source=source, field=where)
    result: dict[str, int] = {}
    for name, quantity in value.items():
        try:
            amount = resource_amount(str(name), quantity)
        except ValueError as exc:
            raise SnapshotError(
                str(exc)
                if "not a quantity" not in str(exc)
                else f"{quantity!r} is not a Kubernetes quantity",
                source=source,
                field=f"{where}.{name}",
                hint='write quantities like "4", "500m", "64Gi"',
            ) from None
        result[str(name)] = amount
    return result


def parse_taints(
    value: object, *, source: str, field: str, error: type[InputError] = SnapshotError
) -> tuple[Taint, ...]:
    """Taints from a ``[{key, value, effect}]`` list (effect defaults to ``NoSchedule``).
    Raises ``error`` naming ``source`` and ``field``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise error("must be a list of {key, value, effect}", source=source, field=field)
    taints = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise error("must be a mapping with a key", source=source, field=f"{field}[{i}]")
        effect = item.get("effect", "NoSchedule")
        if effect not in _TAINT_EFFECTS:
            raise error(
                f"effect {effect!r} is not one of {', '.join(_TAINT_EFFECTS)}",
                source=source,
                field=f"{field}[{i}].effect",
            )
        taints.append(Taint(key=item["key"], value=str(item.get("value") or ""), effect=effect))
    return tuple(taints)


def _taints(value: object, source: str, where: str) -> tuple[Taint, ...]:
    return parse_taints(value, source=source, field=where)


# --------------------------------------------------------------------------------------------
# Fleet -> dict


def fleet_to_dict(fleet: Fleet) -> dict[str, Any]:
    """Snapshot data for ``fleet``; identical nodes are grouped (first-seen order kept)."""
    data: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "capturedAt": fleet.captured_at,
    }
    if fleet.accelerators:
        data["accelerators"] = dict(fleet.accelerators)
    data["clusters"] = [_cluster_to_dict(c) for c in fleet.clusters]
    return data


def _cluster_to_dict(cluster: Cluster) -> dict[str, Any]:
    data: dict[str, Any] = {"name": cluster.name, "reachable": cluster.reachable}
    if cluster.reason:
        data["reason"] = cluster.reason
    data["labels"] = dict(sorted(cluster.labels.items()))
    data["taints"] = [_taint_to_dict(t) for t in cluster.taints]
    if cluster.pending.count or cluster.pending.requests:
        data["pending"] = {
            "pods": cluster.pending.count,
            "requests": format_resources(cluster.pending.requests),
        }
    groups: dict[str, dict[str, Any]] = {}
    for node in cluster.nodes:
        body = _node_body(node)
        key = json.dumps(body, sort_keys=True)
        if key in groups:
            groups[key]["names"].append(node.name)
        else:
            groups[key] = {"names": [node.name], **body}
    data["nodeGroups"] = list(groups.values())
    return data


def _node_body(node: Node) -> dict[str, Any]:
    labels = {
        k: v for k, v in sorted(node.labels.items()) if not (k == HOSTNAME_LABEL and v == node.name)
    }
    body: dict[str, Any] = {
        "labels": labels,
        "taints": [_taint_to_dict(t) for t in node.taints],
        "allocatable": format_resources(node.allocatable),
        "requested": format_resources(node.requested),
        "unschedulable": node.unschedulable,
        "ready": node.ready,
    }
    if node.gpu_devices is not None:
        body["gpuDevices"] = list(node.gpu_devices)
    if node.devices:
        body["devices"] = [
            {
                "driver": g.driver,
                "resource": g.resource,
                "count": g.count,
                "allocated": g.allocated,
                "attributes": dict(sorted(g.attributes.items())),
            }
            for g in node.devices
        ]
    return body


def _taint_to_dict(taint: Taint) -> dict[str, str]:
    return {"key": taint.key, "value": taint.value, "effect": taint.effect}
