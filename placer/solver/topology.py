"""Topology-aware packing: a gang's pods inside one rack, block or NVLink domain.

A workload's :class:`~placer.model.TopologyConstraint` becomes one or two **domain needs** on
the pod runs it covers (:func:`needs_of`): a *required* need (all its pods inside one domain of
the level: the nodes carrying one value of that node label) and a *preferred* need (as few
domains of the level as fit). Needs nest: a run covered by a larger constraint and by a smaller
one inside it (a pod group and one of its sub-groups) carries both, outermost first; a required
need comes before the preferred one of the same constraint. A run in two constraints that
overlap without one containing the other keeps the first only.

Packing (:func:`pack_in_domains`, called by :func:`placer.solver.packer.pack` for any run that
carries a need) takes the need covering the most GPU thousandths first and tries its candidate
domains in turn; for each, the covered runs are *restricted* to it — their pods get the node
affinity ``LEVEL In (values)``, so every eligibility rule, memo and score of the packer applies
unchanged, and the same affinity is what the member would be told — and packed (inner needs
recursively), then the other runs on the whole cluster. The first candidate where everything
packs wins; the state is left as if nothing was tried otherwise.

Candidates of a need: the domains where each covered run has, node by node, room for all its
pods (a necessary condition, from the packer's copy counts), tightest first under best-fit
(the fewest free GPU thousandths, then cpu: large domains stay whole for large gangs) and
roomiest first under ``spread``; at most ``MAX_DOMAIN_TRIES`` of them. A preferred need tries
the single domains, then the fewest roomiest domains that together hold the pods (and one more),
then the whole cluster (or the enclosing required domain).

The other solver stages do not see topology: the LP bounds, the capacity bounds and the master
are relaxations of the topology-restricted problem (every topology-feasible placement is
feasible without it), so their bounds stay valid upper bounds; :func:`topology_bound_gpu` adds
one that knows topology. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from placer.model import (
    Fleet,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Placement,
    PodDemand,
    TopologyConstraint,
    Workload,
)
from placer.solver.packer import Packed, PackFailure, PodRun
from placer.solver.state import ClusterState, IntArray, PodShape, gpu_milli

__all__ = [
    "MAX_DOMAIN_TRIES",
    "DomainNeed",
    "DomainsUsed",
    "domain_reason",
    "domains_used",
    "needs_of",
    "pack_in_domains",
    "required_domains",
    "topology_bound_gpu",
]

#: Candidate domains tried per need and packing (the tightest first).
MAX_DOMAIN_TRIES = 8

PackFunction = Callable[..., "Packed | PackFailure"]


@dataclass(eq=False)
class DomainNeed:
    """One level a set of pod runs must (``required``) or should stay inside."""

    level: str
    required: bool
    constraint: TopologyConstraint
    #: restricted shapes already made: (shape ident, values) -> shape.
    shapes: dict[tuple[object, ...], PodShape] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> tuple[str, bool, str, tuple[str, ...]]:
        return (self.level, self.required, self.constraint.name, self.constraint.members)

    @property
    def label(self) -> str:
        """``pod group "g"`` for messages."""
        return f'pod group "{self.constraint.name}"'


def needs_of(workload: Workload) -> dict[str, tuple[DomainNeed, ...]]:
    """The domain needs of each component label of ``workload`` (see the module docstring)."""
    constraints = sorted(
        workload.topology, key=lambda c: -len(c.members)
    )  # stable: larger groups (outer) first
    needs: dict[str, list[DomainNeed]] = {}
    members_of: dict[str, list[frozenset[str]]] = {}
    for constraint in constraints:
        group = frozenset(constraint.members)
        made = [
            DomainNeed(level, required, constraint)
            for level, required in ((constraint.required, True), (constraint.preferred, False))
            if level
        ]
        for label in constraint.members:
            earlier = members_of.setdefault(label, [])
            if any(not group <= other for other in earlier):
                continue  # overlaps an earlier constraint without nesting in it
            earlier.append(group)
            needs.setdefault(label, []).extend(made)
    return {label: tuple(found) for label, found in needs.items()}


def _restricted_pod(pod: PodDemand, level: str, values: tuple[str, ...]) -> PodDemand:
    requirement = NodeSelectorRequirement(key=level, operator="In", values=values)
    terms = pod.affinity or (NodeSelectorTerm(),)
    return replace(
        pod,
        affinity=tuple(
            replace(t, match_expressions=(*t.match_expressions, requirement)) for t in terms
        ),
    )


def _restrict(
    state: ClusterState, run: PodRun, need: DomainNeed, values: tuple[str, ...] | None
) -> PodRun:
    """``run`` inside the domains ``values`` of the need's level (``None``: anywhere), with
    the need taken off."""
    rest = run.topology[1:]
    if values is None:
        return replace(run, topology=rest)
    key = (run.shape.ident, values)
    shape = need.shapes.get(key)
    if shape is None:
        pod = _restricted_pod(run.shape.demand, need.level, values)
        shape = need.shapes[key] = PodShape.of(pod, state.names)
    return PodRun(workload=run.workload, component=run.component, shape=shape, topology=rest)


def domains(state: ClusterState, level: str) -> dict[str, IntArray]:
    """The usable nodes of each domain of ``level`` (by label value, sorted), cached."""
    key = ("topology-domains", level)
    known = state.memo.get(key)
    if isinstance(known, dict):
        return known
    by_value: dict[str, list[int]] = {}
    for index, node in enumerate(state.nodes):
        value = node.labels.get(level)
        if value is not None and bool(state.usable[index]):
            by_value.setdefault(value, []).append(index)
    result = {v: np.array(by_value[v], dtype=np.int64) for v in sorted(by_value)}
    state.remember(key, result)
    return result


def _room(state: ClusterState, runs: Sequence[PodRun], nodes: IntArray) -> int:
    """How many complete sets of ``runs`` the ``nodes`` hold, run by run (an upper bound)."""
    sets = 10**9
    for run in runs:
        copies = int(state.copies_all(run.shape)[nodes].sum())
        sets = min(sets, copies // max(run.count, 1))
    return sets


def _candidates(
    state: ClusterState, need: DomainNeed, runs: Sequence[PodRun], scoring: str
) -> list[tuple[str, ...] | None]:
    by_value = domains(state, need.level)
    fitting = [(v, nodes) for v, nodes in by_value.items() if _room(state, runs, nodes) >= 1]
    sign = -1 if scoring == "spread" else 1
    inner = _inner_need(need, runs)

    def whole_inside(nodes: IntArray) -> int:
        """0 when one domain of the inner need's level inside ``nodes`` holds its runs."""
        if inner is None:
            return 0
        covered = [r for r in runs if inner in r.topology]
        members = set(nodes.tolist())
        for inner_nodes in domains(state, inner.level).values():
            kept = np.array([n for n in inner_nodes.tolist() if n in members], dtype=np.int64)
            if kept.size and _room(state, covered, kept) >= 1:
                return 0
        return 1

    fitting.sort(
        key=lambda item: (
            whole_inside(item[1]),
            sign * int(state.devfree[item[1]].sum()),
            sign * int(state.free[item[1], 0].sum()),
        )
    )
    candidates: list[tuple[str, ...] | None] = [(v,) for v, _ in fitting[:MAX_DOMAIN_TRIES]]
    if need.required:
        return candidates
    # preferred: the fewest roomiest domains that hold every run's pods together, one more
    roomy = sorted(
        by_value.items(),
        key=lambda item: -sum(int(state.copies_all(r.shape)[item[1]].sum()) for r in runs),
    )
    for width in range(2, len(roomy) + 1):
        nodes = np.concatenate([n for _, n in roomy[:width]])
        if _room(state, runs, nodes) >= 1:
            candidates.append(tuple(sorted(v for v, _ in roomy[:width])))
            if width + 1 <= len(roomy):
                candidates.append(tuple(sorted(v for v, _ in roomy[: width + 1])))
            break
    candidates.append(None)
    return candidates


def _inner_need(need: DomainNeed, runs: Sequence[PodRun]) -> DomainNeed | None:
    """The next need inside ``need`` of its runs, if one is shared by them all."""
    nexts = {r.topology[1] if len(r.topology) > 1 else None for r in runs}
    if len(nexts) != 1:
        return None
    (only,) = nexts
    return only


def _milli(runs: Sequence[PodRun]) -> int:
    return sum(gpu_milli(r.shape.demand) * r.count for r in runs)


def pack_in_domains(
    state: ClusterState,
    runs: Sequence[PodRun],
    *,
    scoring: str,
    mix: object,
    pack: PackFunction,
) -> Packed | PackFailure:
    """Place ``runs`` honouring their domain needs, all or none (see the module docstring)."""
    outer: list[DomainNeed] = []
    for run in runs:
        if run.topology and run.topology[0] not in outer:
            outer.append(run.topology[0])
    if not outer:
        return pack(state, runs, scoring=scoring, mix=mix)
    need = max(
        outer,
        key=lambda n: (_milli([r for r in runs if r.topology[:1] == (n,)]), -outer.index(n)),
    )
    inside = [r for r in runs if r.topology[:1] == (need,)]
    outside = [r for r in runs if r.topology[:1] != (need,)]
    mark = state.mark()
    for values in _candidates(state, need, inside, scoring):
        trial = [_restrict(state, r, need, values) for r in inside]
        result = pack(state, trial, scoring=scoring, mix=mix)
        if not isinstance(result, Packed):
            continue
        rest = pack(state, outside, scoring=scoring, mix=mix) if outside else Packed((), 0.0)
        if isinstance(rest, Packed):
            return Packed(pods=result.pods + rest.pods, score=result.score + rest.score)
        state.undo(mark)
    return PackFailure(run=inside[0], placed=0)


def domain_reason(state: ClusterState, runs: Sequence[PodRun]) -> str | None:
    """Why the required domain needs of ``runs`` cannot be met here, naming the level and
    the domain that came closest; ``None`` when some domain of every required need has room
    (the failure, if any, is then the pods' packing together)."""
    seen: list[DomainNeed] = []
    for run in runs:
        for need in run.topology:
            if need.required and need not in seen:
                seen.append(need)
    for need in seen:
        covered = [r for r in runs if need in r.topology]
        origin = (
            f"required level, {need.constraint.source}" if need.constraint.source else "required"
        )
        by_value = domains(state, need.level)
        if not by_value:
            return (
                f"no usable node has the topology label {need.level} that {need.label} "
                f"requires ({need.constraint.source})"
            )
        if any(_room(state, covered, nodes) >= 1 for nodes in by_value.values()):
            continue
        pods = sum(r.count for r in covered)
        whole = sum(r.shape.gpus * r.count for r in covered)
        if whole:
            best_value, best = max(
                ((v, int(state.full[nodes].sum())) for v, nodes in by_value.items()),
                key=lambda item: item[1],
            )
            return (
                f"no {need.level} domain with {whole} free GPUs for the {pods} pods of "
                f"{need.label} ({origin}); the most in one "
                f"domain: {best} free GPUs in {need.level}={best_value} "
                f"({len(by_value)} domains)"
            )
        best_value, most = max(
            ((v, _room_pods(state, covered, nodes)) for v, nodes in by_value.items()),
            key=lambda item: item[1],
        )
        return (
            f"no {need.level} domain has room for the {pods} pods of {need.label} together "
            f"({origin}); the most in one domain: {most} "
            f"in {need.level}={best_value} ({len(by_value)} domains)"
        )
    return None


def _room_pods(state: ClusterState, runs: Sequence[PodRun], nodes: IntArray) -> int:
    return sum(min(int(state.copies_all(r.shape)[nodes].sum()), r.count) for r in runs)


@dataclass(frozen=True)
class DomainsUsed:
    """Where one topology constraint's pods landed, at one of its levels (for display)."""

    group: str
    level: str
    required: bool
    domains: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "level": self.level,
            "required": self.required,
            "domains": list(self.domains),
        }


def domains_used(
    workload: Workload, pods_nodes: Mapping[str, Sequence[str]], fleet: Fleet, cluster: str
) -> list[DomainsUsed]:
    """Per topology constraint of ``workload`` and level, the domains its pods landed in
    (``pods_nodes``: component label -> the node of each pod; ``""``: a node without the
    label)."""
    labels_of = {n.name: n.labels for n in fleet.cluster(cluster).nodes}
    shown: list[DomainsUsed] = []
    for constraint in workload.topology:
        nodes = [n for label in constraint.members for n in pods_nodes.get(label, ())]
        for level, required in ((constraint.required, True), (constraint.preferred, False)):
            if level:
                values = sorted({labels_of.get(n, {}).get(level, "") for n in nodes})
                shown.append(DomainsUsed(constraint.name, level, required, tuple(values)))
    return shown


def required_domains(
    workload: Workload, placement: Placement, fleet: Fleet
) -> dict[str, dict[str, str]]:
    """Component label -> the domain (required level -> value) its pods were placed in, for
    every required constraint of ``workload`` whose pods share one value of its level: what
    the dispatched copy tells the member (a required node affinity). Empty without a node plan
    or topology constraints."""
    if not workload.topology or not placement.pods:
        return {}
    if any(not pod.node for pod in placement.pods):
        return {}
    cluster = next((c for c in fleet.clusters if c.name == placement.cluster), None)
    if cluster is None:
        return {}
    labels_of = {n.name: n.labels for n in cluster.nodes}
    nodes: dict[str, list[str]] = {}
    for pod in placement.pods:
        label = f"{pod.component}/{pod.instance}" if pod.instance else pod.component
        nodes.setdefault(label, []).append(pod.node)
    found: dict[str, dict[str, str]] = {}
    for constraint in workload.topology:
        level = constraint.required
        if not level:
            continue
        values = {
            labels_of.get(n, {}).get(level, "")
            for m in constraint.members
            for n in nodes.get(m, ())
        }
        if len(values) != 1 or "" in values:
            continue
        (value,) = values
        for member in constraint.members:
            if member in nodes:
                found.setdefault(member, {})[level] = value
    return found


def topology_bound_gpu(workloads: Sequence[Workload], fleet: Fleet, free_gpus: float) -> float:
    """An upper bound on the whole GPUs any topology-respecting placement places: the free
    GPUs (``free_gpus``, or a tighter bound the caller has), less the GPUs of every workload
    whose required constraints fit no domain of any reachable cluster by free whole GPUs."""
    idle_by_domain: dict[str, list[int]] = {}
    for cluster in fleet.clusters:
        if not cluster.reachable:
            continue
        for level in {c.required for w in workloads for c in w.topology if c.required}:
            totals: dict[str, int] = {}
            for node in cluster.nodes:
                value = node.labels.get(level)
                if value is not None and node.usable:
                    totals[value] = totals.get(value, 0) + max(
                        node.free.get("nvidia.com/gpu", 0), 0
                    )
            idle_by_domain.setdefault(level, []).extend(totals.values())
    most = {level: max(values, default=0) for level, values in idle_by_domain.items()}
    hopeless = 0
    for workload in workloads:
        gpus_of = {c.label: c.pod.gpus * c.replicas for c in workload.components}
        for constraint in workload.topology:
            if not constraint.required:
                continue
            need = sum(gpus_of.get(m, 0) for m in constraint.members)
            if need > most.get(constraint.required, 0):
                hopeless += workload.gpus
                break
    total = sum(w.gpus for w in workloads)
    return float(min(free_gpus, total - hopeless))
