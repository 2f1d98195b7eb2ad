"""Spreading one workload over several clusters: the policy's ``replicaScheduling`` and
``overrideRules``, with Karmada's field names and meanings.

In a ``PlacementPolicy`` (:mod:`placer.policy`)::

    spec:
      replicaScheduling:                     # Karmada PropagationPolicy's replicaScheduling
        replicaSchedulingType: Divided       # Duplicated: the whole workload to every matching
                                             #   cluster; Divided: its replicas split over them
        replicaDivisionPreference: Weighted  # Weighted (default) | Aggregated (fewest clusters)
        weightPreference:
          staticWeightList:                  # Weighted by fixed weights ...
          - targetCluster: {clusterNames: [east]}
            weight: 3
          - targetCluster: {labelSelector: {matchLabels: {region: eu}}}
            weight: 1
          dynamicWeight: AvailableReplicas   # ... or by how many replicas fit on real nodes
        minReplicasPerCluster: 1             # placer: a cluster gets none or at least this many
        maxReplicasPerCluster: 4             # placer: and at most this many
      spreadConstraints:                     # Karmada: how many clusters (spreadByField cluster)
      - {spreadByField: cluster, minGroups: 2, maxGroups: 3}
      overrideRules:                         # Karmada OverridePolicy's rules, per copy
      - targetCluster: {labelSelector: {matchLabels: {region: eu}}}
        overriders:
          imageOverrider: [{component: Registry, operator: replace, value: eu.registry.example}]
          plaintext: [{path: /spec/template/metadata/labels/region, operator: add, value: eu}]
          mergePatch: {metadata: {labels: {tier: eu}}}   # placer: a JSON merge patch

Parsing is strict (unknown fields and values are errors naming the field); the cluster
selectors are parsed by the caller's label-selector parser, so this module has no policy
import. Pure: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from placer.errors import PolicyError
from placer.model import Cluster

__all__ = [
    "DIVISIONS",
    "NAME_LABEL",
    "SCHEDULING_TYPES",
    "ClusterTarget",
    "OverrideRule",
    "ReplicaScheduling",
    "Spread",
    "StaticWeight",
    "apply_overrides",
    "spread_from_spec",
]

SCHEDULING_TYPES = ("Duplicated", "Divided")
DIVISIONS = ("Weighted", "Aggregated")
NAME_LABEL = "kubernetes.io/metadata.name"
SPEC_FIELDS = ("replicaScheduling", "spreadConstraints", "overrideRules")
_SCHEDULING_FIELDS = (
    "replicaSchedulingType",
    "replicaDivisionPreference",
    "weightPreference",
    "minReplicasPerCluster",
    "maxReplicasPerCluster",
)


class Matcher(Protocol):
    def matches(self, labels: Mapping[str, str]) -> bool: ...
    def describe(self) -> str: ...


SelectorParser = Callable[[object, str, str], Matcher]


@dataclass(frozen=True)
class ClusterTarget:
    """Karmada's ``ClusterAffinity`` subset: cluster names and/or a label selector (both must
    hold when both are given); empty: every cluster."""

    cluster_names: tuple[str, ...] = ()
    selector: Matcher | None = None

    def matches(self, cluster: Cluster) -> bool:
        if self.cluster_names and cluster.name not in self.cluster_names:
            return False
        if self.selector is not None:
            return self.selector.matches({**cluster.labels, NAME_LABEL: cluster.name})
        return True

    def describe(self) -> str:
        parts = []
        if self.cluster_names:
            parts.append(f"clusters {', '.join(self.cluster_names)}")
        if self.selector is not None:
            parts.append(f"labels {self.selector.describe()}")
        return " and ".join(parts) or "every cluster"


@dataclass(frozen=True)
class StaticWeight:
    target: ClusterTarget
    weight: int


@dataclass(frozen=True)
class ReplicaScheduling:
    """Karmada's ``ReplicaSchedulingStrategy`` plus placer's per-cluster bounds."""

    type: str = "Duplicated"
    division: str = "Weighted"
    static_weights: tuple[StaticWeight, ...] = ()
    #: ``dynamicWeight: AvailableReplicas``.
    dynamic: bool = False
    min_per_cluster: int = 0
    max_per_cluster: int | None = None

    def static_weight(self, cluster: Cluster) -> int:
        """The weight of the first ``staticWeightList`` entry matching ``cluster`` (0: none)."""
        for entry in self.static_weights:
            if entry.target.matches(cluster):
                return entry.weight
        return 0


@dataclass(frozen=True)
class JsonPatchOperation:
    """Karmada's ``plaintext`` overrider: ``operator`` add, remove or replace at ``path``."""

    path: str
    operator: str
    value: Any = None


@dataclass(frozen=True)
class OverrideRule:
    """What to change in the copy sent to the clusters ``target`` matches."""

    target: ClusterTarget
    plaintext: tuple[JsonPatchOperation, ...] = ()
    #: imageOverrider: component (Registry, Repository, Tag) -> replacement.
    images: tuple[tuple[str, str], ...] = ()
    merge_patch: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Spread:
    """A policy's spreading instructions."""

    scheduling: ReplicaScheduling | None = None
    min_clusters: int = 1
    max_clusters: int | None = None
    overrides: tuple[OverrideRule, ...] = ()


def _error(message: str, source: str, where: str, hint: str | None = None) -> PolicyError:
    return PolicyError(message, source=source, field=where, hint=hint)


def _int(value: object, source: str, where: str, *, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise _error(f"must be an integer >= {least}, got {value!r}", source, where)
    return value


def _mapping(value: object, source: str, where: str, known: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _error("must be a mapping", source, where)
    for key in value:
        if key not in known:
            raise _error(
                f"unknown field {key!r}",
                source,
                f"{where}.{key}",
                hint=f"known fields: {', '.join(known)}",
            )
    return value


def _target(data: object, source: str, where: str, selector: SelectorParser) -> ClusterTarget:
    target = _mapping(data, source, where, ("clusterNames", "labelSelector"))
    names = target.get("clusterNames") or []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise _error("must be a list of cluster names", source, f"{where}.clusterNames")
    label_selector = target.get("labelSelector")
    return ClusterTarget(
        cluster_names=tuple(names),
        selector=selector(label_selector, source, f"{where}.labelSelector")
        if label_selector is not None
        else None,
    )


def _scheduling(data: object, source: str, selector: SelectorParser) -> ReplicaScheduling:
    where = "spec.replicaScheduling"
    spec = _mapping(data, source, where, _SCHEDULING_FIELDS)
    kind = spec.get("replicaSchedulingType", "Duplicated")
    if kind not in SCHEDULING_TYPES:
        raise _error(
            f"{kind!r} is not one of {', '.join(SCHEDULING_TYPES)}",
            source,
            f"{where}.replicaSchedulingType",
        )
    division = spec.get("replicaDivisionPreference", "Weighted")
    if division not in DIVISIONS:
        raise _error(
            f"{division!r} is not one of {', '.join(DIVISIONS)}",
            source,
            f"{where}.replicaDivisionPreference",
        )
    weights: list[StaticWeight] = []
    dynamic = False
    preference = spec.get("weightPreference")
    if preference is not None:
        at = f"{where}.weightPreference"
        preference = _mapping(preference, source, at, ("staticWeightList", "dynamicWeight"))
        items = preference.get("staticWeightList") or []
        if not isinstance(items, list):
            raise _error("must be a list", source, f"{at}.staticWeightList")
        for index, item in enumerate(items):
            item_at = f"{at}.staticWeightList[{index}]"
            entry = _mapping(item, source, item_at, ("targetCluster", "weight"))
            weights.append(
                StaticWeight(
                    target=_target(
                        entry.get("targetCluster", {}), source, f"{item_at}.targetCluster", selector
                    ),
                    weight=_int(entry.get("weight"), source, f"{item_at}.weight", least=1),
                )
            )
        dynamic_weight = preference.get("dynamicWeight")
        if dynamic_weight is not None and dynamic_weight != "AvailableReplicas":
            raise _error(
                f"{dynamic_weight!r} is not AvailableReplicas", source, f"{at}.dynamicWeight"
            )
        dynamic = dynamic_weight is not None
        if dynamic and weights:
            raise _error("give staticWeightList or dynamicWeight, not both", source, at)
    if kind == "Duplicated" and (preference is not None or "replicaDivisionPreference" in spec):
        raise _error(
            "weightPreference and replicaDivisionPreference apply to Divided only",
            source,
            f"{where}.replicaSchedulingType",
        )
    low = spec.get("minReplicasPerCluster", 0)
    high = spec.get("maxReplicasPerCluster")
    minimum = _int(low, source, f"{where}.minReplicasPerCluster", least=0)
    maximum = (
        _int(high, source, f"{where}.maxReplicasPerCluster", least=1) if high is not None else None
    )
    if maximum is not None and maximum < minimum:
        raise _error("is below minReplicasPerCluster", source, f"{where}.maxReplicasPerCluster")
    return ReplicaScheduling(
        type=str(kind),
        division=str(division),
        static_weights=tuple(weights),
        dynamic=dynamic,
        min_per_cluster=minimum,
        max_per_cluster=maximum,
    )


_IMAGE_COMPONENTS = ("Registry", "Repository", "Tag")


def _override(data: object, source: str, where: str, selector: SelectorParser) -> OverrideRule:
    rule = _mapping(data, source, where, ("targetCluster", "overriders"))
    target = _target(rule.get("targetCluster", {}), source, f"{where}.targetCluster", selector)
    at = f"{where}.overriders"
    overriders = _mapping(
        rule.get("overriders", {}), source, at, ("plaintext", "imageOverrider", "mergePatch")
    )
    plaintext = []
    for index, item in enumerate(overriders.get("plaintext") or []):
        op_at = f"{at}.plaintext[{index}]"
        op = _mapping(item, source, op_at, ("path", "operator", "value"))
        path = op.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            raise _error("must be a JSON pointer (/spec/...)", source, f"{op_at}.path")
        operator = op.get("operator")
        if operator not in ("add", "remove", "replace"):
            raise _error(
                f"{operator!r} is not one of add, remove, replace", source, f"{op_at}.operator"
            )
        plaintext.append(JsonPatchOperation(path, str(operator), op.get("value")))
    images = []
    for index, item in enumerate(overriders.get("imageOverrider") or []):
        image_at = f"{at}.imageOverrider[{index}]"
        image = _mapping(item, source, image_at, ("component", "operator", "value"))
        component = image.get("component")
        if component not in _IMAGE_COMPONENTS:
            raise _error(
                f"{component!r} is not one of {', '.join(_IMAGE_COMPONENTS)}",
                source,
                f"{image_at}.component",
            )
        if image.get("operator", "replace") != "replace":
            raise _error(
                "placer supports operator replace only",
                source,
                f"{image_at}.operator",
            )
        value = image.get("value")
        if not isinstance(value, str) or not value:
            raise _error("must be a non-empty string", source, f"{image_at}.value")
        images.append((str(component), value))
    merge = overriders.get("mergePatch")
    if merge is not None and not isinstance(merge, Mapping):
        raise _error("must be a mapping (a JSON merge patch)", source, f"{at}.mergePatch")
    return OverrideRule(
        target=target, plaintext=tuple(plaintext), images=tuple(images), merge_patch=merge
    )


def spread_from_spec(
    spec: Mapping[str, Any], source: str, selector: SelectorParser
) -> Spread | None:
    """The spreading fields of a policy's ``spec`` (``None`` when it has none)."""
    if not any(key in spec for key in SPEC_FIELDS):
        return None
    scheduling = (
        _scheduling(spec["replicaScheduling"], source, selector)
        if spec.get("replicaScheduling") is not None
        else None
    )
    min_clusters, max_clusters = 1, None
    for index, item in enumerate(spec.get("spreadConstraints") or []):
        at = f"spec.spreadConstraints[{index}]"
        constraint = _mapping(item, source, at, ("spreadByField", "minGroups", "maxGroups"))
        if constraint.get("spreadByField", "cluster") != "cluster":
            raise _error(
                "placer spreads by cluster only (spreadByField: cluster)",
                source,
                f"{at}.spreadByField",
            )
        if "minGroups" in constraint:
            min_clusters = _int(constraint["minGroups"], source, f"{at}.minGroups", least=1)
        if "maxGroups" in constraint:
            max_clusters = _int(constraint["maxGroups"], source, f"{at}.maxGroups", least=1)
    if max_clusters is not None and max_clusters < min_clusters:
        raise _error("maxGroups is below minGroups", source, "spec.spreadConstraints")
    rules = spec.get("overrideRules") or []
    if not isinstance(rules, list):
        raise _error("must be a list", source, "spec.overrideRules")
    return Spread(
        scheduling=scheduling,
        min_clusters=min_clusters,
        max_clusters=max_clusters,
        overrides=tuple(
            _override(item, source, f"spec.overrideRules[{i}]", selector)
            for i, item in enumerate(rules)
        ),
    )


# --------------------------------------------------------------------------------------------
# Overrides


def _split_image(image: str) -> tuple[str, str, str]:
    """(registry, repository, tag-with-separator) of an image reference."""
    digest = ""
    if "@" in image:
        image, digest = image.split("@", 1)
        digest = "@" + digest
    registry, rest = "", image
    first, _, remainder = image.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost"):
        registry, rest = first, remainder
    repository, tag = rest, ""
    if ":" in rest.rsplit("/", 1)[-1]:
        repository, tag = rest.rsplit(":", 1)
        tag = ":" + tag
    return registry, repository, tag + digest


def rewrite_image(image: str, component: str, value: str) -> str:
    """``image`` with its registry, repository or tag replaced by ``value``."""
    registry, repository, tag = _split_image(image)
    if component == "Registry":
        registry = value
    elif component == "Repository":
        repository = value
    else:
        tag = ":" + value
    return f"{registry}/{repository}{tag}" if registry else f"{repository}{tag}"


def _images(node: Any, change: Callable[[str], str]) -> None:
    """Every ``image`` of every container, init container and ephemeral container, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers", "ephemeralContainers") and isinstance(
                value, list
            ):
                for container in value:
                    if isinstance(container, dict) and isinstance(container.get("image"), str):
                        container["image"] = change(container["image"])
            _images(value, change)
    elif isinstance(node, list):
        for item in node:
            _images(item, change)


def _image_rewriter(component: str, value: str) -> Callable[[str], str]:
    def change(image: str) -> str:
        return rewrite_image(image, component, value)

    return change


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def apply_overrides(
    manifest: Mapping[str, Any], cluster: Cluster, rules: Sequence[OverrideRule]
) -> dict[str, Any]:
    """The copy of ``manifest`` for ``cluster``: every rule whose target matches it, in order
    (images, then the JSON patch operations, then the merge patch). Raises ``ValueError``
    naming the path of a JSON patch operation that does not apply."""
    import jsonpatch  # type: ignore[import-untyped,unused-ignore]

    result: dict[str, Any] = copy.deepcopy(dict(manifest))
    for rule in rules:
        if not rule.target.matches(cluster):
            continue
        for component, value in rule.images:
            _images(result, _image_rewriter(component, value))
        if rule.plaintext:
            operations = [
                {"op": op.operator, "path": op.path}
                | ({"value": op.value} if op.operator != "remove" else {})
                for op in rule.plaintext
            ]
            try:
                result = jsonpatch.apply_patch(result, operations)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
                raise ValueError(
                    f"override for cluster {cluster.name} does not apply: {err}"
                ) from None
        if rule.merge_patch is not None:
            result = _merge(result, rule.merge_patch)
    return result
