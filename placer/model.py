"""placer's core data model: workloads with their demand, fleets with their capacity, decisions.

Pure data: frozen dataclasses, no I/O, no globals. Every resource amount is an ``int`` in the
canonical unit of :mod:`placer.quantity` (cpu in millicores, everything else in base units).
Mappings held by these objects are never mutated after construction.

The three families:

* **Demand** — :class:`Workload` (one root object: a JobSet, a RayCluster, a Deployment…) made of
  :class:`ComponentDemand` (a component instance: ``replicas`` identical pods of one
  :class:`PodDemand`) and :class:`Gang` (all-or-nothing groups from the definition).
* **Capacity** — :class:`Fleet` of :class:`Cluster` of :class:`Node` with allocatable and
  requested amounts, labels, taints and state.
* **Decision** — :class:`Decision` with :class:`Placement` (workload → cluster, every pod on a
  node) and :class:`Unplaced` (workload → reason per cluster), plus a :class:`DecisionSummary`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from placer.quantity import GPU, PODS, Resources, add

__all__ = [
    "ANNOTATION_AVOID",
    "ANNOTATION_PREFIX",
    "GPU_SHARE",
    "LABEL_CLUSTER",
    "LABEL_GROUP",
    "LABEL_PRIORITY",
    "LABEL_QUEUE",
    "Cluster",
    "ComponentDemand",
    "Decision",
    "DecisionSummary",
    "DeviceGroup",
    "Fleet",
    "Gang",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PendingPods",
    "Placement",
    "PodAssignment",
    "PodDemand",
    "Taint",
    "Toleration",
    "TopologyConstraint",
    "Unplaced",
    "Workload",
    "WorkloadRef",
    "pods_requests",
]

ANNOTATION_PREFIX = "placer.dev/"
#: Workloads sharing a value of this label are placed together in one cluster, all or nothing.
LABEL_GROUP = "placer.dev/group"
#: Integer priority; a higher one is never displaced by a lower one.
LABEL_PRIORITY = "placer.dev/priority"
#: Pin to a cluster by name.
LABEL_CLUSTER = "placer.dev/cluster"
#: clusters a workload must not go to (comma-separated): the controller sets it when it moves
#: a workload whose pods stayed unschedulable there (:mod:`placer.controller.stuck`).
ANNOTATION_AVOID = f"{ANNOTATION_PREFIX}avoid-clusters"
#: why a workload is not placed on a cluster it avoids (solver and snapshot-free decisions).
AVOIDED_REASON = (
    f"moved away from this cluster: its pods stayed unschedulable there ({ANNOTATION_AVOID})"
)
#: Opt a hub object in to the placement controller.
LABEL_QUEUE = "placer.dev/queue"

#: Shared-GPU request: thousandths of ONE GPU device (1..999), as in Alibaba's GPU-sharing
#: scheduler (``gpu-milli``). A pod with this request shares a device with others; it never
#: requests ``nvidia.com/gpu`` at the same time.
GPU_SHARE = "placer.dev/gpu-milli"


# --------------------------------------------------------------------------------------------
# Scheduling constraints (the subset of the pod API placement needs)


@dataclass(frozen=True)
class Taint:
    """A node (or cluster) taint."""

    key: str
    value: str = ""
    #: ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``.
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    """A pod toleration, with Kubernetes' matching rules (see ``tolerates``)."""

    key: str = ""
    #: ``Equal`` (default) or ``Exists``.
    operator: str = "Equal"
    value: str = ""
    #: empty = all effects.
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if not self.key and self.operator != "Exists":
            return False
        return self.value == taint.value


@dataclass(frozen=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` (or ``matchFields``) entry of a node selector term."""

    key: str
    #: ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``.
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeSelectorTerm:
    """A required node-affinity term: all its requirements must hold (AND)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    #: only ``metadata.name`` is supported by Kubernetes here.
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


# --------------------------------------------------------------------------------------------
# Demand


@dataclass(frozen=True)
class WorkloadRef:
    """Identity of a workload's root object."""

    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PodDemand:
    """What one pod asks of a node.

    ``requests`` is the pod's effective request as kube-scheduler computes it (init containers,
    sidecars, pod-level resources and overhead included), in canonical units. It does not contain
    ``pods``: every pod takes one ``pods`` slot of its node implicitly.
    """

    requests: Resources
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: required node affinity: the node must satisfy ANY of these terms (empty = no constraint).
    affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @property
    def gpus(self) -> int:
        """Whole GPUs requested (``nvidia.com/gpu``)."""
        return self.requests.get(GPU, 0)


@dataclass(frozen=True)
class ComponentDemand:
    """``replicas`` identical pods of one component instance (e.g. JobSet ``worker``)."""

    #: component name in the definition (``worker``).
    name: str
    #: instance id (``""`` for a single-instance component; a replicated job name, a Ray group).
    instance: str
    replicas: int
    pod: PodDemand
    #: an *elastic* component (:mod:`placer.definitions.elastic`): it may run any count in
    #: ``[replicas, max_replicas]``, and ``replicas`` is its minimum (the gang's share of
    #: ``minMember``); ``None``: exactly ``replicas``.
    max_replicas: int | None = None

    @property
    def label(self) -> str:
        """``component`` or ``component/instance`` for messages and tables."""
        return f"{self.name}/{self.instance}" if self.instance else self.name

    @property
    def elastic(self) -> bool:
        return self.max_replicas is not None and self.max_replicas > self.replicas


@dataclass(frozen=True)
class Gang:
    """An all-or-nothing group of pods from the definition's gang-scheduling instructions."""

    name: str
    #: component labels (``component`` or ``component/instance``) whose pods belong to the gang.
    members: tuple[str, ...]
    #: pods that must be scheduled together.
    min_member: int


@dataclass(frozen=True)
class TopologyConstraint:
    """Pods to keep inside one topology domain (:mod:`placer.topology`): all pods of the
    ``members`` components within one domain of ``required`` (a node label key; empty: none),
    and within as few domains of ``preferred`` as fit."""

    #: the pod group, sub-group or component it came from, for messages.
    name: str
    #: component labels (``component`` or ``component/instance``) whose pods it covers.
    members: tuple[str, ...]
    required: str = ""
    preferred: str = ""
    #: where it was read (``podGroup.topology of definition 'x'``, an annotation), for messages.
    source: str = ""


@dataclass(frozen=True)
class Workload:
    """One root object and everything placement needs to know about it.

    A workload is placed whole in one cluster: every pod of every component.
    """

    ref: WorkloadRef
    components: tuple[ComponentDemand, ...]
    gangs: tuple[Gang, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: ``placer.dev/priority`` (default 0).
    priority: int = 0
    #: ``placer.dev/group``: co-placement group (all in one cluster or none).
    group: str | None = None
    #: ``placer.dev/cluster``: pinned cluster.
    pinned_cluster: str | None = None
    #: ``placer.dev/avoid-clusters``: clusters it must not go to (moved away from them).
    avoid_clusters: tuple[str, ...] = ()
    #: the pods' ``priorityClassName`` (the first component's that names one), which a
    #: queues file or the hub's PriorityClasses turn into a priority (:mod:`placer.queues`).
    priority_class: str | None = None
    #: pods to keep inside one rack, block, NVLink domain... (:class:`TopologyConstraint`).
    topology: tuple[TopologyConstraint, ...] = ()
    #: component labels whose replicas placer can write (the root object's replicas field,
    #: :mod:`placer.definitions.replicas`): the ones a policy may divide over clusters.
    scalable: tuple[str, ...] = ()
    #: ``metadata.creationTimestamp`` in Unix seconds (``None``: not created yet, e.g. a file's
    #: object), for the order of a queue (:mod:`placer.queues.order`).
    created: float | None = None

    @property
    def pod_count(self) -> int:
        return sum(c.replicas for c in self.components)

    @property
    def elastic(self) -> bool:
        """Some component may run more than its ``replicas`` (:class:`ComponentDemand`)."""
        return any(c.elastic for c in self.components)

    def total_requests(self) -> dict[str, int]:
        """Sum of all pods' requests (no ``pods`` entry)."""
        # written out rather than add(scale(...)): a hot path of simulation
        total: dict[str, int] = {}
        for component in self.components:
            for name, amount in component.pod.requests.items():
                total[name] = total.get(name, 0) + amount * component.replicas
        return total

    def largest_requests(self) -> dict[str, int]:
        """``total_requests`` with every elastic component at its ``max_replicas``."""
        total: dict[str, int] = {}
        for component in self.components:
            count = max(component.replicas, component.max_replicas or 0)
            for name, amount in component.pod.requests.items():
                total[name] = total.get(name, 0) + amount * count
        return total

    @property
    def gpus(self) -> int:
        return sum(c.pod.gpus * c.replicas for c in self.components)


# --------------------------------------------------------------------------------------------
# Capacity


@dataclass(frozen=True)
class DeviceGroup:
    """Identical devices a Dynamic Resource Allocation driver publishes for a node (in its
    ResourceSlices): ``count`` devices of ``driver`` with these ``attributes``, ``allocated`` of
    them held by ResourceClaims. ``resource`` is what placer counts them as (the accelerator
    table's DeviceClass mapping; ``""`` when no class maps them, and then they are not in the
    node's ``allocatable``)."""

    driver: str
    resource: str
    count: int
    allocated: int = 0
    attributes: Mapping[str, str] = field(default_factory=dict)

    @property
    def free(self) -> int:
        return self.count - self.allocated


@dataclass(frozen=True)
class Node:
    """A node's capacity and state at capture time.

    ``requested`` sums the effective requests of the non-terminal pods bound to the node and has
    ``pods`` = their count. ``free`` = ``allocatable - requested`` per resource.
    """

    name: str
    allocatable: Resources
    requested: Resources = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    #: Free thousandths per GPU device when GPU sharing is modelled (``GPU_SHARE``), the node's
    #: pods counted (gathering takes them off the ``placer.dev/gpu-devices`` annotation, the
    #: devices before the pods); ``None`` when the node's GPUs are counted whole only. With
    #: devices, a whole-GPU request needs that many fully free devices, and a shared request
    #: needs one device with enough left.
    gpu_devices: tuple[int, ...] | None = None
    #: DRA devices from ResourceSlices, grouped (:class:`DeviceGroup`). The mapped ones are
    #: already in ``allocatable`` (their count) and ``requested`` (their allocated devices), so
    #: placement counts them like any resource; this keeps where they came from.
    devices: tuple[DeviceGroup, ...] = ()

    @property
    def free(self) -> dict[str, int]:
        names = set(self.allocatable) | set(self.requested)
        free = {n: self.allocatable.get(n, 0) - self.requested.get(n, 0) for n in names}
        if self.gpu_devices is not None:
            free[GPU] = sum(1 for milli in self.gpu_devices if milli >= 1000)
        return free

    @property
    def usable(self) -> bool:
        """Ready and not cordoned: new pods may be bound here."""
        return self.ready and not self.unschedulable

    @property
    def free_pods(self) -> int:
        return self.allocatable.get(PODS, 110) - self.requested.get(PODS, 0)


@dataclass(frozen=True)
class PendingPods:
    """Pods waiting for a node in a cluster (they show pressure; their requests are not free)."""

    count: int = 0
    requests: Resources = field(default_factory=dict)


@dataclass(frozen=True)
class Cluster:
    """A member cluster: its identity, labels, nodes and reachability."""

    name: str
    nodes: tuple[Node, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    #: cluster-wide taints (from the fleet file): a workload must tolerate them to be placed here.
    taints: tuple[Taint, ...] = ()
    reachable: bool = True
    #: why the cluster is unreachable (empty when reachable).
    reason: str = ""
    pending: PendingPods = field(default_factory=PendingPods)

    def allocatable(self) -> dict[str, int]:
        return add(*(node.allocatable for node in self.nodes))

    def free(self, *, usable_only: bool = True) -> dict[str, int]:
        total: dict[str, int] = {}
        for node in self.nodes:
            if usable_only and not node.usable:
                continue
            for name, amount in node.free.items():
                total[name] = total.get(name, 0) + max(amount, 0)
        return total


@dataclass(frozen=True)
class Fleet:
    """All member clusters, as captured at ``captured_at`` (RFC 3339, UTC)."""

    clusters: tuple[Cluster, ...]
    captured_at: str = ""
    #: the accelerator table the capacity was gathered with, as its fleet-file section
    #: (:func:`placer.accelerators.accelerators_from_dict`); empty: placer's defaults.
    accelerators: Mapping[str, object] = field(default_factory=dict)
    #: the topologies the capacity was gathered with, as the fleet file's ``topologies:``
    #: section (:func:`placer.topology.topologies_from_list`); empty: placer's default only.
    topologies: tuple[Mapping[str, object], ...] = ()

    def cluster(self, name: str) -> Cluster:
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.clusters)


# --------------------------------------------------------------------------------------------
# Decision


@dataclass(frozen=True)
class PodAssignment:
    """One pod of a placed workload on one node."""

    component: str
    instance: str
    #: replica index within the component instance (0-based).
    index: int
    node: str
    #: the pod's effective requests (canonical units), so placements can be charged to nodes
    #: and released again without the workload at hand (empty when unknown).
    requests: Resources = field(default_factory=dict)
    #: GPU devices of the node the pod uses, by index (whole GPUs and shared ``GPU_SHARE``
    #: pods); empty when the node's GPUs are counted whole only and the pod needs no share.
    devices: tuple[int, ...] = ()


def pods_requests(pods: Iterable[PodAssignment]) -> dict[str, int]:
    """Total requests of assigned pods (a placement's ``requests`` from its pods)."""
    total: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod.requests.items():
            total[name] = total.get(name, 0) + amount
    return total


@dataclass(frozen=True)
class Placement:
    """A workload placed in a cluster, every pod on a node (node-realised)."""

    workload: WorkloadRef
    cluster: str
    pods: tuple[PodAssignment, ...]
    #: total requests of the workload (canonical units).
    requests: Resources


@dataclass(frozen=True)
class Unplaced:
    """A workload that could not be placed, with the reason per cluster (in words)."""

    workload: WorkloadRef
    reasons: Mapping[str, str]


@dataclass(frozen=True)
class DecisionSummary:
    """How a decision was reached and how good it is."""

    solver: str
    #: ``batch`` or ``online``.
    mode: str
    #: ``optimal``, ``feasible`` (time limit reached), ``fallback`` (greedy answer) or
    #: ``trivial`` (nothing to decide).
    status: str
    seconds: float
    workloads: int
    placed: int
    #: total requests of all workloads considered (canonical units).
    demand: Resources = field(default_factory=dict)
    #: total requests of placed workloads.
    placed_requests: Resources = field(default_factory=dict)
    #: best upper bounds on placed amounts, by name (e.g. ``{"gpu": {"cluster_lp": ..,
    #: "node_lp": .., "cpsat": ..}}``); free-form numbers.
    bound: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """The outcome of one placement decision."""

    placements: tuple[Placement, ...]
    unplaced: tuple[Unplaced, ...]
    summary: DecisionSummary
