"""Decomposing a workload object into what placement needs: the public entry point.

:func:`decompose` reads a manifest or a live object (a JobSet, a RayCluster, a Deployment...)
through the definition covering its kind and returns a :class:`Decomposition`:

* ``components``: every instance of every pod-bearing component with its replicas, its pod
  template (always ``{"metadata", "spec"}``, synthesised for fragmented definitions, with the
  containers the definition says the framework injects) and the
  :class:`~placer.model.PodDemand` of one pod, computed by :func:`placer.podspec.pod_demand`
  exactly as kube-scheduler computes requests, for every resource name, plus the GPU demand the
  containers do not show (:mod:`placer.accelerators`: Run:ai/KAI fractions, DRA claims); each
  such contribution is a ``source`` of the component (what, how much, from where);
* ``warnings``: demand placer could not count (a claim whose DeviceClass it cannot map, a
  claim template missing from the input), each naming the object and the claim;
* ``gangs``: predicted gang groups (:mod:`placer.definitions.gangs`);
* ``phases``: matched statuses in upstream's fixed order (``("Undefined",)`` when none);
* ``structure``: all components (grouping ones too) with their instances, for display;
* ``workload``: the :class:`~placer.model.Workload` for the solver (instances with at least one
  replica, gangs, labels, annotations, ``placer.dev/priority|group|cluster`` from labels or
  annotations).

Pure: no I/O; the definition's jq runs on a normalised JSON copy of the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from placer.accelerators import (
    AcceleratorTable,
    ClaimIndex,
    RequestSource,
    accelerator_demand,
    default_accelerators,
)
from placer.decoding import type_name
from placer.definitions.catalog import Catalog
from placer.definitions.elastic import replica_range, write_replicas
from placer.definitions.gangs import predict_gangs
from placer.definitions.interpret import (
    ExtractedInstance,
    Extraction,
    Scale,
    check_count_fields,
    extract,
    status_phases,
)
from placer.definitions.jq import DEFAULT_LIMITS, JqLimits, normalize, to_json_text
from placer.definitions.model import Component, Definition, GroupVersionKind
from placer.definitions.replicas import replicas_field
from placer.definitions.topology import topology_constraints
from placer.errors import InterpretationError
from placer.model import (
    ANNOTATION_AVOID,
    LABEL_CLUSTER,
    LABEL_GROUP,
    LABEL_PRIORITY,
    ComponentDemand,
    Gang,
    PodDemand,
    Workload,
    WorkloadRef,
)
from placer.objects import meta
from placer.podspec import container_requests, pod_demand
from placer.quantity import add
from placer.timestamps import parse_rfc3339
from placer.topology import default_topologies

__all__ = [
    "ComponentInstance",
    "ComponentNode",
    "Decomposition",
    "InstanceNode",
    "decompose",
    "not_an_object",
    "phases_of",
    "workload_ref",
]


@dataclass(frozen=True)
class ComponentInstance:
    """One instance of a pod-bearing component: ``replicas`` pods of one template."""

    name: str
    instance: str
    replicas: int
    #: ``{"metadata": {...}, "spec": {...}}`` (a PodTemplateSpec as JSON).
    template: Mapping[str, Any]
    pod: PodDemand
    min_replicas: int | None = None
    max_replicas: int | None = None
    #: ``(low, high)`` replicas of an elastic instance (:mod:`placer.definitions.elastic`): it
    #: is placed at any count in that range; ``None``: at ``replicas``.
    elastic: tuple[int, int] | None = None
    #: per pod, what the pod asks for beyond its own containers (or a shared GPU resource they
    #: ask for), and where from: injected containers, GPU fractions, DRA claims.
    sources: tuple[RequestSource, ...] = ()

    @property
    def label(self) -> str:
        """``component`` or ``component/instance`` (as in :class:`placer.model.Gang` members)."""
        return f"{self.name}/{self.instance}" if self.instance else self.name


@dataclass(frozen=True)
class InstanceNode:
    """An instance in the structure: its id (``""`` for single-instance), scale, replicas."""

    id: str
    scale: Scale | None
    replicas: int


@dataclass(frozen=True)
class ComponentNode:
    """A component of the definition with its instances in this object (sorted by id)."""

    name: str
    kind: GroupVersionKind | None
    owner: str | None
    pod_bearing: bool
    multi_instance: bool
    instances: tuple[InstanceNode, ...]


@dataclass(frozen=True)
class Decomposition:
    """A workload object read through its definition (see the module docstring)."""

    ref: WorkloadRef
    definition: Definition
    phases: tuple[str, ...]
    components: tuple[ComponentInstance, ...]
    gangs: tuple[Gang, ...]
    workload: Workload
    #: every component, root first then children in definition order.
    structure: tuple[ComponentNode, ...]
    #: demand that could not be counted, each naming the object and what (see the module doc).
    warnings: tuple[str, ...] = ()

    def component(self, name: str, instance: str = "") -> ComponentInstance:
        for component in self.components:
            if component.name == name and component.instance == instance:
                return component
        raise KeyError(f"{name}/{instance}" if instance else name)


def not_an_object(value: object, source: str | None) -> InterpretationError:
    """The error for an input document that is not a Kubernetes object (a list, a string...)."""
    return InterpretationError(
        f"{source or 'input'}: the document is {type_name(value)}, not a Kubernetes object",
        hint="each YAML document must be one object (a mapping with apiVersion, kind and "
        "metadata); separate objects with '---' or put them in a kind: List's items",
    )


def workload_ref(obj: Mapping[str, Any], *, source: str | None = None) -> WorkloadRef:
    """The identity of a workload object (namespace defaults to ``default``)."""
    where = f"{source}: " if source else ""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise InterpretationError(f"{where}the object has no apiVersion")
    if not isinstance(kind, str) or not kind:
        raise InterpretationError(f"{where}the object has no kind")
    metadata = meta(obj)
    name = metadata.get("name") or metadata.get("generateName")
    if not isinstance(name, str) or not name:
        raise InterpretationError(f"{where}{kind}: metadata.name is missing")
    namespace = metadata.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise InterpretationError(f"{where}{kind}/{name}: metadata.namespace must be a string")
    return WorkloadRef(api_version=api_version, kind=kind, namespace=namespace, name=name)


def _resolve(
    obj: Mapping[str, Any], catalog_or_definition: Catalog | Definition, source: str | None
) -> Definition:
    if isinstance(catalog_or_definition, Definition):
        return catalog_or_definition
    ref = workload_ref(obj, source=source)
    return catalog_or_definition.find(ref.api_version, ref.kind, source=source)


def _input(obj: Mapping[str, Any], where: str) -> str:
    try:
        return to_json_text(normalize(obj))
    except (TypeError, ValueError) as exc:
        raise InterpretationError(f"{where}: the object is not plain JSON data: {exc}") from None
    except RecursionError:  # an object from the API nested thousands of levels deep
        raise InterpretationError(f"{where}: the object is nested too deeply to read") from None


def phases_of(
    obj: Mapping[str, Any],
    catalog_or_definition: Catalog | Definition,
    *,
    source: str | None = None,
    limits: JqLimits = DEFAULT_LIMITS,
) -> tuple[str, ...]:
    """Matched statuses of ``obj`` in upstream's order, or ``("Undefined",)``."""
    if not isinstance(obj, Mapping):
        raise not_an_object(obj, source)
    definition = _resolve(obj, catalog_or_definition, source)
    ref = workload_ref(obj, source=source)
    where = _where(ref, definition, source)
    return status_phases(_input(obj, where), definition, where=where, limits=limits)


def _where(ref: WorkloadRef, definition: Definition, source: str | None) -> str:
    prefix = f"{source}: " if source else ""
    return f"{prefix}{ref.kind}/{ref.name}: {definition.label}"


def decompose(
    obj: Mapping[str, Any],
    catalog_or_definition: Catalog | Definition,
    *,
    source: str | None = None,
    limits: JqLimits = DEFAULT_LIMITS,
    claims: ClaimIndex | None = None,
) -> Decomposition:
    """Read ``obj`` through its definition (see the module docstring).

    ``catalog_or_definition`` is a :class:`~placer.definitions.Catalog` (the definition is
    found by the object's apiVersion and kind; its accelerator table counts GPU fractions and
    DRA claims) or a :class:`~placer.definitions.Definition` (placer's default table).
    ``source`` names the object's origin (a file) in messages. ``claims`` are the
    ResourceClaims and ResourceClaimTemplates the pods may name (the input's other documents).

    Raises :class:`~placer.errors.NoDefinitionError` when no definition covers the kind,
    :class:`~placer.errors.InterpretationError` when the object does not fit its definition and
    :class:`~placer.errors.JqError` when a jq path fails; each names the object, definition,
    component and field.
    """
    if not isinstance(obj, Mapping):
        raise not_an_object(obj, source)
    ref = workload_ref(obj, source=source)
    definition = _resolve(obj, catalog_or_definition, source)
    where = _where(ref, definition, source)
    check_count_fields(obj, definition, where=where)
    extraction = extract(_input(obj, where), definition, where=where, limits=limits)

    table = (
        catalog_or_definition.accelerators
        if isinstance(catalog_or_definition, Catalog)
        else default_accelerators()
    )
    counting = _Counting(table, claims, ref.namespace)
    structure: list[ComponentNode] = []
    components: list[ComponentInstance] = []
    for component in definition.components:
        extracted = sorted(extraction.instances[component.name], key=lambda i: i.id)
        structure.append(
            ComponentNode(
                name=component.name,
                kind=component.kind,
                owner=component.owner,
                pod_bearing=component.has_pod_definition,
                multi_instance=component.instance_id_path is not None,
                instances=tuple(InstanceNode(i.id, i.scale, i.replicas) for i in extracted),
            )
        )
        if not component.has_pod_definition:
            continue
        for inst in extracted:
            made = _component_instance(component.name, inst, where, counting)
            if made.replicas > 0 and not (made.template.get("spec") or {}).get("containers"):
                counting.warnings.append(_no_containers(component, made, where, definition))
            if definition.elastic:
                made = _elastic(
                    obj, definition, extraction, component, made, where, limits, counting
                )
            components.append(made)
    gangs = predict_gangs(definition, extraction.instances)
    if any(c.elastic is not None for c in components):
        gangs = _elastic_gangs(gangs, components)
    workload = _workload(obj, ref, components, gangs, source)
    topologies = (
        catalog_or_definition.topologies
        if isinstance(catalog_or_definition, Catalog)
        else default_topologies()
    )
    constraints = topology_constraints(
        definition, components, workload.annotations, topologies, where=where
    )
    if constraints:
        workload = replace(workload, topology=constraints)
    # divisible over clusters: the root's pods, when placer can write its replicas field
    scalable = tuple(
        c.label
        for c in components
        if c.replicas > 0 and c.name == definition.root.name and replicas_field(definition)
    )
    if scalable:
        workload = replace(workload, scalable=scalable)
    return Decomposition(
        ref=ref,
        definition=definition,
        phases=extraction.phases,
        components=tuple(components),
        gangs=gangs,
        workload=workload,
        structure=tuple(structure),
        warnings=tuple(dict.fromkeys(counting.warnings)),
    )


def _no_containers(
    component: Component, made: ComponentInstance, where: str, definition: Definition
) -> str:
    """The warning for pods whose template has no containers: a path of the definition that
    found nothing in this object (Kubernetes refuses such pods; placer counts them as empty)."""
    spec = component.spec
    paths = []
    if spec is not None:
        if spec.pod_template_spec_path is not None:
            paths.append(f"specDefinition.podTemplateSpecPath {spec.pod_template_spec_path!r}")
        if spec.pod_spec_path is not None:
            paths.append(f"specDefinition.podSpecPath {spec.pod_spec_path!r}")
        if spec.fragmented is not None:
            fragments = spec.fragmented
            paths.extend(
                f"specDefinition.fragmentedPodSpecDefinition.{key} {getattr(fragments, attr)!r}"
                for attr, key in fragments.FIELDS
                if key in ("containersPath", "containerPath", "resourcesPath")
                and getattr(fragments, attr) is not None
            )
    found = " or ".join(paths) or "its pod definition"
    return (
        f"{where}: component {made.label!r}: the pod template has no containers ({found} found "
        f"none in this object): its {made.replicas} pod(s) are counted as asking for nothing; "
        f"check the path against the object (`placer definitions {definition.name}` shows the "
        "definition's paths)"
    )


@dataclass
class _Counting:
    """What counting a workload's pods needs besides the templates, and the warnings so far."""

    table: AcceleratorTable
    claims: ClaimIndex | None
    namespace: str
    warnings: list[str] = field(default_factory=list)


_INJECTED_TEXT = {"container": "container", "init": "init container", "sidecar": "sidecar"}


def _component_instance(
    name: str, inst: ExtractedInstance, where: str, counting: _Counting
) -> ComponentInstance:
    template = inst.template or {"metadata": {}, "spec": {}}
    spec = template.get("spec") or {}
    label = f"{name}/{inst.id}" if inst.id else name
    at = f"{where}: component {label!r}"
    try:
        pod = pod_demand(spec)
        sources = [
            RequestSource(
                "injected",
                item.name,
                f"injected {_INJECTED_TEXT[item.kind]} (definition's injectedContainers)",
                container_requests(item.resources),
            )
            for item in inst.injected
        ]
        extra = accelerator_demand(
            spec,
            meta(template).get("annotations") or {},
            pod.requests,
            namespace=counting.namespace,
            table=counting.table,
            claims=counting.claims,
            where=at,
        )
    except (ValueError, TypeError, AttributeError) as exc:
        raise InterpretationError(f"{at}: the pod template cannot be read: {exc}") from None
    if extra.added:
        pod = replace(pod, requests=add(pod.requests, extra.added))
    counting.warnings.extend(extra.warnings)
    scale = inst.scale
    return ComponentInstance(
        name=name,
        instance=inst.id,
        replicas=inst.replicas,
        template=template,
        pod=pod,
        min_replicas=scale.min_replicas if scale is not None else None,
        max_replicas=scale.max_replicas if scale is not None else None,
        sources=(*sources, *extra.sources),
    )


def _elastic(
    obj: Mapping[str, Any],
    definition: Definition,
    extraction: Extraction,
    component: Component,
    made: ComponentInstance,
    where: str,
    limits: JqLimits,
    counting: _Counting,
) -> ComponentInstance:
    """``made`` with its elastic range when it has one placer can write (else a warning)."""
    scale = Scale(made.replicas, made.min_replicas, made.max_replicas)
    at = f"{where}: component {made.label!r}"
    found = replica_range(component, scale, where=at)
    if found is None or found == (made.replicas, made.replicas):
        return made
    low, high = found
    try:
        write_replicas(
            obj,
            definition,
            {(made.name, made.instance): high},
            where=where,
            limits=limits,
            extraction=extraction,  # the object as decomposed: not read again
        )
    except InterpretationError as exc:
        counting.warnings.append(f"{exc}; placed at its declared {made.replicas} replicas")
        return made
    return replace(made, elastic=(low, high))


def _elastic_gangs(
    gangs: tuple[Gang, ...], components: list[ComponentInstance]
) -> tuple[Gang, ...]:
    """``gangs`` with each elastic member counted at its minimum (the gang needs no more; a
    declared count below ``minReplicas`` is raised to it, as placement does)."""
    delta = {
        c.label: c.elastic[0] - min(c.replicas, c.min_replicas or c.replicas)
        for c in components
        if c.elastic is not None
    }
    return tuple(
        replace(g, min_member=g.min_member + sum(delta.get(m, 0) for m in g.members)) for g in gangs
    )


def _workload(
    obj: Mapping[str, Any],
    ref: WorkloadRef,
    components: list[ComponentInstance],
    gangs: tuple[Gang, ...],
    source: str | None,
) -> Workload:
    metadata = meta(obj)
    where = f"{source}: {ref.kind}/{ref.name}" if source else f"{ref.kind}/{ref.name}"
    labels = _string_map(metadata.get("labels"), f"{where}: metadata.labels")
    annotations = _string_map(metadata.get("annotations"), f"{where}: metadata.annotations")

    def setting(key: str) -> tuple[str | None, str]:
        if key in labels:
            return labels[key], f'metadata.labels["{key}"]'
        if key in annotations:
            return annotations[key], f'metadata.annotations["{key}"]'
        return None, ""

    priority = 0
    text, field = setting(LABEL_PRIORITY)
    if text is not None:
        try:
            priority = int(text.strip())
        except ValueError:
            raise InterpretationError(
                f"{where}: {field}: {text!r} is not an integer",
            ) from None
    group, _ = setting(LABEL_GROUP)
    cluster, _ = setting(LABEL_CLUSTER)
    priority_class = next(
        (
            name
            for c in components
            if isinstance(name := (c.template.get("spec") or {}).get("priorityClassName"), str)
            and name
        ),
        None,
    )
    return Workload(
        ref=ref,
        components=tuple(
            ComponentDemand(name=c.name, instance=c.instance, replicas=c.replicas, pod=c.pod)
            if c.elastic is None
            else ComponentDemand(
                name=c.name,
                instance=c.instance,
                replicas=c.elastic[0],
                pod=c.pod,
                max_replicas=c.elastic[1],
            )
            for c in components
            if c.replicas > 0 or c.elastic is not None
        ),
        gangs=gangs,
        labels=labels,
        annotations=annotations,
        priority=priority,
        group=group or None,
        pinned_cluster=cluster or None,
        avoid_clusters=tuple(
            c.strip() for c in annotations.get(ANNOTATION_AVOID, "").split(",") if c.strip()
        ),
        priority_class=priority_class,
        created=parse_rfc3339(metadata.get("creationTimestamp")),
    )


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InterpretationError(f"{where}: expected a map of strings")
    out = {}
    for key, item in value.items():
        if not isinstance(item, str):
            raise InterpretationError(f"{where}: value of {key!r} must be a string")
        out[str(key)] = item
    return out
