"""What a pod asks of a node, read from a PodSpec exactly as kube-scheduler reads it.

Pure functions over plain dicts (a PodSpec as JSON). Used by workload decomposition (pod
templates), by capacity gathering (bound pods) and by the solver (node matching).

Effective request (kube-scheduler's ``PodRequests``, with native sidecars), per resource:

1. ``running`` = Σ regular containers + Σ sidecars (init containers with
   ``restartPolicy: Always``);
2. each init container, in order, needs its own request plus every sidecar started before it
   (a sidecar needs the sum of all sidecars up to and including itself);
   ``init`` = the largest of these;
3. ``total`` = max(``running``, ``init``);
4. pod-level ``spec.resources`` requests for cpu/memory replace the total for that resource;
5. plus ``spec.overhead``.

A container (or the pod level) with a limit but no request for a resource requests its limit,
as the API server defaults it.

Requests and limits follow the API server's validation (a pod breaking them is never created,
so a workload asking for it must not be placed): amounts are not negative, extended resources
(``nvidia.com/gpu``) are whole numbers and, when both are given, a limit equal to the request;
other requests do not exceed their limits. (A request without a limit is accepted for extended
resources too: operators of custom resources fill the limit in when they create the pods.)
A breach raises ``ValueError`` naming the field:
``containers[0].resources.limits[nvidia.com/gpu]: '-8' must be greater than or equal to 0``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from placer.decoding import type_name
from placer.model import (
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodDemand,
    Taint,
    Toleration,
)
from placer.quantity import add, overcommit_allowed, resource_amount, to_canonical

__all__ = [
    "container_requests",
    "node_mismatch",
    "parse_affinity",
    "parse_tolerations",
    "pod_demand",
    "pod_requests",
    "taint_not_tolerated",
]

#: Resources that pod-level ``spec.resources`` may set (Kubernetes PodLevelResources).
_POD_LEVEL = ("cpu", "memory")


def container_requests(
    resources: Mapping[str, Any] | None, where: str = "", *, strict: bool = True
) -> dict[str, int]:
    """A container's requests: ``requests``, completed by ``limits`` where a request is absent.

    Raises ``ValueError`` (naming ``where`` + the field) when they break Kubernetes' rules;
    ``strict=False`` (pods read from a cluster, which the API server validated) checks only that
    they are quantities.
    """
    if not resources:
        return {}
    field = f"{where}resources"
    raw_requests = _shaped(resources.get("requests"), f"{field}.requests", strict)
    raw_limits = _shaped(resources.get("limits"), f"{field}.limits", strict)
    requests = _amounts(raw_requests, f"{field}.requests", strict)
    limits = _amounts(raw_limits, f"{field}.limits", strict)
    for name, request in requests.items() if strict else ():
        limit = limits.get(name)
        at = f"{field}.requests[{name}]"
        if limit is None:
            # Kubernetes wants a limit for extended resources in a pod; the templates of custom
            # resources often leave it to their operator, so a request alone is read as both
            continue
        if not overcommit_allowed(name) and request != limit:
            raise ValueError(
                f"{at}: {raw_requests[name]!r} must be equal to the {name} limit of "
                f"{raw_limits[name]!r}"
            )
        elif request > limit:
            raise ValueError(
                f"{at}: {raw_requests[name]!r} must be less than or equal to the {name} limit "
                f"of {raw_limits[name]!r}"
            )
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    return requests


def _amounts(values: Mapping[str, Any], field: str, strict: bool = True) -> dict[str, int]:
    result: dict[str, int] = {}
    read = resource_amount if strict else to_canonical
    for name, value in values.items():
        try:
            result[str(name)] = read(str(name), value)
        except ValueError as exc:
            raise ValueError(f"{field}[{name}]: {exc}") from None
    return result


def pod_requests(spec: Mapping[str, Any], *, strict: bool = True) -> dict[str, int]:
    """The pod's effective request (see module docstring), canonical units, zeros dropped.

    ``strict=False`` for pods read from a cluster: only the quantities are checked.
    """
    running = add(
        *(
            container_requests(
                _shaped(container.get("resources"), f"containers[{index}].resources", strict),
                f"containers[{index}].",
                strict=strict,
            )
            for index, container in enumerate(_containers(spec, "containers", strict))
        )
    )
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for index, container in enumerate(_containers(spec, "initContainers", strict)):
        own = container_requests(
            _shaped(container.get("resources"), f"initContainers[{index}].resources", strict),
            f"initContainers[{index}].",
            strict=strict,
        )
        if container.get("restartPolicy") == "Always":
            running = add(running, own)
            sidecars = add(sidecars, own)
            need = dict(sidecars)
        else:
            need = add(sidecars, own)
        for name, amount in need.items():
            init_peak[name] = max(init_peak.get(name, 0), amount)
    total = dict(running)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    pod_level = container_requests(_mapping(spec.get("resources")), strict=strict)
    for name in _POD_LEVEL:
        if name in pod_level:
            total[name] = pod_level[name]
    total = add(total, _amounts(_mapping(spec.get("overhead")), "overhead", strict))
    return {name: amount for name, amount in total.items() if amount}


def parse_tolerations(items: object) -> tuple[Toleration, ...]:
    """``spec.tolerations`` to model objects (unknown fields ignored)."""
    result = []
    for item in _list(items):
        result.append(
            Toleration(
                key=str(item.get("key") or ""),
                operator=str(item.get("operator") or "Equal"),
                value=str(item.get("value") or ""),
                effect=str(item.get("effect") or ""),
            )
        )
    return tuple(result)


def parse_affinity(affinity: object) -> tuple[NodeSelectorTerm, ...]:
    """Required node-affinity terms of ``spec.affinity`` (ORed); empty when there are none."""
    node_affinity = _mapping(_mapping(affinity).get("nodeAffinity"))
    required = _mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = []
    for term in _list(required.get("nodeSelectorTerms")):
        terms.append(
            NodeSelectorTerm(
                match_expressions=_requirements(term.get("matchExpressions")),
                match_fields=_requirements(term.get("matchFields")),
            )
        )
    return tuple(terms)


def pod_demand(spec: Mapping[str, Any], *, strict: bool = True) -> PodDemand:
    """Everything placement needs from a PodSpec (``strict``: see :func:`pod_requests`)."""
    selector = _mapping(spec.get("nodeSelector"))
    return PodDemand(
        requests=pod_requests(spec, strict=strict),
        node_selector={str(k): str(v) for k, v in selector.items()},
        affinity=parse_affinity(spec.get("affinity")),
        tolerations=parse_tolerations(spec.get("tolerations")),
    )


# --------------------------------------------------------------------------------------------
# Matching a pod's constraints against a node (resources are checked elsewhere)


def taint_not_tolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint no toleration tolerates, or ``None``."""
    for taint in taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def node_mismatch(pod: PodDemand, node: Node) -> str | None:
    """Why ``pod`` may not go to ``node`` regardless of free capacity, or ``None`` if it may.

    Checks, in kube-scheduler's order: cordoned/NotReady, nodeSelector, required node affinity,
    taints. The reason is a short phrase (``"node selector gpu=h100 not matched"``).
    """
    if not node.ready:
        return "node is NotReady"
    if node.unschedulable:
        return "node is cordoned (unschedulable)"
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return f"node selector {key}={value} not matched"
    if pod.affinity and not any(_term_matches(term, node) for term in pod.affinity):
        return "required node affinity not matched"
    taint = taint_not_tolerated(node.taints, pod.tolerations)
    if taint is not None:
        return f"taint {_taint_text(taint)} not tolerated"
    return None


def _taint_text(taint: Taint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


def _term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term matches no node (Kubernetes semantics)
    for requirement in term.match_expressions:
        if not _requirement_matches(requirement, node.labels.get(requirement.key)):
            return False
    for requirement in term.match_fields:
        value = node.name if requirement.key == "metadata.name" else None
        if not _requirement_matches(requirement, value):
            return False
    return True


def _requirement_matches(requirement: NodeSelectorRequirement, value: str | None) -> bool:
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(requirement.values) != 1:
            return False
        try:
            actual, bound = int(value), int(requirement.values[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


# --------------------------------------------------------------------------------------------
# small helpers


def _requirements(items: object) -> tuple[NodeSelectorRequirement, ...]:
    result = []
    for item in _list(items):
        values = item.get("values") or []
        result.append(
            NodeSelectorRequirement(
                key=str(item.get("key") or ""),
                operator=str(item.get("operator") or ""),
                values=tuple(str(v) for v in values) if isinstance(values, list) else (),
            )
        )
    return tuple(result)


def _containers(spec: Mapping[str, Any], key: str, strict: bool) -> list[Mapping[str, Any]]:
    """``spec[key]``'s containers; ``strict``: anything but a list of mappings is an error, as
    the API server's validation would refuse it (it was read as no containers, asking nothing)."""
    value = spec.get(key)
    if strict and value is not None:
        if not isinstance(value, list):
            raise ValueError(f"{key}: expected a list of containers, got {type_name(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise ValueError(f"{key}[{index}]: expected a container, got {type_name(item)}")
    return _list(value)


def _shaped(value: object, field: str, strict: bool) -> Mapping[str, Any]:
    """``value`` as a mapping; ``strict``: anything but a mapping or nothing is an error."""
    if strict and value is not None and not isinstance(value, Mapping):
        raise ValueError(f"{field}: expected a mapping, got {type_name(value)}")
    return _mapping(value)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]
