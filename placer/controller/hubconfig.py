"""What the hub's own objects say about placement: live definitions and policies (pure).

* **Karta definitions** (``run.ai/v1alpha1 Karta``, or the older ``optimization.nvidia.com/
  v1alpha1 ResourceInterface``) on the hub extend the catalog while the controller runs, with
  the catalog's rule that a later definition replaces an earlier one for the same kind — the
  hub's win over the built-in ones. An invalid one is reported (its problems, all at once) and
  ignored; when it names a kind no valid definition covers, objects of that kind are told so.
* **PlacementPolicy objects** (placer's CRD, ``placer.dev/v1alpha1``, cluster-scoped) apply to
  decisions after the ``--policy`` files, in name order; a hub policy also *opts in* every
  object it selects. An invalid one is reported and ignored; the others still apply.

Objects are identified by kind and name for messages (``Karta/jobset-v2 on the hub``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.definitions import Catalog, Definition, GroupVersionKind, definition_from_dict
from placer.definitions.validate import check_definition
from placer.errors import PlacerError
from placer.model import Workload, WorkloadRef
from placer.objects import labels_of, name_of
from placer.policy import PlacementPolicy, policy_from_dict

__all__ = [
    "DEFINITION_KINDS",
    "POLICY_KIND",
    "HubDefinitions",
    "HubPolicies",
    "definitions_from_hub",
    "policies_from_hub",
    "selector_stub",
]

#: (apiVersion, kind) of definition objects watched on the hub.
DEFINITION_KINDS = (
    ("run.ai/v1alpha1", "Karta"),
    ("optimization.nvidia.com/v1alpha1", "ResourceInterface"),
)
#: (apiVersion, kind) of placer's policy CRD.
POLICY_KIND = ("placer.dev/v1alpha1", "PlacementPolicy")


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
