"""A member's capacity kept current object by object, for the controller's watches.

:func:`placer.fleet.gather.gather_cluster` lists a member's nodes, pods and DRA objects and
builds its :class:`placer.model.Cluster` in one go. :class:`LiveCluster` builds the same
``Cluster`` from the same objects given one change at a time (a watch's events): it keeps each
node as read by :func:`~placer.fleet.capacity.node_from_api`, each pod's
:class:`~placer.fleet.capacity.PodUsage` by node, and the ResourceSlices and ResourceClaims; a
change marks the nodes it touches, and :meth:`LiveCluster.cluster` rebuilds only those (the
``Cluster`` is reused whole while nothing changed). The counting is the gather's own
(:func:`~placer.fleet.capacity.pod_usage`, :func:`~placer.fleet.capacity.cluster_from_api`'s
per-node steps, :func:`~placer.fleet.devices.node_device_groups`), so that both give equal
clusters node by node (``tests/fleet/test_livecluster.py`` checks it after random churn).

Pods and nodes are kept in the compact forms of :func:`compact_pod` and :func:`compact_node`
(what counting and the in-flight ledger read of them), not as listed. No I/O; one lock, so
that watch threads may feed it while another thread reads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from placer.accelerators import AcceleratorTable
from placer.fleet.capacity import (
    PodUsage,
    complete_labels,
    node_from_api,
    pod_usage,
    with_gpu_use,
)
from placer.fleet.devices import node_device_groups, with_devices
from placer.model import Cluster, DeviceGroup, Node, PendingPods, Taint
from placer.objects import meta

__all__ = [
    "LiveCluster",
    "ObjectKey",
    "add_room",
    "compact_node",
    "compact_pod",
    "usable_room",
]

ObjectKey = tuple[str, str]
#: annotations that are large and never counted (kept out of :func:`compact_pod`).
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "deletionTimestamp",
    "labels",
    "ownerReferences",
)
_POD_SPEC = ("nodeName", "resources", "overhead")
_CONTAINER = ("name", "resources", "restartPolicy")
_CONDITION = ("type", "status", "reason", "message", "lastTransitionTime")


def usable_room(node: Node) -> dict[str, int]:
    """What ``node`` adds to :meth:`Cluster.free <placer.model.Cluster.free>` (usable nodes
    only, nothing below zero)."""
    if not node.usable:
        return {}
    return {name: max(amount, 0) for name, amount in node.free.items()}


def add_room(total: dict[str, int], room: Mapping[str, int], sign: int = 1) -> None:
    """``total`` += ``sign`` × ``room``, per resource."""
    for name, amount in room.items():
        total[name] = total.get(name, 0) + sign * amount


def compact_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What is read of a pod (capacity, the in-flight ledger's observation, owners): identity,
    owners, labels, annotations, node, phase and the containers' resources."""
    metadata_in = meta(pod)
    spec = pod.get("spec") or {}
    metadata = {k: metadata_in[k] for k in _METADATA if k in metadata_in}
    annotations = metadata_in.get("annotations")
    if isinstance(annotations, Mapping) and annotations:
        metadata["annotations"] = {
            k: v for k, v in annotations.items() if k not in _DROPPED_ANNOTATIONS
        }
    small: dict[str, Any] = {k: spec[k] for k in _POD_SPEC if k in spec}
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        if isinstance(items, list):
            small[field] = [
                {k: c[k] for k in _CONTAINER if k in c} if isinstance(c, Mapping) else c
                for c in items
            ]
    status = pod.get("status") or {}
    compact: dict[str, Any] = {"metadata": metadata, "spec": small}
    if isinstance(status, Mapping) and "phase" in status:
        compact["status"] = {"phase": status["phase"]}
        if status["phase"] == "Pending":  # why it waits, and since when (stuck work moves)
            scheduled = [
                {k: c[k] for k in _CONDITION if k in c}
                for c in status.get("conditions") or ()
                if isinstance(c, Mapping) and c.get("type") == "PodScheduled"
            ]
            if scheduled:
                compact["status"]["conditions"] = scheduled
            if "creationTimestamp" in metadata_in:
                metadata["creationTimestamp"] = metadata_in["creationTimestamp"]
    return compact


def compact_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`~placer.fleet.capacity.node_from_api` reads of a node (a real Node, with
    its image list, is many times that): identity, labels, annotations, taints, cordon,
    allocatable, capacity and conditions."""
    metadata_in = meta(node)
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    metadata = {
        k: metadata_in[k] for k in ("name", "uid", "resourceVersion", "labels") if k in metadata_in
    }
    annotations = metadata_in.get("annotations")
    if isinstance(annotations, Mapping) and annotations:
        metadata["annotations"] = {
            k: v for k, v in annotations.items() if k not in _DROPPED_ANNOTATIONS
        }
    compact: dict[str, Any] = {
        "metadata": metadata,
        "spec": {k: spec[k] for k in ("unschedulable", "taints") if k in spec},
    }
    if isinstance(status, Mapping):
        compact["status"] = {
            k: status[k] for k in ("allocatable", "capacity", "conditions") if k in status
        }
    return compact


class LiveCluster:
    """One member's nodes, pods and DRA objects, and its capacity built from them.

    Args:
        name: the member's name.
        accelerators: how GPU fractions and DRA devices are counted (the gather's table).
    """

    def __init__(self, name: str, accelerators: AcceleratorTable) -> None:
        self.name = name
        self.table = accelerators
        self._lock = threading.Lock()
        #: node name -> the node as read, nothing requested.
        self._nodes: dict[str, Node] = {}
        #: pod -> (its compact form, what it counts for).
        self._pods: dict[ObjectKey, tuple[dict[str, Any], PodUsage | None]] = {}
        #: namespace -> pod name -> compact pod.
        self._by_namespace: dict[str, dict[str, dict[str, Any]]] = {}
        #: node name -> pod -> usage of the pods bound to it.
        self._by_node: dict[str, dict[ObjectKey, PodUsage]] = {}
        self._pending: dict[ObjectKey, PodUsage] = {}
        self._slices: dict[ObjectKey, Mapping[str, Any]] = {}
        self._claims: dict[ObjectKey, Mapping[str, Any]] = {}
        self._groups: dict[str, tuple[DeviceGroup, ...]] = {}
        self._devices_changed = False
        #: node name -> the node built (requests, shares, devices).
        self._built: dict[str, Node] = {}
        self._dirty: set[str] = set()
        self._pending_pods = PendingPods()
        self._pending_changed = False
        self._cluster: Cluster | None = None
        #: the built nodes' names, sorted (``None``: nodes came or went since).
        self._names: list[str] | None = None
        #: ``Cluster.free()`` of the cluster built, kept node by node.
        self._room: dict[str, int] = {}
        #: the labels derived from the nodes, for the configured labels of the last call.
        self._labels: dict[str, str] | None = None
        self._cluster_key: tuple[tuple[tuple[str, str], ...], tuple[Taint, ...]] | None = None
        #: changes applied since this object was made (nodes, pods, DRA objects).
        self.changes = 0

    # -- changes ---------------------------------------------------------------------------------

    def set_node(self, obj: Mapping[str, Any] | None, *, name: str = "") -> None:
        """A Node object as now (``None``: the node ``name`` is gone)."""
        with self._lock:
            self.changes += 1
            self._labels = None  # (node labels make cluster labels)
            if obj is None:
                self._nodes.pop(name, None)
                self._dirty.add(name)
                self._names = None
                return
            node = node_from_api(obj)
            if node.name not in self._nodes:
                self._names = None
            self._nodes[node.name] = node
            self._dirty.add(node.name)

    def set_pod(self, key: ObjectKey, pod: Mapping[str, Any] | None) -> None:
        """A pod as now, in the form of :func:`compact_pod` (``None``: it is gone)."""
        usage = pod_usage(pod, self.table) if pod is not None else None
        with self._lock:
            self.changes += 1
            namespace, name = key
            before = self._pods.pop(key, None)
            if before is not None:
                self._uncount(key, before[1])
                names = self._by_namespace.get(namespace)
                if names is not None:
                    names.pop(name, None)
                    if not names:
                        del self._by_namespace[namespace]
            if pod is None:
                return
            compact = dict(pod)  # (the caller's dict may be reused)
            self._pods[key] = (compact, usage)
            self._by_namespace.setdefault(namespace, {})[name] = compact
            if usage is None:
                return
            if usage.node:
                self._by_node.setdefault(usage.node, {})[key] = usage
                self._dirty.add(usage.node)
            else:
                self._pending[key] = usage
                self._pending_changed = True

    def _uncount(self, key: ObjectKey, usage: PodUsage | None) -> None:
        if usage is None:
            return
        if usage.node:
            on_node = self._by_node.get(usage.node)
            if on_node is not None:
                on_node.pop(key, None)
                if not on_node:
                    del self._by_node[usage.node]
            self._dirty.add(usage.node)
        else:
            self._pending.pop(key, None)
            self._pending_changed = True

    def set_slice(self, key: ObjectKey, obj: Mapping[str, Any] | None) -> None:
        """A ResourceSlice as now (``None``: gone)."""
        with self._lock:
            self.changes += 1
            _put(self._slices, key, obj)
            self._devices_changed = True

    def set_claim(self, key: ObjectKey, obj: Mapping[str, Any] | None) -> None:
        """A ResourceClaim as now (``None``: gone)."""
        with self._lock:
            self.changes += 1
            _put(self._claims, key, obj)
            self._devices_changed = True

    # -- reading ---------------------------------------------------------------------------------

    def pods_in(self, namespace: str) -> list[dict[str, Any]]:
        """The pods of ``namespace`` (compact form), finished ones included."""
        with self._lock:
            return list(self._by_namespace.get(namespace, {}).values())

    def pending_pods(self) -> list[dict[str, Any]]:
        """The member's pods in phase ``Pending`` (compact form: with their ``PodScheduled``
        condition and creation time)."""
        with self._lock:
            return [
                pod
                for pod, _ in self._pods.values()
                if (pod.get("status") or {}).get("phase") == "Pending"
            ]

    @property
    def has_slices(self) -> bool:
        with self._lock:
            return bool(self._slices)

    def cluster(
        self, *, labels: Mapping[str, str] | None = None, taints: Sequence[Taint] = ()
    ) -> Cluster:
        """The reachable :class:`Cluster` as :func:`~placer.fleet.capacity.cluster_from_api`
        builds it from the same objects (nodes changed since the last call are rebuilt)."""
        key = (tuple(sorted((labels or {}).items())), tuple(taints))
        with self._lock:
            if self._devices_changed:
                self._refresh_devices()
            for name in self._dirty:
                old = self._built.pop(name, None)
                if old is not None:
                    add_room(self._room, usable_room(old), -1)
                if name in self._nodes:
                    new = self._built[name] = self._build(name)
                    add_room(self._room, usable_room(new))
                    if old is None or old.devices != new.devices:
                        self._labels = None  # (DRA product names make cluster labels)
            rebuilt = bool(self._dirty) or self._pending_changed
            self._dirty.clear()
            if self._pending_changed:
                self._pending_pods = self._sum_pending()
                self._pending_changed = False
            if self._cluster is not None and not rebuilt and self._cluster_key == key:
                return self._cluster
            if self._names is None:
                self._names = sorted(self._built)
            nodes = tuple(self._built[n] for n in self._names)
            if self._labels is None or self._cluster_key is None or self._cluster_key[0] != key[0]:
                self._labels = complete_labels(labels or {}, nodes)
            self._cluster = Cluster(
                name=self.name,
                nodes=nodes,
                labels=dict(self._labels),
                taints=tuple(taints),
                reachable=True,
                pending=self._pending_pods,
            )
            self._cluster_key = key
            return self._cluster

    def room(self, cluster: Cluster) -> dict[str, int] | None:
        """``cluster.free()`` when ``cluster`` is the one :meth:`cluster` last built (kept
        node by node; ``None`` for any other cluster)."""
        with self._lock:
            if cluster is not self._cluster:
                return None
            return {name: amount for name, amount in self._room.items()}

    def _refresh_devices(self) -> None:
        slices = list(self._slices.values())
        claims = list(self._claims.values()) if slices else []
        groups = node_device_groups(slices, claims, self.table) if slices else {}
        for name in set(groups) | set(self._groups):
            if groups.get(name, ()) != self._groups.get(name, ()):
                self._dirty.add(name)
        self._groups = dict(groups)
        self._devices_changed = False

    def _build(self, name: str) -> Node:
        requested: dict[str, int] = {}
        shares: list[tuple[str, int]] = []
        for usage in (self._by_node.get(name) or {}).values():
            for resource, amount in usage.requests.items():
                requested[resource] = requested.get(resource, 0) + amount
            if usage.share is not None:
                shares.append(usage.share)
        node = with_gpu_use(replace(self._nodes[name], requested=requested), shares)
        return with_devices(node, self._groups.get(name, ()))

    def _sum_pending(self) -> PendingPods:
        requests: dict[str, int] = {}
        for usage in self._pending.values():
            for resource, amount in usage.requests.items():
                requests[resource] = requests.get(resource, 0) + amount
        return PendingPods(count=len(self._pending), requests=requests)


def _put(
    store: dict[ObjectKey, Mapping[str, Any]], key: ObjectKey, obj: Mapping[str, Any] | None
) -> None:
    if obj is None:
        store.pop(key, None)
    else:
        store[key] = obj
