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
    topologies: [...]            # optional: the fleet file's topologies (placer.topology)

A node's ``gpuDevices`` are its devices' free thousandths *with its pods counted* (its
``requested`` whole GPUs and shares taken off): the capture's result, unlike the node
annotation ``placer.dev/gpu-devices`` it may be gathered from, which is the devices before the
node's pods (:mod:`placer.fleet.capacity`; the virtual fleet writes the annotation back from
them, :mod:`placer.virtual.seeding`). A node's DRA ``devices`` whose ``resource`` is set are
also in its ``allocatable`` (``count``) and ``requested`` (``allocated``) amounts; they say
where that capacity comes from (and let the virtual fleet serve it back as ResourceSlices).
Quantities are Kubernetes quantity strings (numbers are accepted too). A node's
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
from placer.decoding import Decoder
from placer.errors import InputError, SnapshotError
from placer.model import Cluster, DeviceGroup, Fleet, Node, PendingPods, Taint
from placer.quantity import format_resources
from placer.topology import topologies_from_list
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
    read = Decoder(SnapshotError, source)
    if not isinstance(data, Mapping):
        read.fail(
            None,
            "a snapshot must be a mapping with apiVersion, kind and clusters",
            hint="create one with `placer snapshot -o FILE` or copy one from clusters/",
        )
    read.header(data, API_VERSION, KIND)
    if not isinstance(data.get("clusters"), list):
        read.fail("clusters", "must be a list of clusters")
    clusters: list[Cluster] = []
    seen: set[str] = set()
    for where, item in read.entries(data["clusters"], "clusters"):
        cluster = _cluster_from_dict(read, item, where)
        if cluster.name in seen:
            read.fail(f"{where}.name", f"duplicate cluster name {cluster.name!r}")
        seen.add(cluster.name)
        clusters.append(cluster)
    captured = data.get("capturedAt", "")
    accelerators = data.get("accelerators") or {}
    try:
        accelerators_from_dict(accelerators, source=source, field="accelerators")
    except InputError as err:
        raise SnapshotError(err.message, hint=err.hint) from None
    topologies = data.get("topologies")
    try:
        topologies_from_list(topologies)
    except ValueError as err:
        raise SnapshotError(str(err), source=source) from None
    return Fleet(
        clusters=tuple(clusters),
        captured_at=str(captured or ""),
        accelerators=dict(accelerators),
        topologies=tuple(topologies or ()),
    )


def _cluster_from_dict(read: Decoder, item: object, where: str) -> Cluster:
    if not isinstance(item, Mapping):
        read.fail(where, "must be a mapping")
    name = read.string(item.get("name"), f"{where}.name", required=True)
    reachable = read.flag(item.get("reachable"), f"{where}.reachable", default=True)
    nodes: list[Node] = []
    names: set[str] = set()
    for group_at, group in read.entries(item.get("nodeGroups") or [], f"{where}.nodeGroups"):
        for node in _nodes_from_group(read, group, group_at):
            if node.name in names:
                read.fail(group_at, f"duplicate node name {node.name!r}")
            names.add(node.name)
            nodes.append(node)
    pending_data = read.mapping(item.get("pending") or {}, f"{where}.pending")
    pending = PendingPods(
        count=read.count(pending_data.get("pods", 0), f"{where}.pending.pods", maximum=MAX_COUNT),
        requests=read.resources(pending_data.get("requests"), f"{where}.pending.requests"),
    )
    return Cluster(
        name=name,
        nodes=tuple(nodes),
        labels=read.labels(item.get("labels"), f"{where}.labels"),
        taints=_taints(read, item.get("taints"), f"{where}.taints"),
        reachable=reachable,
        reason=str(item.get("reason") or ""),
        pending=pending,
    )


def _nodes_from_group(read: Decoder, group: object, where: str) -> list[Node]:
    if not isinstance(group, Mapping):
        read.fail(where, "must be a mapping")
    names_data = group.get("names")
    if names_data is not None:
        if not isinstance(names_data, list) or not all(
            isinstance(n, str) and n for n in names_data
        ):
            read.fail(f"{where}.names", "must be a list of node names")
        names = list(names_data)
        if "count" in group and read.count(
            group["count"], f"{where}.count", maximum=MAX_COUNT
        ) != len(names):
            read.fail(
                f"{where}.count", f"count {group['count']} differs from the {len(names)} names"
            )
    else:
        prefix = group.get("namePrefix")
        if not isinstance(prefix, str) or not prefix:
            read.fail(where, "a node group needs `names` or `namePrefix` with `count`")
        count = read.count(group.get("count", 1), f"{where}.count", maximum=MAX_COUNT)
        names = [f"{prefix}-{i}" for i in range(count)]
    labels = read.labels(group.get("labels"), f"{where}.labels")
    allocatable = read.resources(group.get("allocatable"), f"{where}.allocatable")
    if not allocatable:
        read.fail(f"{where}.allocatable", "must list the node's resources")
    requested = read.resources(group.get("requested"), f"{where}.requested")
    taints = _taints(read, group.get("taints"), f"{where}.taints")
    unschedulable = read.flag(group.get("unschedulable"), f"{where}.unschedulable", default=False)
    ready = read.flag(group.get("ready"), f"{where}.ready", default=True)
    devices: tuple[int, ...] | None = None
    if group.get("gpuDevices") is not None:
        devices = tuple(
            read.count(v, at, maximum=MAX_COUNT)
            for at, v in read.entries(
                group["gpuDevices"],
                f"{where}.gpuDevices",
                message="must be a list of free thousandths per GPU device",
            )
        )
        if any(not 0 <= d <= 1000 for d in devices):
            read.fail(f"{where}.gpuDevices", "each device's free share must be between 0 and 1000")
    device_groups = _device_groups(read, group.get("devices"), f"{where}.devices")
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


def _device_groups(read: Decoder, value: object, where: str) -> tuple[DeviceGroup, ...]:
    groups = []
    for at, item in read.entries(value, where, message="must be a list of DRA device groups"):
        if not isinstance(item, Mapping):
            read.fail(at, "must be a mapping")
        driver = read.string(item.get("driver"), f"{at}.driver", required=True)
        resource = item.get("resource") or ""
        if not isinstance(resource, str):
            read.fail(f"{at}.resource", "must be a string")
        count = read.count(item.get("count", 0), f"{at}.count", maximum=MAX_COUNT)
        allocated = read.count(item.get("allocated", 0), f"{at}.allocated", maximum=MAX_COUNT)
        if allocated > count:
            read.fail(f"{at}.allocated", f"{allocated} allocated of {count} devices")
        attributes = read.labels(item.get("attributes"), f"{at}.attributes")
        groups.append(DeviceGroup(driver, resource, count, allocated, attributes))
    return tuple(groups)


#: Largest count a snapshot may give (nodes of a group, pending pods): far above any cluster.
MAX_COUNT = 100_000


def parse_labels(
    value: object, *, source: str, field: str, error: type[InputError] = SnapshotError
) -> dict[str, str]:
    """A ``{string: string}`` map (labels) from data; numbers and booleans become their JSON
    text. Raises ``error`` naming ``source`` and ``field``."""
    return Decoder(error, source).labels(value, field)


def parse_taints(
    value: object, *, source: str, field: str, error: type[InputError] = SnapshotError
) -> tuple[Taint, ...]:
    """Taints from a ``[{key, value, effect}]`` list (effect defaults to ``NoSchedule``).
    Raises ``error`` naming ``source`` and ``field``."""
    return _taints(Decoder(error, source), value, field)


def _taints(read: Decoder, value: object, field: str) -> tuple[Taint, ...]:
    taints = []
    for at, item in read.entries(value, field, message="must be a list of {key, value, effect}"):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            read.fail(at, "must be a mapping with a key")
        effect = item.get("effect", "NoSchedule")
        if effect not in _TAINT_EFFECTS:
            read.fail(
                f"{at}.effect", f"effect {effect!r} is not one of {', '.join(_TAINT_EFFECTS)}"
            )
        taints.append(Taint(key=item["key"], value=str(item.get("value") or ""), effect=effect))
    return tuple(taints)


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
    if fleet.topologies:
        data["topologies"] = [dict(t) for t in fleet.topologies]
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
