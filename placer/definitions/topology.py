"""A workload's topology constraints: which pods must share a rack, block or NVLink domain.

Read from three places, each giving a :class:`~placer.model.TopologyConstraint`:

* the definition's V2 gang form: ``podGroup.topology`` covers the pod group's components (its
  sub-groups', or every pod-bearing one), and a sub-group's own ``topology`` covers the pods of
  that component's subtree (KAI's reading of the fields, spec section 9.4);
* KAI Scheduler's annotations on the workload object (``kai.scheduler/topology``,
  ``kai.scheduler/topology-required-placement``, ``kai.scheduler/topology-preferred-placement``):
  every pod of the workload;
* Kueue's Topology Aware Scheduling annotations on a pod template
  (``kueue.x-k8s.io/podset-required-topology``, ``kueue.x-k8s.io/podset-preferred-topology``):
  the pods of that component instance (a Kueue pod set).

Every level must be one placer knows (:meth:`placer.topology.Topologies.problem`); an unknown
one is an :class:`~placer.errors.InterpretationError` naming the field. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from placer.definitions.model import Definition, Topology
from placer.definitions.pods import subtree
from placer.errors import InterpretationError
from placer.model import TopologyConstraint
from placer.topology import Topologies

__all__ = [
    "KAI_PREFERRED",
    "KAI_REQUIRED",
    "KAI_TOPOLOGY",
    "KUEUE_PREFERRED",
    "KUEUE_REQUIRED",
    "topology_constraints",
]

KAI_TOPOLOGY = "kai.scheduler/topology"
KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


class _Instance(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def replicas(self) -> int: ...
    @property
    def template(self) -> Mapping[str, Any]: ...


def topology_constraints(
    definition: Definition,
    instances: Sequence[_Instance],
    annotations: Mapping[str, str],
    topologies: Topologies,
    *,
    where: str,
) -> tuple[TopologyConstraint, ...]:
    """The constraints of one object (see the module docstring)."""
    placed = [i for i in instances if i.replicas > 0]
    found: list[TopologyConstraint] = []

    def check(level: str, topology: str, field: str) -> None:
        problem = topologies.problem(level, topology)
        if problem is not None:
            raise InterpretationError(f"{where}: {field}: {problem}")

    def labels_under(names: Sequence[str]) -> tuple[str, ...]:
        components = {c.name for n in names for c in subtree(definition, n)}
        return tuple(dict.fromkeys(i.label for i in placed if i.name in components))

    def add(name: str, members: tuple[str, ...], topo: Topology, field: str) -> None:
        if not (topo.required_level or topo.preferred_level) or not members:
            return
        check(topo.required_level, topo.topology_name, f"{field}.requiredTopologyLevel")
        check(topo.preferred_level, topo.topology_name, f"{field}.preferredTopologyLevel")
        found.append(
            TopologyConstraint(
                name=name,
                members=members,
                required=topo.required_level,
                preferred=topo.preferred_level,
                source=f"{field} of {definition.label}",
            )
        )

    group = definition.gang.pod_group if definition.gang is not None else None
    if group is not None:
        field = "optimizationInstructions.gangScheduling.podGroup"
        names = [s.component_name for s in group.sub_groups] or [definition.root.name]
        if group.topology is not None:
            add(group.name, labels_under(names), group.topology, f"{field}.topology")
        for index, sub in enumerate(group.sub_groups):
            if sub.topology is not None:
                add(
                    f"{group.name}/{sub.component_name}",
                    labels_under([sub.component_name]),
                    sub.topology,
                    f"{field}.subGroups[{index}].topology",
                )

    required = annotations.get(KAI_REQUIRED, "")
    preferred = annotations.get(KAI_PREFERRED, "")
    if (required or preferred) and placed:
        name = annotations.get(KAI_TOPOLOGY, "")
        check(required, name, f'metadata.annotations["{KAI_REQUIRED}"]')
        check(preferred, name, f'metadata.annotations["{KAI_PREFERRED}"]')
        found.append(
            TopologyConstraint(
                name="workload",
                members=tuple(dict.fromkeys(i.label for i in placed)),
                required=required,
                preferred=preferred,
                source="KAI annotations",
            )
        )

    for instance in placed:
        metadata = instance.template.get("metadata")
        pod_annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
        if not isinstance(pod_annotations, Mapping):
            continue
        required = str(pod_annotations.get(KUEUE_REQUIRED) or "")
        preferred = str(pod_annotations.get(KUEUE_PREFERRED) or "")
        if not (required or preferred):
            continue
        field = f"component {instance.label!r}: pod template metadata.annotations"
        check(required, "", f'{field}["{KUEUE_REQUIRED}"]')
        check(preferred, "", f'{field}["{KUEUE_PREFERRED}"]')
        found.append(
            TopologyConstraint(
                name=instance.label,
                members=(instance.label,),
                required=required,
                preferred=preferred,
                source="Kueue pod set annotations",
            )
        )
    return tuple(found)
