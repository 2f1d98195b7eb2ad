"""Turning definition documents (``Karta`` or ``ResourceInterface``) into model objects.

Decoding follows upstream's Go decoder: unknown keys are ignored, absent and ``null`` are the
same, a value of the wrong type is an error. Unlike Go, decoding does not stop at the first
wrong type: every problem is collected and reported at once, each naming its field
(``spec.structureDefinition.childComponents[1].scaleDefinition.replicasPath: expected a
string, got a list``).

A document without ``metadata.name`` (some old ResourceInterface examples) is named after its
root kind with upstream's catalog slug (``jobset-x-k8s-io-jobset-v1alpha2``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from placer.decoding import type_name
from placer.definitions.documents import Document, read_documents
from placer.definitions.model import (
    INJECTED_KINDS,
    KARTA_API_VERSION,
    RESOURCE_INTERFACE_API_VERSION,
    STATUS_KEYS,
    Component,
    ConditionsDefinition,
    Definition,
    ExpectedCondition,
    ExpressionMatcher,
    FragmentedPodSpec,
    GangScheduling,
    GroupVersionKind,
    InjectedContainer,
    InstanceSelector,
    PodGroup,
    PodGroupMember,
    PodGroupV2,
    PodSelector,
    ReplicaSelector,
    ScaleDefinition,
    SpecDefinition,
    StatusDefinition,
    StatusMatcher,
    SubGroup,
    SuspendAction,
    SuspendDefinition,
    Topology,
    TypeSelector,
)
from placer.errors import DefinitionError, DefinitionInvalidError
from placer.objects import name_of
from placer.quantity import to_canonical

__all__ = ["DEFINITION_KINDS", "definition_from_dict", "is_definition", "load_definitions", "slug"]

#: (apiVersion, kind) pairs accepted as definitions.
DEFINITION_KINDS = frozenset(
    {(KARTA_API_VERSION, "Karta"), (RESOURCE_INTERFACE_API_VERSION, "ResourceInterface")}
)


def slug(gvk: GroupVersionKind) -> str:
    """Upstream's catalog name for a root kind: ``apps-deployment-v1``, ``core-pod-v1``."""
    group = gvk.group.replace(".", "-") if gvk.group else "core"
    return f"{group}-{gvk.kind.lower()}-{gvk.version}"


def is_definition(data: object) -> bool:
    """Whether ``data`` is a Karta or ResourceInterface document (by apiVersion and kind)."""
    if not isinstance(data, Mapping):
        return False
    return (data.get("apiVersion"), data.get("kind")) in DEFINITION_KINDS


def load_definitions(
    paths: str | Path | Iterable[str | Path], *, origin: str = "file"
) -> list[Definition]:
    """Every definition in the given files and directories (multi-document YAML or JSON).

    Raises :class:`~placer.errors.InputError` for unreadable or malformed files and
    :class:`~placer.errors.DefinitionError` for a document that is not a definition or does
    not decode. Validation (:func:`placer.definitions.validate_definition`) is separate.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    definitions: list[Definition] = []
    for path in paths:
        for document in read_documents(Path(path)):
            definitions.append(_from_document(document, origin))
    return definitions


def _from_document(document: Document, origin: str) -> Definition:
    return definition_from_dict(document.data, source=document.source, origin=origin)


def definition_from_dict(
    data: object, *, source: str | None = None, origin: str = "file"
) -> Definition:
    """Decode one definition document (already parsed from YAML/JSON)."""
    where = f"{source}: " if source else ""
    if not isinstance(data, Mapping):
        raise DefinitionError(
            f"{where}not a Workload Map definition: expected a mapping, got {type_name(data)}"
        )
    if not is_definition(data):
        found = f"{data.get('apiVersion') or '<no apiVersion>'} {data.get('kind') or '<no kind>'}"
        raise DefinitionError(
            f"{where}not a Workload Map definition: found {found}",
            hint=f"a definition has apiVersion {KARTA_API_VERSION} and kind Karta (or the older "
            f"{RESOURCE_INTERFACE_API_VERSION} ResourceInterface)",
        )
    reader = _Reader()
    definition = reader.definition(data, source, origin)
    if reader.problems or definition is None:
        name = _name_of(data)
        raise DefinitionInvalidError(name, reader.problems, source=source)
    return definition


def _name_of(data: Mapping[str, Any]) -> str:
    return name_of(data) or "<unnamed>"


class _Reader:
    """Decodes the document, collecting every type problem with its field path."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    # -- typed getters -----------------------------------------------------------------------

    def problem(self, field: str, message: str) -> None:
        self.problems.append(f"{field}: {message}")

    def mapping(self, data: Mapping[str, Any], key: str, field: str) -> Mapping[str, Any] | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.problem(f"{field}.{key}", f"expected a mapping, got {type_name(value)}")
            return None
        return value

    def items(self, data: Mapping[str, Any], key: str, field: str) -> list[tuple[str, Any]]:
        value = data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(f"{field}.{key}", f"expected a list, got {type_name(value)}")
            return []
        return [(f"{field}.{key}[{i}]", item) for i, item in enumerate(value)]

    def string(
        self, data: Mapping[str, Any], key: str, field: str, *, required: bool = False
    ) -> str | None:
        value = data.get(key)
        if value is None:
            if required:
                self.problem(f"{field}.{key}", "is required")
            return None
        if not isinstance(value, str):
            self.problem(f"{field}.{key}", f"expected a string, got {type_name(value)}")
            return None
        return value

    def strings(self, data: Mapping[str, Any], key: str, field: str) -> tuple[str, ...]:
        out = []
        for item_field, item in self.items(data, key, field):
            if isinstance(item, str):
                out.append(item)
            else:
                self.problem(item_field, f"expected a string, got {type_name(item)}")
        return tuple(out)

    def string_map(self, data: Mapping[str, Any], key: str, field: str) -> dict[str, str]:
        value = self.mapping(data, key, field)
        if value is None:
            return {}
        out: dict[str, str] = {}
        for k, v in value.items():
            if isinstance(v, str):
                out[str(k)] = v
            else:
                self.problem(f"{field}.{key}.{k}", f"expected a string, got {type_name(v)}")
        return out

    def entry(self, field: str, item: object) -> Mapping[str, Any] | None:
        if isinstance(item, Mapping):
            return item
        self.problem(field, f"expected a mapping, got {type_name(item)}")
        return None

    # -- document ----------------------------------------------------------------------------

    def definition(
        self, data: Mapping[str, Any], source: str | None, origin: str
    ) -> Definition | None:
        spec = self.mapping(data, "spec", "")
        if spec is None:
            self.problem("spec", "is required")
            return None
        structure = self.mapping(spec, "structureDefinition", "spec")
        if structure is None:
            self.problem("spec.structureDefinition", "is required")
            return None
        field = "spec.structureDefinition"
        root_data = self.mapping(structure, "rootComponent", field)
        if root_data is None:
            self.problem(f"{field}.rootComponent", "is required")
            return None
        root = self.component(root_data, f"{field}.rootComponent")
        children = []
        for child_field, item in self.items(structure, "childComponents", field):
            child_data = self.entry(child_field, item)
            if child_data is not None:
                children.append(self.component(child_data, child_field))
        extra_kinds = []
        for kind_field, item in self.items(structure, "additionalChildKinds", field):
            kind_data = self.entry(kind_field, item)
            if kind_data is not None:
                gvk = self.gvk(kind_data, kind_field)
                if gvk is not None:
                    extra_kinds.append(gvk)
        gang = None
        instructions = self.mapping(spec, "optimizationInstructions", "spec")
        if instructions is not None:
            gang_data = self.mapping(
                instructions, "gangScheduling", "spec.optimizationInstructions"
            )
            if gang_data is not None:
                gang = self.gang(gang_data, "spec.optimizationInstructions.gangScheduling")
        metadata = self.mapping(data, "metadata", "")
        name = self.string(metadata, "name", "metadata") if metadata is not None else None
        if not name:
            name = slug(root.kind) if root.kind is not None else "<unnamed>"
        return Definition(
            name=name,
            api_version=str(data.get("apiVersion")),
            root=root,
            children=tuple(children),
            additional_child_kinds=tuple(extra_kinds),
            gang=gang,
            origin=origin,
            source=source,
            document=data,
        )

    def gvk(self, data: Mapping[str, Any], field: str) -> GroupVersionKind | None:
        group = self.string(data, "group", field)
        version = self.string(data, "version", field)
        kind = self.string(data, "kind", field)
        return GroupVersionKind(group or "", version or "", kind or "")

    def component(self, data: Mapping[str, Any], field: str) -> Component:
        name = self.string(data, "name", field, required=True) or ""
        kind_data = self.mapping(data, "kind", field)
        kind = self.gvk(kind_data, f"{field}.kind") if kind_data is not None else None
        return Component(
            name=name,
            field=field,
            kind=kind,
            owner=self.string(data, "ownerRef", field),
            spec=self.spec(data, field),
            scale=self.scale(data, field),
            status=self.status(data, field),
            suspend=self.suspend(data, field),
            instance_id_path=self.string(data, "instanceIdPath", field),
            pod_selector=self.pod_selector(data, field),
        )

    def spec(self, data: Mapping[str, Any], field: str) -> SpecDefinition | None:
        spec = self.mapping(data, "specDefinition", field)
        if spec is None:
            return None
        field = f"{field}.specDefinition"
        fragmented = None
        frag = self.mapping(spec, "fragmentedPodSpecDefinition", field)
        if frag is not None:
            frag_field = f"{field}.fragmentedPodSpecDefinition"
            fragmented = FragmentedPodSpec(
                **{
                    attr: self.string(frag, key, frag_field)
                    for attr, key in FragmentedPodSpec.FIELDS
                }
            )
        injected = []
        for item_field, item in self.items(spec, "injectedContainers", field):
            entry = self.entry(item_field, item)
            if entry is not None:
                injected.append(self.injected(entry, item_field))
        return SpecDefinition(
            pod_template_spec_path=self.string(spec, "podTemplateSpecPath", field),
            pod_spec_path=self.string(spec, "podSpecPath", field),
            metadata_path=self.string(spec, "metadataPath", field),
            fragmented=fragmented,
            injected=tuple(injected),
        )

    def injected(self, data: Mapping[str, Any], field: str) -> InjectedContainer:
        """placer's ``injectedContainers[]`` extension (see :class:`InjectedContainer`)."""
        name = self.string(data, "name", field, required=True) or ""
        kind = self.string(data, "kind", field) or "container"
        if kind not in INJECTED_KINDS:
            self.problem(f"{field}.kind", f"{kind!r} is not one of {', '.join(INJECTED_KINDS)}")
        resources: Mapping[str, Any] = self.mapping(data, "resources", field) or {}
        for key in ("requests", "limits"):
            amounts = self.mapping(resources, key, f"{field}.resources")
            for resource, quantity in (amounts or {}).items():
                try:
                    to_canonical(str(resource), quantity)
                except ValueError:
                    self.problem(
                        f"{field}.resources.{key}.{resource}",
                        f"{quantity!r} is not a Kubernetes quantity",
                    )
        return InjectedContainer(
            name=name,
            kind=kind,
            resources=resources,
            when_path=self.string(data, "whenPath", field),
        )

    def scale(self, data: Mapping[str, Any], field: str) -> ScaleDefinition | None:
        scale = self.mapping(data, "scaleDefinition", field)
        if scale is None:
            return None
        field = f"{field}.scaleDefinition"
        return ScaleDefinition(
            replicas_path=self.string(scale, "replicasPath", field),
            min_replicas_path=self.string(scale, "minReplicasPath", field),
            max_replicas_path=self.string(scale, "maxReplicasPath", field),
        )

    def pod_selector(self, data: Mapping[str, Any], field: str) -> PodSelector | None:
        selector = self.mapping(data, "podSelector", field)
        if selector is None:
            return None
        field = f"{field}.podSelector"
        type_selector = None
        type_data = self.mapping(selector, "componentTypeSelector", field)
        if type_data is not None:
            type_field = f"{field}.componentTypeSelector"
            type_selector = TypeSelector(
                key_path=self.string(type_data, "keyPath", type_field),
                value=self.string(type_data, "value", type_field),
                match_labels=self.string_map(type_data, "matchLabels", type_field),
            )
        instance = None
        instance_data = self.mapping(selector, "componentInstanceSelector", field)
        if instance_data is not None:
            instance_field = f"{field}.componentInstanceSelector"
            id_path = self.string(instance_data, "idPath", instance_field, required=True)
            instance = InstanceSelector(id_path or "")
        replica = None
        replica_data = self.mapping(selector, "replicaSelector", field)
        if replica_data is not None:
            replica_field = f"{field}.replicaSelector"
            key_path = self.string(replica_data, "keyPath", replica_field, required=True)
            replica = ReplicaSelector(key_path or "")
        return PodSelector(type_selector, instance, replica)

    def status(self, data: Mapping[str, Any], field: str) -> StatusDefinition | None:
        status = self.mapping(data, "statusDefinition", field)
        if status is None:
            return None
        field = f"{field}.statusDefinition"
        phase_path = None
        phase = self.mapping(status, "phaseDefinition", field)
        if phase is not None:
            phase_path = self.string(phase, "path", f"{field}.phaseDefinition", required=True)
        conditions = None
        cond = self.mapping(status, "conditionsDefinition", field)
        if cond is not None:
            cond_field = f"{field}.conditionsDefinition"
            conditions = ConditionsDefinition(
                path=self.string(cond, "path", cond_field, required=True) or "",
                type_field=self.string(cond, "typeFieldName", cond_field) or "type",
                status_field=self.string(cond, "statusFieldName", cond_field) or "status",
                message_field=self.string(cond, "messageFieldName", cond_field) or "message",
                reason_field=self.string(cond, "reasonFieldName", cond_field) or "reason",
            )
        mappings: dict[str, tuple[StatusMatcher, ...]] = {}
        mapping_data = self.mapping(status, "statusMappings", field)
        if mapping_data is None:
            self.problem(f"{field}.statusMappings", "is required")
        else:
            for key, status_name in STATUS_KEYS.items():
                matchers = []
                for matcher_field, item in self.items(mapping_data, key, f"{field}.statusMappings"):
                    matcher = self.entry(matcher_field, item)
                    if matcher is not None:
                        matchers.append(self.matcher(matcher, matcher_field))
                if key in mapping_data:
                    mappings[status_name] = tuple(matchers)
        return StatusDefinition(phase_path, conditions, mappings)

    def matcher(self, data: Mapping[str, Any], field: str) -> StatusMatcher:
        by_conditions = None
        if data.get("byConditions") is not None:
            expected = []
            for cond_field, item in self.items(data, "byConditions", field):
                cond = self.entry(cond_field, item)
                if cond is not None:
                    expected.append(
                        ExpectedCondition(
                            type=self.string(cond, "type", cond_field, required=True) or "",
                            status=self.string(cond, "status", cond_field),
                            reason=self.string(cond, "reason", cond_field),
                        )
                    )
            by_conditions = tuple(expected)
        by_expression = None
        expr = self.mapping(data, "byExpression", field)
        if expr is not None:
            expr_field = f"{field}.byExpression"
            by_expression = ExpressionMatcher(
                expression=self.string(expr, "expression", expr_field, required=True) or "",
                expected_result=self.string(expr, "expectedResult", expr_field, required=True)
                or "",
            )
        return StatusMatcher(
            by_phase=self.string(data, "byPhase", field) or None,
            by_conditions=by_conditions,
            by_expression=by_expression,
        )

    def suspend(self, data: Mapping[str, Any], field: str) -> SuspendDefinition | None:
        suspend = self.mapping(data, "suspendDefinition", field)
        if suspend is None:
            return None
        field = f"{field}.suspendDefinition"
        return SuspendDefinition(
            suspend_actions=self.actions(suspend, "suspendActions", field),
            resume_actions=self.actions(suspend, "resumeActions", field),
        )

    def actions(self, data: Mapping[str, Any], key: str, field: str) -> tuple[SuspendAction, ...]:
        actions = []
        for action_field, item in self.items(data, key, field):
            action = self.entry(action_field, item)
            if action is not None:
                actions.append(
                    SuspendAction(
                        path=self.string(action, "path", action_field, required=True) or "",
                        value=self.string(action, "value", action_field, required=True) or "",
                    )
                )
        return tuple(actions)

    def gang(self, data: Mapping[str, Any], field: str) -> GangScheduling:
        groups = []
        for group_field, item in self.items(data, "podGroups", field):
            group = self.entry(group_field, item)
            if group is None:
                continue
            members = []
            for member_field, member_item in self.items(group, "members", group_field):
                member = self.entry(member_field, member_item)
                if member is not None:
                    members.append(
                        PodGroupMember(
                            component_name=self.string(
                                member, "componentName", member_field, required=True
                            )
                            or "",
                            group_by_key_paths=self.strings(
                                member, "groupByKeyPaths", member_field
                            ),
                            filters=self.strings(member, "filters", member_field),
                        )
                    )
            groups.append(
                PodGroup(
                    name=self.string(group, "name", group_field, required=True) or "",
                    members=tuple(members),
                )
            )
        v2 = None
        v2_data = self.mapping(data, "podGroup", field)
        if v2_data is not None:
            v2_field = f"{field}.podGroup"
            subgroups = []
            for sub_field, item in self.items(v2_data, "subGroups", v2_field):
                sub = self.entry(sub_field, item)
                if sub is not None:
                    subgroups.append(
                        SubGroup(
                            component_name=self.string(
                                sub, "componentName", sub_field, required=True
                            )
                            or "",
                            topology=self.topology(sub, sub_field),
                        )
                    )
            v2 = PodGroupV2(
                name=self.string(v2_data, "name", v2_field, required=True) or "",
                sub_groups=tuple(subgroups),
                topology=self.topology(v2_data, v2_field),
            )
        return GangScheduling(pod_groups=tuple(groups), pod_group=v2)

    def topology(self, data: Mapping[str, Any], field: str) -> Topology | None:
        topo = self.mapping(data, "topology", field)
        if topo is None:
            return None
        field = f"{field}.topology"
        return Topology(
            topology_name=self.string(topo, "topologyName", field, required=True) or "",
            preferred_level=self.string(topo, "preferredTopologyLevel", field, required=True) or "",
            required_level=self.string(topo, "requiredTopologyLevel", field, required=True) or "",
        )


def definitions_from_documents(
    documents: Sequence[Document], *, origin: str = "file"
) -> list[Definition]:
    """Decode already-read documents (see :func:`load_definitions`)."""
    return [_from_document(d, origin) for d in documents]
