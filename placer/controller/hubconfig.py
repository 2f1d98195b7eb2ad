"""What the hub's own objects say about placement: live definitions and policies (pure).

* **Karta definitions** (``run.ai/v1alpha1 Karta``, or the older ``optimization.nvidia.com/
  v1alpha1 ResourceInterface``) on the hub extend the catalog while the controller runs, with
  the catalog's rule that a later definition replaces an earlier one for the same kind — the
  hub's win over the built-in ones. An invalid one is reported (its problems, all at once) and
  ignored; when it names a kind no valid definition covers, objects of that kind are told so.
* **PlacementPolicy objects** (placer's CRD, ``placer.dev/v1alpha1``, cluster-scoped) apply to
  decisions after the ``--policy`` files, in name order; a hub policy also *opts in* every
  object it selects. An invalid one is reported and ignored; the others still apply.

* **Queue objects** (placer's CRD, ``placer.dev/v1alpha1``, cluster-scoped) and the hub's
  ``scheduling.k8s.io/v1`` **PriorityClasses** make the controller's queues
  (:mod:`placer.queues`): with at least one valid Queue on the hub every decision honours them.
  A Queue that is invalid alone (a bad field) or in the set (a cycle, an unknown parent,
  children's quotas above the parent's) is reported and left out, and so are the queues under
  it; the others still apply.

Objects are identified by kind and name for messages (``Karta/jobset-v2 on the hub``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.definitions import Catalog, Definition, GroupVersionKind, definition_from_dict
from placer.definitions.validate import check_definition
from placer.errors import PlacerError, QueueError
from placer.model import Workload, WorkloadRef
from placer.objects import labels_of, name_of
from placer.policy import PlacementPolicy, policy_from_dict
from placer.queues import PriorityClass, Queue, QueueSet, queue_from_dict, queue_set
from placer.queues.reader import API_VERSION as QUEUE_API_VERSION
from placer.queues.reader import KIND as QUEUE_KIND_NAME

__all__ = [
    "DEFINITION_KINDS",
    "POLICY_KIND",
    "PRIORITY_CLASS_KIND",
    "QUEUE_KIND",
    "HubDefinitions",
    "HubPolicies",
    "HubQueues",
    "definitions_from_hub",
    "policies_from_hub",
    "queues_from_hub",
    "selector_stub",
]

#: (apiVersion, kind) of definition objects watched on the hub.
DEFINITION_KINDS = (
    ("run.ai/v1alpha1", "Karta"),
    ("optimization.nvidia.com/v1alpha1", "ResourceInterface"),
)
#: (apiVersion, kind) of placer's policy CRD.
POLICY_KIND = ("placer.dev/v1alpha1", "PlacementPolicy")
#: (apiVersion, kind) of placer's queue CRD.
QUEUE_KIND = (QUEUE_API_VERSION, QUEUE_KIND_NAME)
#: (apiVersion, kind) of Kubernetes' PriorityClass.
PRIORITY_CLASS_KIND = ("scheduling.k8s.io/v1", "PriorityClass")


def describe(obj: Mapping[str, Any]) -> str:
    """``Karta/jobset-v2 on the hub``."""
    return f"{obj.get('kind', '?')}/{name_of(obj) or '?'} on the hub"


@dataclass(frozen=True)
class HubDefinitions:
    """The hub's definitions, read."""

    catalog: Catalog
    #: definition object name -> why it is ignored.
    problems: Mapping[str, str] = field(default_factory=dict)
    #: kinds named by an invalid definition and covered by no valid one -> the problem.
    uncovered: Mapping[GroupVersionKind, str] = field(default_factory=dict)
    #: kinds the hub's valid definitions cover.
    kinds: tuple[GroupVersionKind, ...] = ()


def definitions_from_hub(base: Catalog, objects: Iterable[Mapping[str, Any]]) -> HubDefinitions:
    """``base`` extended with the valid definitions among ``objects`` (sorted by name)."""
    valid: list[Definition] = []
    problems: dict[str, str] = {}
    claimed: dict[GroupVersionKind, str] = {}
    for obj in sorted(objects, key=name_of):
        name = name_of(obj) or "?"
        try:
            definition = definition_from_dict(obj, source=describe(obj), origin="cluster")
            valid.append(check_definition(definition))
        except PlacerError as err:
            problems[name] = str(err)
            target = _raw_target(obj)
            if target is not None:
                claimed[target] = f"definition {describe(obj)} is invalid: {err}"
    catalog = base.with_definitions(valid) if valid else base
    uncovered = {}
    for gvk, text in claimed.items():
        try:
            catalog.find(gvk.api_version, gvk.kind)
        except PlacerError:
            uncovered[gvk] = text
    kinds = tuple(d.target for d in valid if d.target is not None)
    return HubDefinitions(catalog, problems, uncovered, kinds)


def _raw_target(obj: Mapping[str, Any]) -> GroupVersionKind | None:
    """The root kind an (invalid) definition names, when it can be read at all."""
    try:
        kind = obj["spec"]["structureDefinition"]["rootComponent"]["kind"]
        group, version, name = kind.get("group") or "", kind["version"], kind["kind"]
    except (KeyError, TypeError, AttributeError):
        return None
    if not all(isinstance(x, str) for x in (group, version, name)) or not version or not name:
        return None
    return GroupVersionKind(group=group, version=version, kind=name)


@dataclass(frozen=True)
class HubPolicies:
    """The hub's PlacementPolicies, read."""

    policies: tuple[PlacementPolicy, ...] = ()
    #: policy object name -> why it is ignored.
    problems: Mapping[str, str] = field(default_factory=dict)


def policies_from_hub(objects: Iterable[Mapping[str, Any]]) -> HubPolicies:
    """The valid policies among ``objects``, in name order, and the problems of the others."""
    policies: list[PlacementPolicy] = []
    problems: dict[str, str] = {}
    for obj in sorted(objects, key=name_of):
        clean = {k: v for k, v in obj.items() if k in ("apiVersion", "kind", "spec")}
        clean["metadata"] = {"name": name_of(obj) or "?"}
        try:
            policy = policy_from_dict(clean, source=describe(obj))
        except PlacerError as err:
            problems[name_of(obj) or "?"] = str(err)
            continue
        policies.append(policy)
    return HubPolicies(tuple(policies), problems)


def selector_stub(obj: Mapping[str, Any], ref: WorkloadRef) -> Workload:
    """A demand-less :class:`Workload` with the object's labels, enough for policy selection."""
    return Workload(ref=ref, components=(), labels=labels_of(obj))


def selected(
    obj: Mapping[str, Any], ref: WorkloadRef, policies: Sequence[PlacementPolicy]
) -> PlacementPolicy | None:
    """The first hub policy selecting the object, or ``None``."""
    stub = selector_stub(obj, ref)
    for policy in policies:
        if policy.selects(stub):
            return policy
    return None


#: the ``source`` of the queues read from the hub, in messages ("not defined in the hub").
HUB_SOURCE = "the hub"


@dataclass(frozen=True)
class HubQueues:
    """The hub's queues and priority classes, read."""

    #: ``None``: the hub has no valid Queue (decisions ignore queues, as before them).
    queues: QueueSet | None = None
    #: Queue object name -> why it is left out.
    problems: Mapping[str, str] = field(default_factory=dict)
    #: the hub's PriorityClasses (a workload's ``priorityClassName`` gives its priority, with
    #: queues or without).
    classes: QueueSet = field(default_factory=QueueSet)


def queues_from_hub(
    queue_objects: Iterable[Mapping[str, Any]], class_objects: Iterable[Mapping[str, Any]] = ()
) -> HubQueues:
    """The valid queues among ``queue_objects`` with the hub's PriorityClasses, and why each
    other Queue is left out (module docstring). A queue the set refuses is left out and the set
    is built again without it, so that one bad Queue never stops the others."""
    queues: dict[str, Queue] = {}
    problems: dict[str, str] = {}
    for obj in sorted(queue_objects, key=name_of):
        name = name_of(obj) or "?"
        clean = {k: v for k, v in obj.items() if k in ("apiVersion", "kind", "spec")}
        clean["metadata"] = {"name": name}
        try:
            queues[name] = queue_from_dict(clean, source=describe(obj))
        except QueueError as err:
            problems[name] = str(err)
    classes = []
    for obj in class_objects:
        value = obj.get("value")
        name = name_of(obj)
        if not name or isinstance(value, bool) or not isinstance(value, int):
            continue  # the API server validates PriorityClasses: not placer's to report
        default = obj.get("globalDefault") is True
        classes.append(PriorityClass(name, value, global_default=default, source=describe(obj)))
    known = QueueSet(classes={c.name: c for c in classes}, source=HUB_SOURCE)
    while queues:
        try:
            built = queue_set(list(queues.values()), classes, source=HUB_SOURCE)
        except QueueError as err:
            culprit = next((n for n, q in queues.items() if q.source == err.source), None)
            if culprit is None:  # two global default classes: the queues without classes
                built = queue_set(list(queues.values()), (), source=HUB_SOURCE)
                return HubQueues(built, problems, QueueSet(source=HUB_SOURCE))
            problems[culprit] = str(err)
            del queues[culprit]
            for other, queue in list(queues.items()):
                if queue.parent == culprit:  # its children name a parent left out
                    problems[other] = (
                        f"{queue.source}: spec.parent: queue {culprit!r} is invalid ({err}); "
                        "this queue is left out with it"
                    )
                    del queues[other]
            continue
        return HubQueues(built, problems, known)
    return HubQueues(None, problems, known)
