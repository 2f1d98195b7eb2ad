"""From a captured :class:`placer.model.Cluster` back to API objects (pure).

The virtual fleet serves a snapshot through real API servers, so it needs Node and Pod objects
that, gathered again with :mod:`placer.fleet.capacity`'s rules, give the snapshot's capacity
back exactly:

* one **Node** per node: ``status.allocatable`` (and ``capacity``) = the node's allocatable,
  labels, taints, ``spec.unschedulable``, a ``Ready`` condition matching ``ready``, and — for
  nodes that model GPU sharing — the ``placer.dev/gpu-devices`` annotation: each device's
  free share *before the node's pods* (:func:`device_baseline`: the snapshot's free devices
  with those its usage pods' whole GPUs hold given back), so that gathering, which takes the
  bound pods' GPUs off it (:mod:`placer.fleet.capacity`), gives the snapshot's devices back —
  and keeps counting the pods bound later, which the annotation never has to follow. The
  shares of shared devices stay in the annotation: the usage pods ask for them as
  ``placer.dev/gpu-milli``, which is counted but takes no device. The whole GPUs in use are
  given back on the first devices at 0, and gathering takes the first devices at 1000: a
  snapshot whose used devices come first reads back in the same order, others as the same
  devices in another order (devices are interchangeable); a snapshot with more whole GPUs in
  use than devices at 0 reads back with fewer free devices (never more);
* **usage pods**: a snapshot only knows the *sum* of requests on a node and the pod count
  (``requested["pods"]``), so that many Running pods are bound to the node and the sum is split
  between them (the first takes the remainder). A node with requests but a pod count of 0 gets
  one pod (its ``pods`` count then reads 1);
* **pending pods**: ``pending.count`` unbound Pending pods sharing ``pending.requests``;
* **DRA devices** (``Node.devices``): per node and driver a ResourceSlice (pool = the node,
  devices ``<driver>-<n>`` with the group's attributes), a DeviceClass per driver, and for the
  allocated devices a ResourceClaim in the usage namespace whose ``status.allocation`` holds
  them. The node's allocatable and its usage pods leave those devices out, since gathering
  adds them back from the slices and claims.

What kubectl shows of them is what a kubelet would report: a node has an ``InternalIP`` and
``nodeInfo`` (kubelet version, OS image ``placer virtual node``, kernel and runtime marked
virtual); a Running pod (:func:`running_pod_status`, also used for the pods the virtual
frameworks create) has a ``podIP``, its node's ``hostIP`` and every container started and
ready. Addresses are private IPv4 addresses derived from the names (:func:`virtual_ip`).

Usage pods live in namespace :data:`USAGE_NAMESPACE`, carry label :data:`USAGE_LABEL` and
tolerate every taint (they are already bound; tolerations only document that).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from placer.fleet.capacity import GPU_DEVICES_ANNOTATION
from placer.fleet.devices import DRA_API_VERSION
from placer.model import Cluster, Node
from placer.quantity import GPU, PODS, format_quantity
from placer.timestamps import rfc3339

__all__ = [
    "KUBELET_VERSION",
    "USAGE_LABEL",
    "USAGE_NAMESPACE",
    "cluster_objects",
    "device_baseline",
    "device_objects",
    "node_object",
    "running_pod_status",
    "split",
    "virtual_ip",
]

USAGE_NAMESPACE = "placer-usage"
USAGE_LABEL = "placer.dev/usage"
_IMAGE = "registry.k8s.io/pause:3.10"
#: the kubelet version virtual nodes report (the loopback API server says 1.31).
KUBELET_VERSION = "v1.31.0"


def virtual_ip(name: str, prefix: str) -> str:
    """A stable private IPv4 address under ``prefix`` (two octets, ``10.0`` for nodes,
    ``10.244`` for pods) for a virtual node or pod, derived from its name."""
    digest = zlib.crc32(name.encode())
    return f"{prefix}.{(digest >> 8) & 0xFF}.{max(1, digest & 0xFF)}"


def running_pod_status(spec: Mapping[str, Any], *, node: str, pod: str, now: str) -> dict[str, Any]:
    """The status a kubelet reports for a started pod: Running, Ready, every container
    running and ready, the pod's and its node's addresses."""
    pod_ip = virtual_ip(pod, "10.244")
    containers = [c for c in spec.get("containers") or () if isinstance(c, Mapping)]
    return {
        "phase": "Running",
        "startTime": now,
        "hostIP": virtual_ip(node, "10.0"),
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "conditions": [
            {"type": condition, "status": "True", "lastTransitionTime": now}
            for condition in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
        "containerStatuses": [
            {
                "name": str(c.get("name", "")),
                "image": str(c.get("image", "")),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in containers
        ],
    }


def split(total: Mapping[str, int], parts: int) -> list[dict[str, int]]:
    """``total`` split into ``parts`` vectors that sum to it (the first takes the remainder)."""
    if parts <= 0:
        return []
    shares: list[dict[str, int]] = [{} for _ in range(parts)]
    for name, amount in total.items():
        if amount <= 0:
            continue
        base = amount // parts
        for index, share in enumerate(shares):
            value = amount - base * (parts - 1) if index == 0 else base
            if value:
                share[name] = value
    return shares


def _without_devices(amounts: Mapping[str, int], node: Node, *, allocated: bool) -> dict[str, int]:
    """``amounts`` less the node's mapped DRA devices (all of them, or the allocated ones)."""
    out = dict(amounts)
    for group in node.devices:
        if group.resource and group.resource in out:
            left = out[group.resource] - (group.allocated if allocated else group.count)
            if left > 0:
                out[group.resource] = left
            else:
                del out[group.resource]
    return out


def device_baseline(node: Node) -> tuple[int, ...] | None:
    """The ``placer.dev/gpu-devices`` annotation of ``node`` (module docstring): its free
    devices with the whole GPUs of its usage pods given back, on its first devices at 0
    (``None`` for a node that does not model devices)."""
    if node.gpu_devices is None:
        return None
    devices = list(node.gpu_devices)
    whole = _without_devices(node.requested, node, allocated=True).get(GPU, 0)
    used = [i for i, left in enumerate(devices) if left <= 0]
    for i in used[: max(0, whole)]:
        devices[i] = 1000
    return tuple(devices)


def node_object(node: Node) -> dict[str, Any]:
    """The Node API object for ``node`` (its DRA devices are served as ResourceSlices)."""
    allocatable = _quantities(_without_devices(node.allocatable, node, allocated=False))
    metadata: dict[str, Any] = {"name": node.name, "labels": dict(node.labels)}
    baseline = device_baseline(node)
    if baseline is not None:
        devices = ",".join(str(d) for d in baseline)
        metadata["annotations"] = {GPU_DEVICES_ANNOTATION: devices}
    spec: dict[str, Any] = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [
            {"key": t.key, "value": t.value, "effect": t.effect}
            if t.value
            else {"key": t.key, "effect": t.effect}
            for t in node.taints
        ]
    ready = {
        "type": "Ready",
        "status": "True" if node.ready else "False",
        "reason": "KubeletReady" if node.ready else "KubeletNotReady",
        "message": "virtual node",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [ready],
            "addresses": [
                {"type": "InternalIP", "address": virtual_ip(node.name, "10.0")},
                {"type": "Hostname", "address": node.name},
            ],
            "nodeInfo": {
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "osImage": "placer virtual node",
                "kernelVersion": "virtual",
                "containerRuntimeVersion": "virtual://placer",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def cluster_objects(cluster: Cluster) -> Iterator[dict[str, Any]]:
    """Every object to create for ``cluster``: the usage namespace, nodes, then pods."""
    yield {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": USAGE_NAMESPACE, "labels": {USAGE_LABEL: "true"}},
    }
    for node in cluster.nodes:
        yield node_object(node)
    yield from device_objects(cluster)
    for node in cluster.nodes:
        requested = _without_devices(node.requested, node, allocated=True)
        requests = {k: v for k, v in requested.items() if k != PODS and v > 0}
        count = node.requested.get(PODS, 0) or (1 if requests else 0)
        for index, share in enumerate(split(requests, count)):
            yield _pod(f"usage-{node.name}-{index}", share, node=node.name)
    pending = cluster.pending
    count = pending.count or (1 if any(v > 0 for v in pending.requests.values()) else 0)
    for index, share in enumerate(split(pending.requests, count)):
        yield _pod(f"pending-{index}", share, node=None)


def _pod(name: str, requests: Mapping[str, int], *, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "usage",
                "image": _IMAGE,
                "resources": {"requests": _quantities(requests)},
            }
        ],
        "tolerations": [{"operator": "Exists"}],
    }
    if node:
        spec["nodeName"] = node
    status = (
        running_pod_status(spec, node=node, pod=name, now=rfc3339())
        if node
        else {"phase": "Pending"}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": USAGE_NAMESPACE,
            "labels": {USAGE_LABEL: "true"},
        },
        "spec": spec,
        "status": status,
    }


def device_objects(cluster: Cluster) -> Iterator[dict[str, Any]]:
    """DeviceClasses, ResourceSlices and allocated ResourceClaims for the nodes' DRA devices."""
    drivers = sorted({g.driver for n in cluster.nodes for g in n.devices})
    for driver in drivers:
        yield {
            "apiVersion": DRA_API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
    for node in cluster.nodes:
        for driver in sorted({g.driver for g in node.devices}):
            devices: list[dict[str, Any]] = []
            taken: list[str] = []
            prefix = driver.split(".")[0]
            for group in (g for g in node.devices if g.driver == driver):
                for i in range(group.count):
                    name = f"{prefix}-{len(devices)}"
                    attributes = {k: {"string": v} for k, v in sorted(group.attributes.items())}
                    devices.append({"name": name, "attributes": attributes})
                    if i < group.allocated:
                        taken.append(name)
            slug = f"{node.name}-{driver}".replace(".", "-")
            yield {
                "apiVersion": DRA_API_VERSION,
                "kind": "ResourceSlice",
                "metadata": {"name": slug},
                "spec": {
                    "driver": driver,
                    "nodeName": node.name,
                    "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
            if taken:
                yield _usage_claim(f"usage-{slug}", driver, node.name, taken)


def _usage_claim(name: str, driver: str, node: str, devices: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": DRA_API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": USAGE_NAMESPACE, "labels": {USAGE_LABEL: "true"}},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "devices",
                        "exactly": {"deviceClassName": driver, "count": len(devices)},
                    }
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "devices", "driver": driver, "pool": node, "device": device}
                        for device in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            }
        },
    }


def _quantities(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in sorted(resources.items())}
