"""From API objects to capacity: Node and Pod dicts in, :class:`placer.model.Cluster` out.

Pure functions over raw API dicts (as listed by :mod:`placer.kube`); no I/O, so the rules are
testable on hand-written objects and the same code serves live gathering and tests.

Free capacity follows what kube-scheduler counts, for **every** resource a node advertises
(cpu, memory, ephemeral-storage, hugepages, pods, ``nvidia.com/gpu``, MIG profiles, any other
extended resource):

* ``allocatable`` is ``status.allocatable`` (``status.capacity`` when a node reports none);
* ``requested`` sums the effective requests (:func:`placer.podspec.pod_requests`: init
  containers, sidecars, pod-level resources, overhead) of the pods **bound** to the node
  (``spec.nodeName``) whose phase is neither ``Succeeded`` nor ``Failed`` — the scheduler's own
  pod informer uses exactly the field selector ``status.phase!=Succeeded,status.phase!=Failed``;
  ``requested["pods"]`` is their count;
* **terminating** pods (``metadata.deletionTimestamp`` set, phase still Running/Pending) stay
  counted: the scheduler keeps them in its cache and the kubelet holds their resources until
  the containers have stopped and the pod object is gone;
* bound pods of nodes that no longer exist are ignored (as the scheduler does);
* pods without a node are **pending**: counted apart in :class:`placer.model.PendingPods`
  (pressure, not usage); pending pods already being deleted are left out;
* a node is ``ready`` when its ``Ready`` condition is ``True`` (no condition: not ready) and
  ``unschedulable`` when ``spec.unschedulable`` (cordoned).

GPUs that pods hold without asking for them in their resources are counted too, by the
accelerator table (:mod:`placer.accelerators`):

* a bound pod with a **fraction annotation** (Run:ai / KAI ``gpu-fraction``, ``gpu-memory``)
  takes its share of one device: the node gets a per-device model (``gpu_devices``) and the
  shares are packed onto its devices, pods with the same GPU-group label (``runai-gpu-group``)
  on one device, largest first, each on the fullest device it fits on; the pods of the
  table's reservation namespaces (which hold those shared devices whole on the scheduler's
  behalf) are not counted again. A share on several devices counts whole devices;
* a node with the annotation ``placer.dev/gpu-devices`` (:data:`GPU_DEVICES_ANNOTATION`,
  ``"1000,1000,500,0"``) models its GPUs per device, and the annotation is the devices'
  **baseline**: the free thousandths of each device *before the node's pods*, i.e. with only
  the use no pod shows taken off (a device held outside Kubernetes or broken reads 0; most
  nodes read ``1000`` for every device). Its free devices are the baseline less its bound
  non-terminal pods (:func:`with_gpu_use`): the whole GPUs they hold (``nvidia.com/gpu``, and
  fractions of a whole device or more) each take a device still at 1000, lowest index first,
  then the fractional shares are packed as above. The annotation is written once and never
  has to follow the pods (a virtual fleet writes it when it seeds a node). A pod asking for
  ``placer.dev/gpu-milli`` as a resource (the usage pods a virtual fleet seeds for a
  snapshot's shared devices) counts in ``requested`` but takes no device: the baseline holds
  that use;
* **DRA devices** (ResourceSlices and ResourceClaims, :mod:`placer.fleet.devices`) are added
  to the node's allocatable and requested amounts by :func:`cluster_from_api`.

Cluster labels are completed from node labels (configured labels always win):
``region`` (the most common ``topology.kubernetes.io/region``), ``zones`` (the distinct
``topology.kubernetes.io/zone`` values, comma-separated) and ``gpu-products`` (the distinct GPU
product labels, comma-separated; see :data:`GPU_PRODUCT_LABELS`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from placer.accelerators import AcceleratorTable, default_accelerators, fraction_share
from placer.fleet.devices import with_devices
from placer.model import GPU_SHARE, Cluster, DeviceGroup, Node, PendingPods, Taint
from placer.objects import is_deleting, meta, name_of
from placer.podspec import pod_requests
from placer.quantity import GPU, PODS, to_canonical

__all__ = [
    "GPU_DEVICES_ANNOTATION",
    "GPU_PRODUCT_LABELS",
    "NON_TERMINAL_PODS",
    "PodTally",
    "PodUsage",
    "cluster_from_api",
    "complete_labels",
    "gpu_models",
    "gpu_product",
    "node_from_api",
    "pod_usage",
    "with_gpu_use",
]

log = logging.getLogger(__name__)

#: The field selector kube-scheduler's pod informer uses: pods that still hold resources.
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
#: Node labels naming the GPU model, in order of preference.
GPU_PRODUCT_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "k8s.amazonaws.com/accelerator",
    "amd.com/gpu.product-name",
)
#: Node annotation with each GPU device's free thousandths before the node's pods are counted
#: (``"1000,1000,500,0"``), for fleets that model GPU sharing: the baseline the bound pods'
#: GPUs are taken from (module docstring, :func:`with_gpu_use`; virtual fleets write it).
GPU_DEVICES_ANNOTATION = "placer.dev/gpu-devices"
REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
_TERMINAL = ("Succeeded", "Failed")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class PodTally:
    """Running sums of pod requests per node, fed page by page (pages can then be dropped).

    Attributes:
        requested: node name -> summed requests of its bound non-terminal pods (with ``pods``).
        pending_count / pending_requests: pods waiting for a node.
        terminating: bound pods being deleted (counted in ``requested``).
    """

    def __init__(self, accelerators: AcceleratorTable | None = None) -> None:
        self.requested: dict[str, dict[str, int]] = {}
        self.pending_count = 0
        self.pending_requests: dict[str, int] = {}
        self.terminating = 0
        #: node -> (GPU group, thousandths of one device) of its bound fractional pods.
        self.shares: dict[str, list[tuple[str, int]]] = {}
        self.table = accelerators or default_accelerators()

    def add(self, pod: Mapping[str, Any]) -> None:
        """Count one pod (see the module docstring for the rules)."""
        usage = pod_usage(pod, self.table)
        if usage is not None:
            self.count(usage)

    def count(self, usage: PodUsage) -> None:
        """Count one pod's :class:`PodUsage`."""
        if usage.node:
            total = self.requested.get(usage.node)
            if total is None:
                total = self.requested[usage.node] = {}
            for name, amount in usage.requests.items():
                total[name] = total.get(name, 0) + amount
            if usage.deleting:
                self.terminating += 1
            if usage.share is not None:
                self.shares.setdefault(usage.node, []).append(usage.share)
        else:
            self.pending_count += 1
            for name, amount in usage.requests.items():
                self.pending_requests[name] = self.pending_requests.get(name, 0) + amount

    def add_all(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """Count every pod of ``pods``."""
        for pod in pods:
            self.add(pod)

    @property
    def pending(self) -> PendingPods:
        return PendingPods(count=self.pending_count, requests=dict(self.pending_requests))


@dataclass(frozen=True)
class PodUsage:
    """What one non-terminal pod counts for (see the module docstring), before summing.

    Attributes:
        node: the node it is bound to (``""``: pending).
        requests: its effective requests; bound, with ``pods`` = 1 and its GPU share (whole
            devices as ``nvidia.com/gpu``, a fraction as ``GPU_SHARE``); pending, with its
            share added the same way.
        deleting: a bound pod being deleted (still counted).
        share: a bound pod's ``(GPU group, thousandths of one device)``, packed onto the node's
            devices by :func:`cluster_from_api`.
    """

    node: str
    requests: dict[str, int]
    deleting: bool = False
    share: tuple[str, int] | None = None


def pod_usage(pod: Mapping[str, Any], table: AcceleratorTable) -> PodUsage | None:
    """What ``pod`` counts for, or ``None`` when it counts for nothing (a finished pod, a
    pending pod being deleted). :class:`PodTally` sums these; so does the controller's
    capacity cache, pod by pod as they change."""
    status = pod.get("status") or {}
    if status.get("phase") in _TERMINAL:
        return None
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    metadata = meta(pod)
    deleting = is_deleting(pod)
    if not node and deleting:
        return None
    requests = pod_requests(spec, strict=False)  # validated by the API server
    share = _share(metadata, requests, table)
    if metadata.get("namespace") in table.reservation_namespaces:
        requests.pop(GPU, None)  # holds a shared device: its fractional pods count it
    if node:
        requests[PODS] = requests.get(PODS, 0) + 1
        fraction: tuple[str, int] | None = None
        if share is not None:
            group, devices, milli = share
            if devices:
                requests[GPU] = requests.get(GPU, 0) + devices
            else:
                requests[GPU_SHARE] = requests.get(GPU_SHARE, 0) + milli
                fraction = (group, milli)
        return PodUsage(str(node), requests, deleting, fraction)
    if share is not None:
        _, devices, milli = share
        extra = {GPU: devices} if devices else {GPU_SHARE: milli}
        for name, amount in extra.items():
            requests[name] = requests.get(name, 0) + amount
    return PodUsage("", requests)


def _share(
    metadata: Mapping[str, Any], requests: Mapping[str, int], table: AcceleratorTable
) -> tuple[str, int, int] | None:
    """``(GPU group, whole devices, thousandths of one device)`` of a fractional pod."""
    annotations = metadata.get("annotations") or {}
    if not annotations or requests.get(GPU, 0) > 0:
        return None
    try:
        found = fraction_share(annotations, table)
    except ValueError as exc:
        log.warning(
            "pod %s/%s: ignoring its GPU fraction annotation: %s",
            metadata.get("namespace"),
            metadata.get("name"),
            exc,
        )
        return None
    if found is None:
        return None
    _, _, devices, milli = found
    labels = metadata.get("labels") or {}
    group = labels.get(table.gpu_group_label) if table.gpu_group_label else None
    key = f"group:{group}" if group else f"pod:{metadata.get('namespace')}/{metadata.get('name')}"
    if devices > 1 or milli >= 1000:
        return key, devices, 0
    return key, 0, milli


def node_from_api(obj: Mapping[str, Any], requested: Mapping[str, int] | None = None) -> Node:
    """A :class:`Node` from a Node object and the requests of its bound pods."""
    metadata = meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = name_of(obj)
    allocatable = _resources(status.get("allocatable") or status.get("capacity"), name)
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    taints = []
    for item in spec.get("taints") or ():
        if isinstance(item, Mapping) and item.get("key") and item.get("effect") in _EFFECTS:
            taints.append(Taint(str(item["key"]), str(item.get("value") or ""), item["effect"]))
    return Node(
        name=name,
        allocatable=allocatable,
        requested=dict(requested or {}),
        labels=labels,
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        ready=_ready(status.get("conditions")),
        gpu_devices=_devices(metadata.get("annotations"), name),
    )


def cluster_from_api(
    name: str,
    nodes: Iterable[Mapping[str, Any] | Node],
    tally: PodTally,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    devices: Mapping[str, Sequence[DeviceGroup]] | None = None,
) -> Cluster:
    """A reachable :class:`Cluster` from its nodes, the tally of its pods and its DRA devices
    per node (:func:`placer.fleet.devices.node_device_groups`).

    ``nodes`` are Node API objects, or :class:`Node` values already read from them with
    :func:`node_from_api` (gathering converts each page at once: a real Node object, with its
    image list, is many times the size of what placer keeps).
    """
    groups = devices or {}
    built = sorted(
        (
            with_devices(_with_requests(node, tally), groups.get(_node_name(node), ()))
            for node in nodes
        ),
        key=lambda n: n.name,
    )
    return Cluster(
        name=name,
        nodes=tuple(built),
        labels=complete_labels(labels or {}, built),
        taints=tuple(taints),
        reachable=True,
        pending=tally.pending,
    )


def _node_name(node: Mapping[str, Any] | Node) -> str:
    return node.name if isinstance(node, Node) else name_of(node)


def _with_requests(node: Mapping[str, Any] | Node, tally: PodTally) -> Node:
    if isinstance(node, Node):
        built = replace(node, requested=dict(tally.requested.get(node.name, {})))
    else:
        built = node_from_api(node, tally.requested.get(name_of(node)))
    return with_gpu_use(built, tally.shares.get(built.name, ()))


def with_gpu_use(node: Node, shares: Sequence[tuple[str, int]] = ()) -> Node:
    """``node`` (as :func:`node_from_api` read it, with its pods' ``requested``) with the GPU
    devices its pods use taken off (module docstring).

    A node with the :data:`GPU_DEVICES_ANNOTATION` (``gpu_devices`` = the baseline): its whole
    GPUs (``requested[nvidia.com/gpu]``) take devices at 1000, lowest index first, then
    ``shares`` (``(GPU group, thousandths)`` of its fractional pods) are packed. A node without
    it gets a device model only for shares: its whole GPUs are the last devices, at 0.
    """
    if node.gpu_devices is not None:
        devices = list(node.gpu_devices)
        whole = node.requested.get(GPU, 0)
        idle = [i for i, left in enumerate(devices) if left >= 1000]
        for i in idle[:whole]:
            devices[i] = 0
        if whole > len(idle):
            log.warning(
                "node %s: its pods hold %d whole GPUs, %d devices are free in %s",
                node.name,
                whole,
                len(idle),
                GPU_DEVICES_ANNOTATION,
            )
    elif shares:
        total = node.allocatable.get(GPU, 0)
        free = max(0, min(total, total - node.requested.get(GPU, 0)))
        devices = [1000] * free + [0] * (total - free)
    else:
        return node
    by_group: dict[str, int] = {}
    for group, milli in shares:
        by_group[group] = by_group.get(group, 0) + milli
    for group, milli in sorted(by_group.items(), key=lambda item: (-item[1], item[0])):
        fitting = [i for i, left in enumerate(devices) if left >= milli]
        if fitting:
            chosen = min(fitting, key=lambda i: (devices[i], i))
        elif devices:
            chosen = max(range(len(devices)), key=lambda i: (devices[i], -i))
            log.warning(
                "node %s: GPU shares %s (%d/1000) exceed the free share of any device",
                node.name,
                group,
                milli,
            )
        else:
            log.warning("node %s: GPU shares %s on a node without GPUs", node.name, group)
            continue
        devices[chosen] = max(0, devices[chosen] - milli)
    return replace(node, gpu_devices=tuple(devices))


def gpu_product(node: Node) -> str:
    """The node's GPU model from its labels, else the ``productName`` of its DRA GPUs (``""``
    when neither says)."""
    for key in GPU_PRODUCT_LABELS:
        value = node.labels.get(key)
        if value:
            return value
    for group in node.devices:
        if group.resource == GPU and group.attributes.get("productName"):
            return group.attributes["productName"]
    return ""


def gpu_models(nodes: Iterable[Node]) -> dict[str, int]:
    """GPUs per model (allocatable ``nvidia.com/gpu``); unlabelled GPUs count as ``unknown``."""
    models: dict[str, int] = {}
    for node in nodes:
        count = node.allocatable.get(GPU, 0)
        if count > 0:
            model = gpu_product(node) or "unknown"
            models[model] = models.get(model, 0) + count
    return dict(sorted(models.items()))


def complete_labels(given: Mapping[str, str], nodes: Sequence[Node]) -> dict[str, str]:
    """Cluster labels: those derived from node labels, overridden by ``given``."""
    labels: dict[str, str] = {}
    regions = Counter(n.labels[REGION_LABEL] for n in nodes if n.labels.get(REGION_LABEL))
    if regions:
        # most common; ties broken by name for a stable answer
        labels["region"] = min(regions, key=lambda r: (-regions[r], r))
    zones = sorted({n.labels[ZONE_LABEL] for n in nodes if n.labels.get(ZONE_LABEL)})
    if zones:
        labels["zones"] = ",".join(zones)
    products = sorted({p for p in (gpu_product(n) for n in nodes) if p})
    if products:
        labels["gpu-products"] = ",".join(products)
    labels.update(given)
    return dict(sorted(labels.items()))


def _ready(conditions: object) -> bool:
    if not isinstance(conditions, list):
        return False
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _resources(values: object, node: str) -> dict[str, int]:
    if not isinstance(values, Mapping):
        return {}
    result: dict[str, int] = {}
    for resource, quantity in values.items():
        try:
            result[str(resource)] = to_canonical(str(resource), quantity)
        except ValueError:
            log.warning("node %s: ignoring %s: unreadable quantity %r", node, resource, quantity)
    return result


def _devices(annotations: object, node: str) -> tuple[int, ...] | None:
    if not isinstance(annotations, Mapping) or GPU_DEVICES_ANNOTATION not in annotations:
        return None
    text = str(annotations[GPU_DEVICES_ANNOTATION])
    try:
        devices = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        devices = ()
    if not devices or any(not 0 <= d <= 1000 for d in devices):
        log.warning("node %s: ignoring malformed %s %r", node, GPU_DEVICES_ANNOTATION, text)
        return None
    return devices
