"""PlacementPolicy: which clusters a workload may use and which it prefers.

Modelled on Elotl Nova's ``SchedulePolicy`` (``policy.elotl.co/v1alpha1``), with placer's own
``apiVersion: placer.dev/v1alpha1`` and ``kind: PlacementPolicy``::

    apiVersion: placer.dev/v1alpha1
    kind: PlacementPolicy
    metadata:
      name: training
    spec:
      # which workloads the policy applies to (both optional; omitted = every workload)
      namespaceSelector:                  # label selector over the namespace's labels
        matchLabels: {kubernetes.io/metadata.name: team-a}
      resourceSelectors:
        labelSelectors:                   # the workload's labels; ANY selector may match
        - matchLabels: {team: vision}
          matchExpressions: [{key: tier, operator: In, values: [train, tune]}]
      # where it may go (omitted = every cluster)
      clusterSelector:
        matchLabels: {provider: onprem}
        matchExpressions: [{key: region, operator: NotIn, values: [us-east-1]}]
      # fill-and-spill: fill these clusters in this order before any other
      preferredClusters: [central, east]
      objective: pack                     # pack (default) | spread
      clusterCosts: {east: 3, west: 2}    # per-cluster cost weight (>= 0), lower is preferred
      # one workload in several clusters (placer.spread: Karmada's replicaScheduling,
      # spreadConstraints and OverridePolicy's overrideRules)
      replicaScheduling: {replicaSchedulingType: Divided, weightPreference: {...}}
      pendingTimeout: 5m                  # pods unschedulable this long on their member:
                                          #   the controller moves the workload (default 5m)
      retry: {onFailure: 2}               # a failed copy: placed again elsewhere, twice at most
      topology:                           # every pod of a selected workload in one domain
        requiredTopologyLevel: network.topology.nvidia.com/leaf   # (the Workload Map's
        preferredTopologyLevel: nvidia.com/gpu.clique             #  podGroup.topology fields)
      scheduler: volcano                  # the members' scheduler for these workloads
                                          #   (placer.schedulers; overrides the fleet file's)

Why these fields and no more: they are what platform teams use in Nova (selectors, cluster
selector, ordered clusters) plus what a solver can honour exactly (an objective and costs).
Nova's ``groupBy`` is placer's ``placer.dev/group`` label and Nova's pin annotation is the
``placer.dev/cluster`` label; both live on the workload, not in the policy.

Namespaces are matched by their labels; without an API server the only label known for certain
is the one Kubernetes puts on every namespace, ``kubernetes.io/metadata.name``. Clusters are
matched by their labels plus the same virtual ``kubernetes.io/metadata.name`` label holding the
cluster's name, so ``clusterSelector`` can name clusters.

Several policies: the first one (in the order given) whose selectors match a workload applies
to it; a workload no policy matches may go to any cluster with the default objective ``pack``.

Parsing (``load_policies``, ``policies_from_yaml``, ``policy_from_dict``) is strict: unknown
fields, wrong types, unknown operators and empty names are ``PolicyError`` naming the file,
document and field path. Matching (``PlacementPolicy.selects``, ``PlacementPolicy.admits``) is
pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from placer.decoding import Decoder
from placer.errors import PolicyError
from placer.model import Cluster, TopologyConstraint, Workload
from placer.schedulers import SchedulerSpec, scheduler_from_data
from placer.spread import SPEC_FIELDS as SPREAD_FIELDS
from placer.spread import Spread, spread_from_spec
from placer.yamlload import parse_yaml, read_text

__all__ = [
    "API_VERSION",
    "KIND",
    "NAME_LABEL",
    "OBJECTIVES",
    "LabelSelector",
    "PlacementPolicy",
    "SelectorRequirement",
    "load_policies",
    "policies_from_yaml",
    "policy_for",
    "policy_from_dict",
    "unknown_cluster_names",
]

API_VERSION = "placer.dev/v1alpha1"
KIND = "PlacementPolicy"
#: Virtual label carrying a namespace's or cluster's name.
NAME_LABEL = "kubernetes.io/metadata.name"
OBJECTIVES = ("pack", "spread")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_SPEC_FIELDS = (
    "namespaceSelector",
    "resourceSelectors",
    "clusterSelector",
    "preferredClusters",
    "objective",
    "clusterCosts",
    *SPREAD_FIELDS,
    "scheduler",
    "pendingTimeout",
    "retry",
    "topology",
)
_TOPOLOGY_FIELDS = ("requiredTopologyLevel", "preferredTopologyLevel")


@dataclass(frozen=True)
class SelectorRequirement:
    """One ``matchExpressions`` entry of a Kubernetes label selector."""

    key: str
    #: ``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``.
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist


@dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes label selector; the empty selector matches everything."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[SelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(r.matches(labels) for r in self.match_expressions)

    def describe(self) -> str:
        """Compact text (``provider=onprem,region notin (us-east-1)``) for messages."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        for r in self.match_expressions:
            if r.operator in ("In", "NotIn"):
                parts.append(f"{r.key} {r.operator.lower()} ({', '.join(r.values)})")
            elif r.operator == "Exists":
                parts.append(r.key)
            else:
                parts.append(f"!{r.key}")
        return ",".join(parts) or "(everything)"


@dataclass(frozen=True)
class PlacementPolicy:
    """A parsed ``PlacementPolicy``; see the module docstring for the YAML form."""

    name: str
    #: over the namespace's labels (``kubernetes.io/metadata.name`` = its name); None = all.
    namespace_selector: LabelSelector | None = None
    #: over the workload's labels; the policy selects a workload if ANY matches; () = all.
    workload_selectors: tuple[LabelSelector, ...] = ()
    #: over the cluster's labels (plus ``kubernetes.io/metadata.name``); None = all clusters.
    cluster_selector: LabelSelector | None = None
    #: fill-and-spill order: these clusters first, in this order, then the others.
    preferred_clusters: tuple[str, ...] = ()
    #: ``pack`` keeps whole nodes (and clusters) free for big gangs; ``spread`` balances load.
    objective: str = "pack"
    #: per-cluster cost weight (absent = 0); among equally preferred clusters, cheaper first.
    cluster_costs: Mapping[str, float] = field(default_factory=dict)
    #: replicaScheduling, spreadConstraints and overrideRules (:mod:`placer.spread`).
    spread: Spread | None = None
    #: where the policy came from (file and document), for messages.
    source: str = ""
    #: the members' scheduler for the selected workloads (overrides the fleet file's).
    scheduler: SchedulerSpec | None = None
    #: seconds the controller lets a placed workload's pods stay unschedulable on their member
    #: before it moves the workload (``None``: the controller's default, 5 minutes).
    pending_timeout: float | None = None
    #: times the controller places a workload whose copy failed on another cluster (0: never).
    retry_on_failure: int = 0
    #: ``spec.topology``: (required level, preferred level) for every pod of a selected
    #: workload that carries no topology constraint of its own (:func:`topology_of`).
    topology: tuple[str, str] | None = None

    def selects(self, workload: Workload) -> bool:
        """Whether the policy applies to ``workload``."""
        if self.namespace_selector is not None and not self.namespace_selector.matches(
            {NAME_LABEL: workload.ref.namespace}
        ):
            return False
        if self.workload_selectors and not any(
            s.matches(workload.labels) for s in self.workload_selectors
        ):
            return False
        return True

    def admits(self, cluster: Cluster) -> bool:
        """Whether the cluster selector allows ``cluster``."""
        if self.cluster_selector is None:
            return True
        return self.cluster_selector.matches({**cluster.labels, NAME_LABEL: cluster.name})

    def rank(self, cluster: str) -> int:
        """Position in ``preferred_clusters`` (0 first); clusters not listed come after all."""
        try:
            return self.preferred_clusters.index(cluster)
        except ValueError:
            return len(self.preferred_clusters)

    def cost(self, cluster: str) -> float:
        return float(self.cluster_costs.get(cluster, 0.0))


def policy_for(workload: Workload, policies: Sequence[PlacementPolicy]) -> PlacementPolicy | None:
    """The first policy that selects ``workload``, or ``None``."""
    for policy in policies:
        if policy.selects(workload):
            return policy
    return None


def unknown_cluster_names(
    policies: Sequence[PlacementPolicy], clusters: Sequence[str]
) -> list[str]:
    """A warning for each policy naming in ``preferredClusters`` or ``clusterCosts`` a cluster
    that is not one of ``clusters`` (a typo there silently changes nothing)."""
    known = set(clusters)
    warnings = []
    for policy in policies:
        for field_name, names in (
            ("preferredClusters", policy.preferred_clusters),
            ("clusterCosts", tuple(policy.cluster_costs)),
        ):
            unknown = [name for name in names if name not in known]
            if unknown:
                where = f"{policy.source}: " if policy.source else ""
                warnings.append(
                    f"{where}policy {policy.name}: spec.{field_name} names "
                    f"{', '.join(unknown)}, not a cluster of the fleet (clusters: "
                    f"{', '.join(clusters)}); it changes nothing there"
                )
    return warnings


# --------------------------------------------------------------------------------------------
# Parsing


def load_policies(path: str | Path) -> list[PlacementPolicy]:
    """Every PlacementPolicy in a YAML file (several documents allowed)."""
    source = str(path)
    if not Path(path).exists():
        raise PolicyError("no such file", source=source, hint="check the --policy path")
    return policies_from_yaml(read_text(path, PolicyError), source=source)


def policies_from_yaml(text: str, *, source: str = "<policy>") -> list[PlacementPolicy]:
    """Parse YAML text holding one or more PlacementPolicy documents (empty documents skipped)."""
    documents = [
        d for d in parse_yaml(text, source, PolicyError, all_documents=True) if d is not None
    ]
    if not documents:
        raise PolicyError(
            "holds no PlacementPolicy",
            source=source,
            hint=f"write a document with apiVersion {API_VERSION} and kind {KIND}",
        )
    policies = []
    names: set[str] = set()
    for index, document in enumerate(documents):
        where = source if len(documents) == 1 else f"{source} (document {index + 1})"
        policy = policy_from_dict(document, source=where)
        if policy.name in names:
            raise PolicyError(
                f"a second policy is named {policy.name!r}", source=where, field="metadata.name"
            )
        names.add(policy.name)
        policies.append(policy)
    return policies


def policy_from_dict(data: object, *, source: str = "<policy>") -> PlacementPolicy:
    """Validate one parsed document and build the policy."""
    read = Decoder(PolicyError, source)
    if not isinstance(data, Mapping):
        read.fail(None, "a policy must be a mapping with apiVersion, kind, metadata and spec")
    if data.get("apiVersion") != API_VERSION:
        read.fail(
            "apiVersion", f"apiVersion is {data.get('apiVersion')!r}, expected {API_VERSION!r}"
        )
    if data.get("kind") != KIND:
        read.fail("kind", f"kind is {data.get('kind')!r}, expected {KIND!r}")
    metadata = data.get("metadata")
    if not isinstance(metadata, Mapping):
        read.fail("metadata", "must be a mapping with a name")
    name = read.string(metadata.get("name"), "metadata.name", required=True)
    spec = read.mapping(data.get("spec"), "spec")
    read.only(spec, _SPEC_FIELDS, "spec", hint=f"known fields: {', '.join(_SPEC_FIELDS)}")
    namespace_selector = _optional_selector(spec, "namespaceSelector", source)
    workload_selectors: tuple[LabelSelector, ...] = ()
    resource_selectors = spec.get("resourceSelectors")
    if resource_selectors is not None:
        if not isinstance(resource_selectors, Mapping) or set(resource_selectors) - {
            "labelSelectors"
        }:
            read.fail("spec.resourceSelectors", "must be a mapping with labelSelectors")
        workload_selectors = tuple(
            _selector(item, source, where)
            for where, item in read.entries(
                resource_selectors.get("labelSelectors") or [],
                "spec.resourceSelectors.labelSelectors",
                message="must be a list of label selectors",
            )
        )
    cluster_selector = _optional_selector(spec, "clusterSelector", source)
    preferred = spec.get("preferredClusters") or []
    if not isinstance(preferred, list) or not all(isinstance(c, str) and c for c in preferred):
        read.fail("spec.preferredClusters", "must be a list of cluster names")
    if len(set(preferred)) != len(preferred):
        read.fail("spec.preferredClusters", "names a cluster twice")
    objective = spec.get("objective", "pack")
    if objective not in OBJECTIVES:
        read.fail("spec.objective", f"{objective!r} is not one of {', '.join(OBJECTIVES)}")
    costs_data = read.mapping(
        spec.get("clusterCosts") or {},
        "spec.clusterCosts",
        message="must map cluster names to numbers",
    )
    costs = {
        str(cluster): read.number(cost, f"spec.clusterCosts.{cluster}")
        for cluster, cost in costs_data.items()
    }
    scheduler = None
    if spec.get("scheduler") is not None:
        scheduler = scheduler_from_data(
            spec["scheduler"], source=source, field="spec.scheduler", error=PolicyError
        )
    pending_timeout = _duration(spec.get("pendingTimeout"), source, "spec.pendingTimeout")
    retry = spec.get("retry") or {}
    on_failure = retry.get("onFailure", 0) if isinstance(retry, Mapping) else None
    if (
        not isinstance(retry, Mapping)
        or set(retry) - {"onFailure"}
        or isinstance(on_failure, bool)
        or not isinstance(on_failure, int)
        or on_failure < 0
    ):
        raise PolicyError(
            "must be {onFailure: N} with N a whole number >= 0", source=source, field="spec.retry"
        )
    topology = _topology(spec.get("topology"), source)
    return PlacementPolicy(
        name=name,
        topology=topology,
        namespace_selector=namespace_selector,
        workload_selectors=workload_selectors,
        cluster_selector=cluster_selector,
        preferred_clusters=tuple(preferred),
        objective=str(objective),
        cluster_costs=costs,
        spread=spread_from_spec(spec, source, _selector),
        source=source,
        scheduler=scheduler,
        pending_timeout=pending_timeout,
        retry_on_failure=on_failure,
    )


def _topology(value: object, source: str) -> tuple[str, str] | None:
    """``spec.topology`` (the Workload Map's podGroup ``topology`` fields)."""
    if value is None:
        return None
    read = Decoder(PolicyError, source)
    where = "spec.topology"
    data = read.mapping(
        value,
        where,
        message="must be a mapping with requiredTopologyLevel and/or preferredTopologyLevel",
    )
    read.only(data, _TOPOLOGY_FIELDS, where, hint=f"known fields: {', '.join(_TOPOLOGY_FIELDS)}")
    levels = []
    for key in _TOPOLOGY_FIELDS:
        level = read.string(data.get(key), f"{where}.{key}")
        if level and not _LABEL_KEY.match(level):
            read.fail(
                f"{where}.{key}",
                f"must be a node label key (e.g. topology.kubernetes.io/zone), got {level!r}",
            )
        levels.append(level)
    if not any(levels):
        read.fail(where, "give requiredTopologyLevel and/or preferredTopologyLevel")
    return levels[0], levels[1]


_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def topology_of(workload: Workload, policies: Sequence[PlacementPolicy]) -> Workload:
    """``workload`` with its policy's ``spec.topology`` as a constraint over all its pods,
    when it has no topology constraint of its own (the definition's and the annotations'
    win); the workload itself otherwise."""
    if workload.topology or not policies:
        return workload
    policy = policy_for(workload, policies)
    if policy is None or policy.topology is None:
        return workload
    required, preferred = policy.topology
    constraint = TopologyConstraint(
        name=f"policy {policy.name}",
        members=tuple(c.label for c in workload.components),
        required=required,
        preferred=preferred,
        source=f"spec.topology of policy {policy.name}",
    )
    return replace(workload, topology=(constraint,))


def _duration(value: object, source: str, where: str) -> float | None:
    """Seconds from ``90``, ``"90s"``, ``"5m"`` or ``"1h"`` (``None`` when absent)."""
    if value is None:
        return None
    seconds: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", value)
        if match:
            unit = {"s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
            seconds = float(match.group(1)) * unit
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise PolicyError(
            f"must be a positive duration (90, 90s, 5m, 1h), got {value!r}",
            source=source,
            field=where,
        )
    return seconds


def _optional_selector(spec: Mapping[str, Any], key: str, source: str) -> LabelSelector | None:
    if spec.get(key) is None:
        return None
    return _selector(spec[key], source, f"spec.{key}")


def _selector(data: object, source: str, where: str) -> LabelSelector:
    read = Decoder(PolicyError, source)
    if not isinstance(data, Mapping):
        read.fail(where, "must be a label selector (matchLabels, matchExpressions)")
    unknown = set(data) - {"matchLabels", "matchExpressions"}
    if unknown:
        read.fail(
            where,
            f"unknown field {sorted(unknown)[0]!r}",
            hint="a label selector has matchLabels and matchExpressions",
        )
    labels_data = read.mapping(
        data.get("matchLabels") or {}, f"{where}.matchLabels", message="must map labels to values"
    )
    labels: dict[str, str] = {}
    for key, value in labels_data.items():
        if not isinstance(key, str) or isinstance(value, (Mapping, list)) or value is None:
            read.fail(f"{where}.matchLabels", f"entry {key!r} must map a string to a string")
        labels[key] = str(value).lower() if isinstance(value, bool) else str(value)
    expressions = []
    for field_path, item in read.entries(
        data.get("matchExpressions") or [],
        f"{where}.matchExpressions",
        message="must be a list of {key, operator, values}",
    ):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            read.fail(field_path, "must be a mapping with a key")
        operator = item.get("operator")
        if operator not in _OPERATORS:
            read.fail(
                f"{field_path}.operator",
                f"operator {operator!r} is not one of {', '.join(_OPERATORS)}",
            )
        values = item.get("values") or []
        if not isinstance(values, list) or any(isinstance(v, (Mapping, list)) for v in values):
            read.fail(f"{field_path}.values", "must be a list of strings")
        if operator in ("In", "NotIn") and not values:
            read.fail(f"{field_path}.values", f"operator {operator} needs at least one value")
        if operator in ("Exists", "DoesNotExist") and values:
            read.fail(f"{field_path}.values", f"operator {operator} takes no values")
        expressions.append(
            SelectorRequirement(
                key=item["key"], operator=operator, values=tuple(str(v) for v in values)
            )
        )
    return LabelSelector(match_labels=labels, match_expressions=tuple(expressions))
