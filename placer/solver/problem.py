"""From workloads, fleet and policies to the solver's problem: units, values, eligibility.

A **unit** is what is placed all-or-nothing in one cluster: one workload, or all workloads that
share a ``placer.dev/group`` value. Its **value** is its GPU-weighted demand::

    value(u) = 64 · ⌈GPU thousandths(u) / 10⌉ + ⌈cpu cores(u)⌉ + pods(u)

so one GPU (6400) outweighs a hundred cores and every pod counts a little (a workload asking
for nothing is still worth placing). Static eligibility of a unit for a cluster (reachability,
policy cluster selector, pin, cluster taints) is decided here once, with the reason in words
when a cluster is excluded; node-level eligibility lives in :class:`ClusterState`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from placer.model import AVOIDED_REASON, Fleet, PodDemand, Workload
from placer.podspec import taint_not_tolerated
from placer.policy import PlacementPolicy, policy_for, topology_of
from placer.quantity import CPU
from placer.solver.fragmentation import Mix, access_tags, mix_of
from placer.solver.packer import PodRun
from placer.solver.state import (
    ClusterState,
    IntArray,
    PodShape,
    Signatures,
    gpu_milli,
    resource_names,
)
from placer.solver.topology import needs_of

__all__ = ["Problem", "Unit", "build_problem", "identical_units", "quote", "unit_groups"]


def quote(text: str) -> str:
    return f'"{text}"'


@dataclass
class Unit:
    """Workloads placed together (see module docstring)."""

    index: int
    #: indices of the member workloads in the decision's input.
    members: tuple[int, ...]
    runs: tuple[PodRun, ...]
    priority: int
    value: int
    #: GPU thousandths of all pods.
    milli: int
    pinned: str | None
    policy: PlacementPolicy | None
    #: text for messages: the workload, or ``group NAME (n workloads)``.
    label: str
    #: a reason that rules out every cluster (no pods, conflicting pins, unknown pin).
    problem: str | None = None
    #: cluster -> why it is excluded before looking at nodes.
    excluded: dict[str, str] = field(default_factory=dict)
    #: cluster -> preference rank (0 best) among the clusters not excluded.
    rank: dict[str, int] = field(default_factory=dict)
    #: node scoring of the packer for this unit (``bestfit``, ``fgd`` or ``spread``).
    scoring: str = "bestfit"
    #: ``allowed()`` for the ``rank`` it was computed from.
    _allowed: tuple[dict[str, int], list[str]] | None = field(
        default=None, repr=False, compare=False
    )

    @cached_property
    def pods(self) -> int:
        return sum(r.count for r in self.runs)

    @cached_property
    def demand(self) -> IntArray:
        """Scalar demand of all pods over the decision's resource vector."""
        width = len(self.runs[0].shape.req) if self.runs else 0
        total: IntArray = np.zeros(width, dtype=np.int64)
        for run in self.runs:
            total += run.shape.req * run.count
        return total

    @cached_property
    def identity(self) -> tuple[object, ...]:
        """What the LPs see of the unit: GPU thousandths, allowed clusters, pod runs (set
        once the problem is built; :func:`identical_units`)."""
        return (
            self.milli,
            tuple(sorted(self.rank)),
            tuple((r.shape.ident, r.count) for r in self.runs),
        )

    @cached_property
    def runs_key(self) -> tuple[object, ...]:
        """The unit's pod runs as a reason names them (shapes, counts, component labels):
        units alike in it get the same explanations."""
        return tuple(
            (r.shape.ident, r.count, r.component.label, tuple(n.key for n in r.topology))
            for r in self.runs
        )

    @property
    def objective(self) -> str:
        return self.policy.objective if self.policy is not None else "pack"

    def allowed(self) -> list[str]:
        """Clusters not excluded statically, best preference first (a new list)."""
        known = self._allowed
        if known is None or known[0] is not self.rank:
            order = sorted(self.rank, key=lambda c: (self.rank[c], c))
            known = self._allowed = (self.rank, order)
        return list(known[1])


def identical_units(units: Sequence[Unit]) -> tuple[list[Unit], dict[int, int]]:
    """Units that are interchangeable in the LPs (same pod runs, same GPU thousandths,
    same allowed clusters): the first of each group (in input order) and, by its index, how
    many units the group has.

    An LP over ``m`` identical units has an optimum with equal values for all of them
    (average any optimum over their permutations: the LP is convex and symmetric), so one
    variable ``X ∈ [0, m]`` per group and cluster, with ``Σ_c X ≤ m``, has the same optimum
    with a smaller model wherever units repeat.
    """
    groups = unit_groups(units)
    return [g[0] for g in groups], {g[0].index: len(g) for g in groups}


def unit_groups(units: Sequence[Unit]) -> list[list[Unit]]:
    """The groups of :func:`identical_units`, each in input order."""
    groups: dict[tuple[object, ...], list[Unit]] = {}
    for unit in units:
        groups.setdefault(unit.identity, []).append(unit)
    return list(groups.values())


@dataclass
class Problem:
    """Everything a decision needs, built once per ``solve`` call."""

    workloads: Sequence[Workload]
    fleet: Fleet
    units: list[Unit]
    #: reachable clusters' free capacity, by cluster name (fleet order).
    states: dict[str, ClusterState]
    names: tuple[str, ...]
    mix: Mix | None


def build_problem(
    workloads: Sequence[Workload],
    fleet: Fleet,
    policies: Sequence[PlacementPolicy],
    *,
    mix: Sequence[tuple[PodDemand, float]] = (),
    exclusions: Mapping[int, Mapping[str, str]] | None = None,
) -> Problem:
    """Units, cluster states and static eligibility (see module docstring); ``exclusions``:
    per workload (input index), clusters it may not use and why (a queue's cluster limit)."""
    pods = [c.pod for w in workloads for c in w.components] + [p for p, _ in mix]
    names = resource_names(pods)
    shapes: dict[int, PodShape] = {}
    # one shape object per distinct demand and eligibility: every per-shape memo (eligible
    # nodes, fit tests, fragmentation scores) is then shared by all pods alike
    interned: dict[tuple[object, ...], PodShape] = {}

    def shape_of(pod: PodDemand) -> PodShape:
        key = id(pod)
        known = shapes.get(key)
        if known is None:
            fresh = PodShape.of(pod, names)
            known = shapes[key] = interned.setdefault(fresh.ident, fresh)
        return known

    units = _units(workloads, policies, shape_of)
    signatures = Signatures()
    states = {
        c.name: ClusterState(c, names, signatures)
        for c in fleet.clusters
        if c.reachable and c.nodes
    }
    # every decision shape's copies per node, kept up to date as the states change
    for state in states.values():
        state.track(list(interned.values()))
    load = {name: _load(state) for name, state in states.items()}
    ranks: dict[tuple[object, ...], dict[str, int]] = {}
    for unit in units:
        barred = {
            name: reason
            for member in unit.members
            for name, reason in (exclusions or {}).get(member, {}).items()
        }
        _static_eligibility(unit, workloads, fleet, policies, load, ranks, barred)
    weighted = (
        [(shape_of(p), w) for p, w in mix]
        if mix
        else [(r.shape, float(r.count)) for u in units for r in u.runs]
    )
    pod_mix = mix_of(weighted)
    if pod_mix is not None:
        # fragmentation scores depend on a node's access to the mix's constraint classes
        for state in states.values():
            tags = access_tags(pod_mix, state)
            if tags is not None:
                state.distinguish(tags)
    return Problem(
        workloads=workloads,
        fleet=fleet,
        units=units,
        states=states,
        names=names,
        mix=pod_mix,
    )


def _units(
    workloads: Sequence[Workload],
    policies: Sequence[PlacementPolicy],
    shape_of: Callable[[PodDemand], PodShape],
) -> list[Unit]:
    members: dict[str, list[int]] = {}
    order: list[str] = []
    for index, workload in enumerate(workloads):
        key = f"group:{workload.group}" if workload.group else f"workload:{index}"
        if key not in members:
            members[key] = []
            order.append(key)
        members[key].append(index)
    units: list[Unit] = []
    for key in order:
        indices = tuple(members[key])
        # a policy's spec.topology counts for workloads without constraints of their own
        shaped = {i: topology_of(workloads[i], policies) for i in indices}
        needs = {i: needs_of(w) for i, w in shaped.items() if w.topology}
        runs = tuple(
            PodRun(
                workload=i,
                component=c,
                shape=shape_of(c.pod),
                topology=needs[i].get(c.label, ()) if i in needs else (),
            )
            for i in indices
            for c in workloads[i].components
            if c.replicas > 0
        )
        first = workloads[indices[0]]
        if key.startswith("group:"):
            label = f"group {first.group} ({len(indices)} workload(s))"
        else:
            label = str(first.ref)
        milli = sum(gpu_milli(r.shape.demand) * r.count for r in runs)
        cpu = sum(r.shape.demand.requests.get(CPU, 0) * r.count for r in runs)
        pods = sum(r.count for r in runs)
        value = 64 * math.ceil(milli / 10) + math.ceil(cpu / 1000) + pods
        pins = sorted({w for i in indices if (w := workloads[i].pinned_cluster)})
        unit_policies = [policy_for(workloads[i], policies) for i in indices]
        policy = next((p for p in unit_policies if p is not None), None)
        problem = None
        if pods == 0:
            problem = "has no pods to place (every component has 0 replicas)"
        elif len(pins) > 1:
            problem = (
                f"members of {label} are pinned to different clusters ({', '.join(pins)}) "
                "by placer.dev/cluster; a group goes to one cluster"
            )
        units.append(
            Unit(
                index=len(units),
                members=indices,
                runs=runs,
                priority=max(workloads[i].priority for i in indices),
                value=value,
                milli=milli,
                pinned=pins[0] if len(pins) == 1 else None,
                policy=policy,
                label=label,
                problem=problem,
            )
        )
    return units


def _load(state: ClusterState) -> float:
    """Share of the cluster's usable GPUs (or cpu, without GPUs) in use, for pack/spread."""
    usable = state.usable
    gpus = int(state.ndev[usable].sum()) * 1000
    if gpus:
        return 1.0 - int(state.devfree[usable].sum()) / gpus
    cpus = int(state.cap[usable, 0].sum())
    return 1.0 - int(state.free[usable, 0].sum()) / cpus if cpus else 0.0


def _static_eligibility(
    unit: Unit,
    workloads: Sequence[Workload],
    fleet: Fleet,
    policies: Sequence[PlacementPolicy],
    load: dict[str, float],
    ranks: dict[tuple[object, ...], dict[str, int]],
    barred: Mapping[str, str],
) -> None:
    if unit.problem is None and unit.pinned is not None and unit.pinned not in fleet.names:
        unit.problem = (
            f"pinned by placer.dev/cluster to {unit.pinned}, which is not in the fleet "
            f"(clusters: {', '.join(fleet.names) or 'none'})"
        )
    member_policies = [p for i in unit.members if (p := policy_for(workloads[i], policies))]
    avoided = {c for i in unit.members for c in workloads[i].avoid_clusters}
    for cluster in fleet.clusters:
        name = cluster.name
        if unit.problem is not None:
            unit.excluded[name] = unit.problem
            continue
        refusing = (
            next((p for p in member_policies if not p.admits(cluster)), None)
            if member_policies
            else None
        )
        reason = None
        if not cluster.reachable:
            reason = f"cluster unreachable: {cluster.reason or 'no answer'}"
        elif unit.pinned is not None and unit.pinned != name:
            reason = f"the workload is pinned to cluster {unit.pinned} (placer.dev/cluster)"
        elif name in avoided:
            reason = AVOIDED_REASON
        elif refusing is not None:
            selector = refusing.cluster_selector
            text = selector.describe() if selector else ""
            if unit.pinned == name:
                reason = (
                    f"pinned here by placer.dev/cluster, but policy {refusing.name} excludes "
                    f"this cluster (cluster selector {text}); fix the pin or the policy"
                )
            else:
                reason = f"excluded by policy {refusing.name}'s cluster selector ({text})"
        elif not cluster.nodes:
            reason = "the cluster has no nodes"
        elif name in barred:
            reason = barred[name]
        elif cluster.taints:
            for run in unit.runs:
                taint = taint_not_tolerated(cluster.taints, run.shape.demand.tolerations)
                if taint is not None:
                    value = f"={taint.value}" if taint.value else ""
                    reason = (
                        f"cluster taint {taint.key}{value}:{taint.effect} not tolerated by "
                        f"component {quote(run.component.label)}"
                    )
                    break
        if reason is not None:
            unit.excluded[name] = reason
    allowed = [c.name for c in fleet.clusters if c.name not in unit.excluded]
    policy = unit.policy
    sign = -1.0 if unit.objective == "spread" else 1.0
    # the ranks depend on the policy, the objective and the allowed clusters only
    memo_key = (id(policy), sign, tuple(allowed))
    known = ranks.get(memo_key)
    if known is not None:
        unit.rank = dict(known)
        return

    def key(name: str) -> tuple[float, float, float]:
        rank = float(policy.rank(name)) if policy else 0.0
        cost = policy.cost(name) if policy else 0.0
        # pack: fullest cluster first (keeps empty clusters for big gangs); spread: emptiest
        return (rank, cost, -sign * round(load.get(name, 0.0), 3))

    keys = {c: key(c) for c in allowed}
    ordered = sorted(set(keys.values()))
    position = {k: i for i, k in enumerate(ordered)}
    unit.rank = {c: position[keys[c]] for c in allowed}
    ranks[memo_key] = dict(unit.rank)
