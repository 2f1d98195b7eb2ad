"""Growing elastic components: objective term (3') of the model in :mod:`placer.solver`.

An elastic component (:attr:`placer.model.ComponentDemand.elastic`) runs any count in
``[lo_r, hi_r]`` (``replicas`` .. ``max_replicas``). Every solver decides placements with each
elastic run at ``lo_r`` (so priorities, fairness and placed value are decided on the gang's
minimum, exactly as for any other run); then :func:`grow` raises the counts on the capacity the
decision left, the lexicographic term after them: ``max Σ_r v_r e_r`` with ``e_r ∈
[0, hi_r − lo_r]`` the extra pods of run ``r``, ``v_r`` its pods' value. It is solved greedily:
units by priority (highest first) then input order; for a unit, in the cluster it was given and
(``relocate``, as :func:`placer.solver.solve` does) in every other allowed cluster its policy
ranks the same (preferred-cluster rank and cost; the pack/spread load order gives way), its
elastic runs in order, each to the largest count the packer realises (bisection over the count,
capped by the cluster's free copies of the pod, every pod of the unit packed again together,
topology constraints included), never below ``lo_r``; the unit takes the cluster with the most
extra pods (its own on a tie). An ``admission`` (queue limits, :mod:`placer.solver.fairshare`)
may refuse extra pods.

Pure: works on the solver's cluster states and returns new packings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from placer.model import (
    ComponentDemand,
    Fleet,
    Placement,
    PodAssignment,
    Workload,
    pods_requests,
)
from placer.policy import PlacementPolicy
from placer.solver.packer import Packed, PodRun, pack
from placer.solver.problem import Problem, Unit, build_problem
from placer.solver.state import ClusterState, PodShape, gpu_milli
from placer.solver.topology import needs_of

__all__ = [
    "Admission",
    "ChosenCount",
    "chosen_counts",
    "elastic_slack",
    "grow",
    "grow_placements",
    "pods_of",
    "room_to_grow",
]


class Admission(Protocol):
    """Who may take extra pods (queue limits): asked before a trial, told of what was kept."""

    def allows(self, workload: int, cluster: str, extra: Mapping[str, int]) -> bool: ...

    def book(self, workload: int, cluster: str, extra: Mapping[str, int]) -> None: ...


def grow(
    problem: Problem,
    placed: Sequence[tuple[Unit, str, Packed]],
    *,
    admission: Admission | None = None,
    relocate: bool = False,
) -> list[tuple[Unit, str, Packed]]:
    """``placed`` with every elastic run at the largest count that packs (module docstring).
    ``problem.states`` hold the decision's placements and are updated with the growth.
    ``relocate``: a unit may move to another allowed cluster its policy ranks the same (same
    preferred-cluster rank and cost) where it gets more extra pods."""
    result = list(placed)
    order = sorted(range(len(result)), key=lambda i: (-result[i][0].priority, result[i][0].index))
    for position in order:
        unit, home, packed = result[position]
        elastic = _elastic_of(problem, unit)
        if not elastic:
            continue
        state = problem.states[home]
        if packed.pods:
            state.apply([packed.replay], sign=-1)
        options = [home, *(_peers(problem, unit, home) if relocate else ())]
        best: tuple[int, str, Packed, dict[tuple[int, str], int]] | None = None
        for name in options:
            fallback = packed if name == home else None
            found = _largest(problem, unit, name, elastic, admission, fallback)
            if found is None:
                continue
            packing, counts = found
            extra = sum(counts[(m, c.label)] - c.replicas for m, c in elastic)
            if best is None or extra > best[0]:
                best = (extra, name, packing, counts)
        if best is None:  # the unit no longer packs anywhere but as it was
            if packed.pods:
                state.apply([packed.replay])
            continue
        _, name, packing, counts = best
        if packing.pods:
            problem.states[name].apply([packing.replay])
        if admission is not None:
            for member, component in elastic:
                added = counts[(member, component.label)] - component.replicas
                if added > 0:
                    admission.book(member, name, _extra(component, added))
        result[position] = (unit, name, packing)
    return result


def _elastic_of(problem: Problem, unit: Unit) -> list[tuple[int, ComponentDemand]]:
    workloads = problem.workloads
    return [(m, c) for m in unit.members for c in workloads[m].components if c.elastic]


def _peers(problem: Problem, unit: Unit, home: str) -> list[str]:
    """The other allowed clusters the unit's policy ranks as ``home`` (rank and cost)."""
    policy = unit.policy

    def tier(name: str) -> tuple[float, float]:
        return (float(policy.rank(name)), policy.cost(name)) if policy else (0.0, 0.0)

    return [
        c for c in unit.allowed() if c != home and c in problem.states and tier(c) == tier(home)
    ]


def _largest(
    problem: Problem,
    unit: Unit,
    cluster: str,
    elastic: list[tuple[int, ComponentDemand]],
    admission: Admission | None,
    fallback: Packed | None,
) -> tuple[Packed, dict[tuple[int, str], int]] | None:
    """The unit packed in ``cluster`` (not in its state) with each elastic run at the largest
    count that packs, and the counts; ``fallback`` is its packing at the minimum there (else
    it is packed at the minimum first; ``None`` when that fails)."""
    workloads = problem.workloads
    state = problem.states[cluster]
    needs = {m: needs_of(workloads[m]) for m in unit.members if workloads[m].topology}
    counts = {(m, c.label): c.replicas for m in unit.members for c in workloads[m].components}
    shapes = {id(run.component.pod): run.shape for run in unit.runs}

    def shape_of(component: ComponentDemand) -> PodShape:
        return shapes.get(id(component.pod)) or PodShape.of(component.pod, problem.names)

    def trial() -> Packed | None:
        runs = [
            PodRun(
                workload=m,
                component=replace(c, replicas=counts[(m, c.label)]),
                shape=shape_of(c),
                topology=needs[m].get(c.label, ()) if m in needs else (),
            )
            for m in unit.members
            for c in workloads[m].components
            if counts[(m, c.label)] > 0
        ]
        mark = state.mark()
        result = pack(state, runs, scoring=unit.scoring, mix=problem.mix)
        state.undo(mark)
        return result if isinstance(result, Packed) else None

    best = fallback if fallback is not None else trial()
    if best is None:
        return None
    for member, component in elastic:
        key = (member, component.label)
        low = counts[key]
        assert component.max_replicas is not None
        high = min(component.max_replicas, low + state.copies_total(shape_of(component)))
        while low < high:
            middle = (low + high + 1) // 2
            extra = _extra(component, middle - component.replicas)
            if admission is not None and not admission.allows(member, cluster, extra):
                high = middle - 1
                continue
            counts[key] = middle
            found = trial()
            if found is not None:
                best, low = found, middle
            else:
                high = middle - 1
            counts[key] = low
    return best, counts


@dataclass(frozen=True)
class ChosenCount:
    """The count chosen for an elastic component of a placed workload."""

    component: str
    instance: str
    chosen: int
    min: int
    max: int

    @property
    def label(self) -> str:
        return f"{self.component}/{self.instance}" if self.instance else self.component

    def as_dict(self) -> dict[str, object]:
        return {"component": self.label, "replicas": self.chosen, "min": self.min, "max": self.max}


def chosen_counts(workload: Workload, placement: Placement) -> list[ChosenCount]:
    """Each elastic component's chosen count in ``placement`` (its pods there)."""
    placed = Counter((p.component, p.instance) for p in placement.pods)
    return [
        ChosenCount(c.name, c.instance, placed[(c.name, c.instance)], c.replicas, c.max_replicas)
        for c in workload.components
        if c.elastic and c.max_replicas is not None
    ]


def elastic_slack(problem: Problem, states: Mapping[str, ClusterState]) -> int:
    """GPU thousandths the extra pods (above ``lo_r``) of every unit's elastic runs can take at
    most, what the bounds add to their model of the runs at the minimum. A unit goes to one
    allowed cluster ``c`` (``states``: the capacity before the decision), so its extra pods
    there take at most ``min(Σ_r g_r · min(hi_r − lo_r, copies_c(r) − lo_r), free_c − G_u)``:
    run ``r`` has at most as many pods as ``c``'s usable nodes hold copies of its pod, one by
    one (``copies_total``), and the unit's pods at most ``c``'s free GPU thousandths ``free_c``
    (``G_u``: the unit's at the minimum). The unit's slack is the largest over its allowed
    clusters (0 when it has none)."""
    total = 0
    for unit in problem.units:
        shapes = {id(run.component.pod): run.shape for run in unit.runs}
        runs = [
            (c, shapes.get(id(c.pod)) or PodShape.of(c.pod, problem.names))
            for m in unit.members
            for c in problem.workloads[m].components
            if c.elastic and c.max_replicas is not None and gpu_milli(c.pod)
        ]
        if not runs:
            continue
        best = 0
        for name in unit.rank:
            state = states.get(name)
            if state is None:
                continue
            room = int(state.devfree[state.usable].sum()) - unit.milli
            if room <= 0:
                continue
            extra = 0
            for component, shape in runs:
                assert component.max_replicas is not None
                low = component.replicas
                pods = min(component.max_replicas, state.copies_total(shape)) - low
                extra += max(0, pods) * gpu_milli(component.pod)
            best = max(best, min(room, extra))
        total += best
    return total


def room_to_grow(
    workload: Workload, current: Mapping[str, int], fleet: Fleet, cluster: str
) -> tuple[PodAssignment, ...]:
    """The extra pods each elastic component of a running ``workload`` (at ``current`` pods,
    by component label) can take in ``cluster`` of ``fleet`` (its capacity with the workload's
    pods in it), within ``max_replicas``, each on a node: packed on the nodes' free room as
    :func:`grow` packs (topology constraints are not applied to them). Their ``index`` counts
    from 0 for each component."""
    extra = tuple(
        replace(c, replicas=0, max_replicas=c.max_replicas - current[c.label])
        for c in workload.components
        if c.elastic
        and c.max_replicas is not None
        and c.label in current
        and current[c.label] < c.max_replicas
    )
    here = tuple(c for c in fleet.clusters if c.name == cluster and c.reachable)
    if not extra or not here:
        return ()
    alone = replace(workload, components=extra, group=None, topology=(), pinned_cluster=None)
    problem = build_problem([alone], Fleet(clusters=here), ())
    if cluster not in problem.states:
        return ()
    [unit] = problem.units
    [(_, _, packed)] = grow(problem, [(unit, cluster, Packed(pods=(), score=0.0))])
    return pods_of(problem.states[cluster], packed)


def _extra(component: ComponentDemand, pods: int) -> dict[str, int]:
    return {name: amount * pods for name, amount in component.pod.requests.items()}


def grow_placements(
    workloads: Sequence[Workload],
    placements: Mapping[int, Placement],
    fleet: Fleet,
    *,
    policies: Sequence[PlacementPolicy] = (),
    admission: Admission | None = None,
) -> dict[int, Placement]:
    """:func:`grow` for placements already made (by index in ``workloads``) on ``fleet``, the
    capacity with every placement of the decision charged: the grown ones, by index."""
    chosen = [i for i in sorted(placements) if workloads[i].elastic]
    if not chosen:
        return {}
    alone = [replace(workloads[i], group=None) for i in chosen]
    problem = build_problem(alone, fleet, policies)
    placed: list[tuple[Unit, str, Packed]] = []
    for unit, index in zip(problem.units, chosen, strict=True):
        placement = placements[index]
        state = problem.states.get(placement.cluster)
        if state is None:
            continue
        packed = _packed_of(problem, state, unit, placement)
        if packed is not None:
            placed.append((unit, placement.cluster, packed))
    grown: dict[int, Placement] = {}
    for unit, cluster, packed in grow(problem, placed, admission=_Shifted(admission, chosen)):
        index = chosen[unit.members[0]]
        pods = pods_of(problem.states[cluster], packed)
        if len(pods) != len(placements[index].pods):
            grown[index] = replace(placements[index], pods=pods, requests=pods_requests(pods))
    return grown


class _Shifted:
    """An admission asked by the positions of a sub-list of the workloads."""

    def __init__(self, inner: Admission | None, indices: Sequence[int]) -> None:
        self.inner = inner
        self.indices = indices

    def allows(self, workload: int, cluster: str, extra: Mapping[str, int]) -> bool:
        return self.inner is None or self.inner.allows(self.indices[workload], cluster, extra)

    def book(self, workload: int, cluster: str, extra: Mapping[str, int]) -> None:
        if self.inner is not None:
            self.inner.book(self.indices[workload], cluster, extra)


def _packed_of(
    problem: Problem, state: ClusterState, unit: Unit, placement: Placement
) -> Packed | None:
    """The packing a placement made, over ``unit``'s runs (``None`` when a pod's node or
    component is not known here)."""
    position = {name: i for i, name in enumerate(state.node_names)}
    runs = {(r.component.name, r.component.instance): r for r in unit.runs}
    pods = []
    for pod in placement.pods:
        run = runs.get((pod.component, pod.instance))
        node = position.get(pod.node)
        if run is None or node is None:
            return None
        pods.append((run, pod.index, node, pod.devices))
    return Packed(pods=tuple(pods), score=0.0)


def pods_of(state: ClusterState, packed: Packed) -> tuple[PodAssignment, ...]:
    """A packing's pods as the model's assignments, sorted as a Placement keeps them."""
    names = state.node_names
    return tuple(
        sorted(
            (
                PodAssignment(
                    component=run.component.name,
                    instance=run.component.instance,
                    index=index,
                    node=names[node],
                    requests=run.component.pod.requests,
                    devices=devices,
                )
                for run, index, node, devices in packed.pods
            ),
            key=lambda p: (p.component, p.instance, p.index),
        )
    )
