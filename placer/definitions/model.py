"""Typed, immutable model of a Workload Map definition (``Karta`` / ``ResourceInterface``).

One model for both API eras: ``run.ai/v1alpha1 Karta`` (current) and
``optimization.nvidia.com/v1alpha1 ResourceInterface`` (old) share the ``spec`` shape; fields only
the current era has (suspend, ``matchLabels``, ``replicaSelector``, ``podGroup``) are simply
absent in old documents. Absent and ``null`` mean the same everywhere, as in upstream's Go types.
One field is placer's own extension, ignored by upstream's decoder (unknown keys):
``specDefinition.injectedContainers`` (:class:`InjectedContainer`); and two metadata
annotations, ``placer.dev/elastic`` and ``placer.dev/resizable`` (:attr:`Definition.elastic`,
:attr:`Definition.resizable`).

Every component remembers ``field`` (``spec.structureDefinition.childComponents[1]``) so that any
message about it can point at the exact place in the document.

:class:`Definition` compares by identity (``eq=False``): it is a parsed document, used as a cache
key by the interpreter; two loads of the same file are two definitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ANNOTATION_ELASTIC",
    "ANNOTATION_RESIZABLE",
    "INJECTED_KINDS",
    "KARTA_API_VERSION",
    "RESOURCE_INTERFACE_API_VERSION",
    "STATUS_KEYS",
    "STATUS_ORDER",
    "Component",
    "ConditionsDefinition",
    "Definition",
    "ExpectedCondition",
    "ExpressionMatcher",
    "FragmentedPodSpec",
    "GangScheduling",
    "GroupVersionKind",
    "InjectedContainer",
    "InstanceSelector",
    "PodGroup",
    "PodGroupMember",
    "PodGroupV2",
    "PodSelector",
    "ReplicaSelector",
    "ScaleDefinition",
    "SpecDefinition",
    "StatusDefinition",
    "StatusMatcher",
    "SubGroup",
    "SuspendAction",
    "SuspendDefinition",
    "Topology",
    "TypeSelector",
]

KARTA_API_VERSION = "run.ai/v1alpha1"
RESOURCE_INTERFACE_API_VERSION = "optimization.nvidia.com/v1alpha1"

#: ``statusMappings`` keys and the status names they produce.
STATUS_KEYS: Mapping[str, str] = {
    "initializing": "Initializing",
    "running": "Running",
    "completed": "Completed",
    "failed": "Failed",
    "degraded": "Degraded",
    "suspended": "Suspended",
    "suspending": "Suspending",
    "resuming": "Resuming",
}
#: The fixed order in which statuses are evaluated and reported (spec section 5).
STATUS_ORDER = (
    "Resuming",
    "Suspending",
    "Suspended",
    "Running",
    "Failed",
    "Completed",
    "Initializing",
    "Degraded",
)


@dataclass(frozen=True)
class GroupVersionKind:
    """A Kubernetes group/version/kind (``group`` is ``""`` for core kinds)."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GroupVersionKind:
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)


@dataclass(frozen=True)
class FragmentedPodSpec:
    """Pod fields scattered across a custom resource, each found by a jq path."""

    scheduler_name_path: str | None = None
    labels_path: str | None = None
    annotations_path: str | None = None
    resources_path: str | None = None
    resource_claims_path: str | None = None
    pod_affinity_path: str | None = None
    node_affinity_path: str | None = None
    containers_path: str | None = None
    container_path: str | None = None
    priority_class_name_path: str | None = None
    image_path: str | None = None

    #: (attribute, YAML key) in serialisation order.
    FIELDS = (
        ("scheduler_name_path", "schedulerNamePath"),
        ("labels_path", "labelsPath"),
        ("annotations_path", "annotationsPath"),
        ("resources_path", "resourcesPath"),
        ("resource_claims_path", "resourceClaimsPath"),
        ("pod_affinity_path", "podAffinityPath"),
        ("node_affinity_path", "nodeAffinityPath"),
        ("containers_path", "containersPath"),
        ("container_path", "containerPath"),
        ("priority_class_name_path", "priorityClassNamePath"),
        ("image_path", "imagePath"),
    )

    def paths(self) -> list[tuple[str, str]]:
        """(YAML key, jq) of the paths that are set, in serialisation order."""
        out = []
        for attr, key in self.FIELDS:
            value = getattr(self, attr)
            if value is not None:
                out.append((key, value))
        return out


#: How an injected container runs: beside the others, before them, or as a native sidecar.
INJECTED_KINDS = ("container", "init", "sidecar")


@dataclass(frozen=True)
class InjectedContainer:
    """**placer extension** (``specDefinition.injectedContainers[]``, ignored by upstream): a
    container the framework adds to every pod of the component by itself (Knative's
    ``queue-proxy``, KServe's ``storage-initializer`` and agent), so that placement counts its
    resources like the pod's own."""

    name: str
    #: one of :data:`INJECTED_KINDS`: ``container`` (runs beside the others), ``init`` (an init
    #: container, before them) or ``sidecar`` (a native sidecar: an init container that keeps
    #: running).
    kind: str = "container"
    #: a ResourceRequirements (``requests``/``limits``) as the framework's defaults set it.
    resources: Mapping[str, Any] = field(default_factory=dict)
    #: jq on the workload object: injected where the output is true (one output per instance
    #: of the component, or one for all); always injected when absent.
    when_path: str | None = None


@dataclass(frozen=True)
class SpecDefinition:
    """Where a component's pods are described (one of three shapes)."""

    pod_template_spec_path: str | None = None
    pod_spec_path: str | None = None
    metadata_path: str | None = None
    fragmented: FragmentedPodSpec | None = None
    #: placer extension: containers the framework injects (:class:`InjectedContainer`).
    injected: tuple[InjectedContainer, ...] = ()

    @property
    def has_pod_definition(self) -> bool:
        return (
            self.pod_template_spec_path is not None
            or self.pod_spec_path is not None
            or self.fragmented is not None
        )


@dataclass(frozen=True)
class ScaleDefinition:
    """Where replica counts are found."""

    replicas_path: str | None = None
    min_replicas_path: str | None = None
    max_replicas_path: str | None = None


@dataclass(frozen=True)
class TypeSelector:
    """Which component type a pod plays (``keyPath`` [+ ``value``] and/or ``matchLabels``)."""

    key_path: str | None = None
    value: str | None = None
    match_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InstanceSelector:
    """Which instance a pod belongs to: ``idPath`` (jq on the pod) yields the instance id."""

    id_path: str


@dataclass(frozen=True)
class ReplicaSelector:
    """Which replica group a pod belongs to: ``keyPath`` (jq on the pod)."""

    key_path: str


@dataclass(frozen=True)
class PodSelector:
    component_type: TypeSelector | None = None
    component_instance: InstanceSelector | None = None
    replica: ReplicaSelector | None = None


@dataclass(frozen=True)
class ExpectedCondition:
    type: str
    status: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ExpressionMatcher:
    """``(expression) | tostring`` (first output) must equal ``expected_result``."""

    expression: str
    expected_result: str


@dataclass(frozen=True)
class StatusMatcher:
    """All present clauses must hold (AND); a status matches if ANY of its matchers does."""

    by_phase: str | None = None
    by_conditions: tuple[ExpectedCondition, ...] | None = None
    by_expression: ExpressionMatcher | None = None


@dataclass(frozen=True)
class ConditionsDefinition:
    """Where conditions are and which fields of each condition to read.

    Field names default to the CRD defaults (``type``, ``status``, ``message``, ``reason``) also
    for definitions read from files. Upstream's Go library does not default them from files, so
    a file definition without ``reasonFieldName`` never matches a ``reason:`` expectation
    (spec section 13, gap 7); placer behaves the same for file and cluster definitions.
    """

    path: str
    type_field: str = "type"
    status_field: str = "status"
    message_field: str = "message"
    reason_field: str = "reason"


@dataclass(frozen=True)
class StatusDefinition:
    phase_path: str | None = None
    conditions: ConditionsDefinition | None = None
    #: status name (``Running``) -> matchers, for the keys present in the document.
    mappings: Mapping[str, tuple[StatusMatcher, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class SuspendAction:
    """Assign the JSON value ``value`` (text) at the jq path ``path``."""

    path: str
    value: str


@dataclass(frozen=True)
class SuspendDefinition:
    suspend_actions: tuple[SuspendAction, ...] = ()
    resume_actions: tuple[SuspendAction, ...] = ()


@dataclass(frozen=True)
class Component:
    """A component of the workload structure (the root or a child)."""

    name: str
    #: where it is in the document, e.g. ``spec.structureDefinition.childComponents[0]``.
    field: str
    kind: GroupVersionKind | None = None
    owner: str | None = None
    spec: SpecDefinition | None = None
    scale: ScaleDefinition | None = None
    status: StatusDefinition | None = None
    suspend: SuspendDefinition | None = None
    instance_id_path: str | None = None
    pod_selector: PodSelector | None = None

    @property
    def has_pod_definition(self) -> bool:
        """Pod-bearing: one of podTemplateSpecPath, podSpecPath, fragmentedPodSpecDefinition."""
        return self.spec is not None and self.spec.has_pod_definition

    @property
    def label(self) -> str:
        """``component 'worker'`` for messages."""
        return f"component {self.name!r}"


@dataclass(frozen=True)
class PodGroupMember:
    component_name: str
    group_by_key_paths: tuple[str, ...] = ()
    filters: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodGroup:
    """Alpha gang form: ``podGroups[]``."""

    name: str
    members: tuple[PodGroupMember, ...] = ()


@dataclass(frozen=True)
class Topology:
    topology_name: str
    preferred_level: str
    required_level: str


@dataclass(frozen=True)
class SubGroup:
    component_name: str
    topology: Topology | None = None


@dataclass(frozen=True)
class PodGroupV2:
    """V2 gang form: ``podGroup`` with ``subGroups``."""

    name: str
    sub_groups: tuple[SubGroup, ...] = ()
    topology: Topology | None = None


@dataclass(frozen=True)
class GangScheduling:
    pod_groups: tuple[PodGroup, ...] = ()
    pod_group: PodGroupV2 | None = None


#: the definition's metadata annotations placer reads (placer's extension; upstream ignores
#: annotations): elastic placement, and whether the framework resizes a running workload.
ANNOTATION_ELASTIC = "placer.dev/elastic"
ANNOTATION_RESIZABLE = "placer.dev/resizable"


def _flag(document: Mapping[str, Any], key: str) -> bool:
    metadata = document.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return False
    value = annotations.get(key)
    return isinstance(value, str) and value.strip().lower() == "true"


@dataclass(frozen=True, eq=False)
class Definition:
    """A parsed definition document.

    ``origin`` says where it came from: ``catalog`` (built in), ``file`` (``--catalog DIR`` or a
    path), ``cluster`` (a Karta object read from a cluster). ``source`` names the file or object.
    ``document`` is the document as read (for re-emitting it).
    """

    name: str
    api_version: str
    root: Component
    children: tuple[Component, ...] = ()
    additional_child_kinds: tuple[GroupVersionKind, ...] = ()
    gang: GangScheduling | None = None
    origin: str = "file"
    source: str | None = None
    document: Mapping[str, Any] = field(default_factory=dict)

    @property
    def components(self) -> tuple[Component, ...]:
        """Root first, then children in document order."""
        return (self.root, *self.children)

    @property
    def target(self) -> GroupVersionKind | None:
        """The root component's kind: the workload type this definition covers."""
        return self.root.kind

    def component(self, name: str) -> Component:
        for component in self.components:
            if component.name == name:
                return component
        raise KeyError(name)

    def children_of(self, name: str) -> tuple[Component, ...]:
        """Components whose ``ownerRef`` is ``name``, in document order."""
        return tuple(c for c in self.children if c.owner == name)

    @property
    def elastic(self) -> bool:
        """``metadata.annotations["placer.dev/elastic"] == "true"``: components with a
        ``minReplicasPath`` or ``maxReplicasPath`` are placed at any count in that range, written
        through their ``replicasPath`` (:mod:`placer.definitions.elastic`)."""
        return _flag(self.document, ANNOTATION_ELASTIC)

    @property
    def resizable(self) -> bool:
        """``metadata.annotations["placer.dev/resizable"] == "true"``: the framework resizes a
        running workload when its replicas field changes, so the controller may grow it later."""
        return _flag(self.document, ANNOTATION_RESIZABLE)

    @property
    def label(self) -> str:
        """``definition 'batch-job-v1'`` for messages."""
        return f"definition {self.name!r}"
