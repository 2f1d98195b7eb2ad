"""Gang groups of a workload, predicted from its definition before any pod exists.

Upstream resolves gangs per pod at run time: a pod's gang is (pod group, values of the member's
``groupByKeyPaths`` on that pod), and its ``minAvailable`` comes from the definition's scales
(spec section 9). placer must know the gangs of a manifest before placing it, so it predicts the
key values from what the definition says about pod labels (:func:`pod_field_key`):

* a key that reads the component's instance label (JobSet ``replicatedjob-name``) gives one gang
  per instance;
* a key that reads the replica-group label of the member or one of its owners (LWS
  ``group-index``) gives one gang per replica group: the member's own scale is the group size
  (LWS ``group`` scale = ``size``), and the groups share the subtree's pods evenly
  (``replicas`` groups of ``size`` pods, instead of upstream's over-count, spec 13 item 11);
* any other key (job name, cluster name, app name...) is the same for every pod of the workload:
  one gang for all members.

``min_member`` adds up, per member instance, ``minReplicas`` when it is set and positive (elastic
jobs start with the minimum) else the desired replicas. The V2 ``podGroup`` form gives one gang
over its sub-groups' components (or all pod-bearing components). Instances with zero replicas
and empty gangs are left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from placer.definitions.interpret import ExtractedInstance
from placer.definitions.model import Component, Definition
from placer.definitions.pods import ancestors, pod_field_key, subtree
from placer.model import Gang

__all__ = ["minimum_of", "predict_gangs"]


def minimum_of(instance: ExtractedInstance) -> int:
    """Pods of ``instance`` that must run together: positive minReplicas, else replicas."""
    replicas = instance.replicas
    minimum = instance.scale.min_replicas if instance.scale is not None else None
    if minimum is not None and minimum > 0:
        return min(minimum, replicas)
    return replicas


def label_of(component: Component, instance: str) -> str:
    return f"{component.name}/{instance}" if instance else component.name


def predict_gangs(
    definition: Definition, instances: Mapping[str, tuple[ExtractedInstance, ...]]
) -> tuple[Gang, ...]:
    """The gangs of one object (see the module docstring)."""
    gang = definition.gang
    if gang is None:
        return ()
    gangs: list[Gang] = []
    for group in gang.pod_groups:
        buckets = _Buckets()
        for member in group.members:
            try:
                member_component = definition.component(member.component_name)
            except KeyError:
                continue
            keys = {pod_field_key(path) for path in member.group_by_key_paths} - {None}
            replica_label = _replica_label(definition, member_component)
            by_replica = replica_label is not None and replica_label in keys
            pooled: list[tuple[str, int]] = []
            for leaf in subtree(definition, member_component.name):
                if not leaf.has_pod_definition:
                    continue
                instance_label = _instance_label(leaf)
                by_instance = instance_label is not None and instance_label in keys
                for inst in instances.get(leaf.name, ()):
                    if inst.replicas <= 0:
                        continue
                    label = label_of(leaf, inst.id)
                    if by_instance:
                        buckets.add(inst.id, label, minimum_of(inst))
                    elif by_replica:
                        pooled.append((label, inst.replicas))
                    else:
                        buckets.add("", label, minimum_of(inst))
            if pooled:
                size = sum(i.replicas for i in instances.get(member_component.name, ()))
                total = sum(count for _, count in pooled)
                groups = total // size if size > 0 and total % size == 0 else 1
                for index in range(groups):
                    for label, _count in pooled:
                        buckets.add(str(index), label, 0)
                    buckets.add(str(index), None, total // groups)
        for key, (members, minimum) in buckets.items():
            if minimum <= 0:
                continue
            single = key == "" or len(buckets.keys) == 1
            name = group.name if single else f"{group.name}-{key}"
            gangs.append(Gang(name=name, members=tuple(members), min_member=minimum))
    if gang.pod_group is not None:
        v2 = gang.pod_group
        names = [s.component_name for s in v2.sub_groups] or [definition.root.name]
        v2_members: list[str] = []
        minimum = 0
        for name in names:
            for leaf in subtree(definition, name):
                if not leaf.has_pod_definition:
                    continue
                for inst in instances.get(leaf.name, ()):
                    label = label_of(leaf, inst.id)
                    if inst.replicas > 0 and label not in v2_members:
                        v2_members.append(label)
                        minimum += minimum_of(inst)
        if minimum > 0:
            gangs.append(Gang(name=v2.name, members=tuple(v2_members), min_member=minimum))
    return tuple(gangs)


class _Buckets:
    """Gang candidates of one pod group by key value: member labels and the pod count."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._members: dict[str, list[str]] = {}
        self._counts: dict[str, int] = {}

    def add(self, key: str, label: str | None, count: int) -> None:
        if key not in self._members:
            self.keys.append(key)
            self._members[key] = []
            self._counts[key] = 0
        if label is not None and label not in self._members[key]:
            self._members[key].append(label)
        self._counts[key] += count

    def items(self) -> list[tuple[str, tuple[list[str], int]]]:
        return [(k, (self._members[k], self._counts[k])) for k in self.keys]


def _instance_label(component: Component) -> tuple[str, str] | None:
    selector = component.pod_selector
    if selector is None or selector.component_instance is None:
        return None
    return pod_field_key(selector.component_instance.id_path)


def _replica_label(definition: Definition, component: Component) -> tuple[str, str] | None:
    for comp in (component, *ancestors(definition, component)):
        selector = comp.pod_selector
        if selector is not None and selector.replica is not None:
            return pod_field_key(selector.replica.key_path)
    return None
