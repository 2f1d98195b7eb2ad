"""Spread decisions: a workload's copies in several clusters, as its policy's
``replicaScheduling`` says (:mod:`placer.spread`; Karmada's semantics).

:func:`expand` turns each workload whose policy has ``replicaScheduling`` into **copies**, one
per target cluster, each pinned there; :func:`placer.solver.solve` places them like any
workload (every pod on a node); :func:`fold` gives the decision back in the input's terms: one
placement per copy under the workload's own reference, or — when any copy does not fit — the
workload unplaced with a reason per cluster (all copies or none, so no half-placed workload).
:func:`solve_spread` does the three.

Which clusters: reachable ones with nodes that the policy's cluster selector (and the
workload's ``placer.dev/cluster`` pin, if any) allows, in the policy's preference order
(preferred clusters, then cost), at most ``maxGroups`` of them (``spreadConstraints``) and at
least ``minGroups`` or the workload is refused.

* **Duplicated** — the whole workload to each of them.
* **Divided, Weighted, static** — the replicas of each scalable component (one whose replicas
  the definition reads from a replicas path) split in proportion to the first
  ``staticWeightList`` weight matching each cluster (clusters matching none get none), by
  largest remainder (ties: the larger weight, then preference order), as Karmada does.
* **Divided, Weighted, dynamic** (``dynamicWeight: AvailableReplicas``) — in proportion to how
  many replicas of the first scalable component fit on each cluster's free nodes, node by node
  (the packer's copy counts), and never more than fit.
* **Divided, Aggregated** — the clusters with most room first, each filled up to what fits:
  as few clusters as possible.

``minReplicasPerCluster`` moves the replicas of a cluster that would get fewer to the clusters
with the largest shares; ``maxReplicasPerCluster`` caps a share and hands the excess on. The
other components are copied whole into every copy (the member gets the whole object with its
replicas changed). A workload that cannot be divided (no scalable component, too little room,
too few clusters) is refused with the reason in every cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from placer.model import (
    Cluster,
    ComponentDemand,
    Decision,
    Fleet,
    Gang,
    Placement,
    Unplaced,
    Workload,
    WorkloadRef,
)
from placer.podspec import taint_not_tolerated
from placer.policy import PlacementPolicy, policy_for
from placer.quantity import add
from placer.solver.state import ClusterState, PodShape, resource_names
from placer.spread import ReplicaScheduling, Spread

__all__ = ["Copy", "Expansion", "copy_workload", "divide", "expand", "fold", "solve_spread"]


@dataclass(frozen=True)
class Copy:
    """One cluster's copy of a spread workload."""

    cluster: str
    #: what the solver places: pinned to ``cluster``, under an internal reference.
    workload: Workload
    #: replicas per scalable component label in this copy.
    replicas: tuple[tuple[str, int], ...] = ()


@dataclass
class Expansion:
    """The solver's input for a decision with spread workloads, and how to fold it back."""

    originals: Sequence[Workload]
    workloads: list[Workload]
    #: input index -> its copies (spread workloads only).
    copies: dict[int, list[Copy]] = field(default_factory=dict)
    #: input index -> why it cannot be spread at all (cluster -> reason).
    refused: dict[int, dict[str, str]] = field(default_factory=dict)
    #: internal copy reference -> (input index, copy).
    by_ref: dict[WorkloadRef, tuple[int, Copy]] = field(default_factory=dict)


def copy_ref(ref: WorkloadRef, cluster: str) -> WorkloadRef:
    return replace(ref, name=f"{ref.name}@{cluster}")


def _targets(
    workload: Workload, policy: PlacementPolicy, fleet: Fleet
) -> tuple[list[Cluster], dict[str, str]]:
    """The clusters a copy may go to, in preference order, and why the others may not."""
    allowed: list[Cluster] = []
    reasons: dict[str, str] = {}
    for cluster in fleet.clusters:
        if not cluster.reachable:
            reasons[cluster.name] = f"cluster unreachable: {cluster.reason or 'no answer'}"
        elif not cluster.nodes:
            reasons[cluster.name] = "the cluster has no nodes"
        elif not policy.admits(cluster):
            reasons[cluster.name] = f"excluded by policy {policy.name}'s cluster selector"
        elif workload.pinned_cluster and workload.pinned_cluster != cluster.name:
            reasons[cluster.name] = f"the workload is pinned to {workload.pinned_cluster}"
        elif cluster.name in workload.avoid_clusters:
            reasons[cluster.name] = (
                "moved away from this cluster: its pods stayed unschedulable there "
                "(placer.dev/avoid-clusters)"
            )
        elif taint := next(
            (
                t
                for c in workload.components
                if (t := taint_not_tolerated(cluster.taints, c.pod.tolerations)) is not None
            ),
            None,
        ):
            reasons[cluster.name] = f"cluster taint {taint.key}:{taint.effect} not tolerated"
        else:
            allowed.append(cluster)
    allowed.sort(key=lambda c: (policy.rank(c.name), policy.cost(c.name)))
    return allowed, reasons


def available_replicas(cluster: Cluster, component: ComponentDemand) -> int:
    """How many pods of ``component`` fit on ``cluster``'s free nodes, node by node."""
    names = resource_names([component.pod])
    state = ClusterState(cluster, names)
    return state.copies_total(PodShape.of(component.pod, names))


def _largest_remainder(total: int, weights: Sequence[tuple[str, int]]) -> dict[str, int]:
    """``total`` in proportion to ``weights`` (positive), remainders to the largest fractions
    (ties: the larger weight, then the order given)."""
    weight_sum = sum(w for _, w in weights)
    shares = {c: total * w // weight_sum for c, w in weights}
    left = total - sum(shares.values())
    ranked = sorted(
        enumerate(weights),
        key=lambda item: (-(total * item[1][1] % weight_sum), -item[1][1], item[0]),
    )
    for _, (cluster, _) in ranked[:left]:
        shares[cluster] += 1
    return shares


def divide(
    total: int,
    weights: Sequence[tuple[str, int]],
    *,
    minimum: int = 0,
    maximum: int | None = None,
    room: dict[str, int] | None = None,
) -> dict[str, int] | None:
    """``total`` replicas over the clusters of ``weights`` in proportion to the weights, by
    largest remainder; a cluster over ``maximum`` or its ``room`` keeps its cap and the rest
    is divided again over the others (water-filling); a cluster left with fewer than
    ``minimum`` (the least weighted first) gets none and the rest is divided again. ``None``
    when the bounds leave replicas over."""
    if total <= 0:
        return {}
    active = [(c, w) for c, w in weights if w > 0]

    def cap(cluster: str) -> int:
        limits = [] if maximum is None else [maximum]
        if room is not None:
            limits.append(room.get(cluster, 0))
        return min(limits) if limits else total

    fixed: dict[str, int] = {}
    while True:
        remaining = total - sum(fixed.values())
        pool = [(c, w) for c, w in active if c not in fixed]
        if not pool:
            return None
        shares = _largest_remainder(remaining, pool)
        over = [c for c, _ in pool if shares[c] > cap(c)]
        if over:
            fixed.update({c: cap(c) for c in over})
            continue
        result = {**fixed, **shares}
        small = [c for c, _ in active if 0 < result[c] < minimum]
        if small:
            weakest = min(small, key=lambda c: (dict(active)[c], -[a for a, _ in active].index(c)))
            active = [(c, w) for c, w in active if c != weakest]
            fixed.pop(weakest, None)
            continue
        return {c: n for c, n in result.items() if n > 0}


def _aggregate(
    total: int, room: Sequence[tuple[str, int]], *, minimum: int, maximum: int | None
) -> dict[str, int] | None:
    """Karmada's Aggregated: the roomiest clusters first, each filled up to what fits."""
    shares: dict[str, int] = {}
    left = total
    for cluster, fits in sorted(room, key=lambda cr: -cr[1]):
        if left <= 0:
            break
        take = min(left, fits, maximum if maximum is not None else fits)
        if take < max(minimum, 1):
            continue
        shares[cluster] = take
        left -= take
    return shares if left == 0 else None


def copy_workload(
    workload: Workload, cluster: str, replicas: dict[str, int], *, ref: WorkloadRef | None = None
) -> Workload:
    """``workload``'s copy for ``cluster``: ``replicas`` of the components it names (the
    others whole), pinned there, under ``ref`` (default: the internal copy reference)."""
    components = tuple(
        replace(c, replicas=replicas[c.label]) if c.label in replicas else c
        for c in workload.components
    )
    components = tuple(c for c in components if c.replicas > 0)
    pods = sum(c.replicas for c in components)
    gangs = tuple(
        Gang(g.name, g.members, min(g.min_member, pods)) for g in workload.gangs if pods > 0
    )
    return replace(
        workload,
        ref=ref if ref is not None else copy_ref(workload.ref, cluster),
        components=components,
        gangs=gangs,
        pinned_cluster=cluster,
        group=None,
    )


def _plan_copies(
    workload: Workload, policy: PlacementPolicy, spread: Spread, fleet: Fleet
) -> tuple[list[Copy], dict[str, str] | None]:
    """The copies of one workload, or the reasons (per cluster) it cannot be spread."""
    scheduling = spread.scheduling or ReplicaScheduling()
    targets, reasons = _targets(workload, policy, fleet)

    def refuse(text: str) -> tuple[list[Copy], dict[str, str]]:
        return [], {c.name: reasons.get(c.name, text) for c in fleet.clusters}

    if workload.group:
        return refuse(
            f"policy {policy.name} spreads this workload over clusters, but it is in "
            f"placer.dev/group {workload.group}, which keeps it in one cluster"
        )
    if scheduling.type == "Duplicated":
        chosen = targets[: spread.max_clusters] if spread.max_clusters else targets
        if len(chosen) < spread.min_clusters:
            return refuse(
                f"policy {policy.name} duplicates to at least {spread.min_clusters} "
                f"cluster(s) (minGroups), {len(chosen)} match"
            )
        return [Copy(c.name, copy_workload(workload, c.name, {})) for c in chosen], None
    scalable = [c for c in workload.components if c.label in workload.scalable]
    if not scalable:
        return refuse(
            f"policy {policy.name} divides replicas, but the definition of "
            f"{workload.ref.kind} gives no replicas path for any component: only such kinds "
            "can be divided (use replicaSchedulingType: Duplicated)"
        )
    primary = scalable[0]
    need_room = scheduling.dynamic or scheduling.division == "Aggregated"
    room = {c.name: available_replicas(c, primary) for c in targets} if need_room else {}
    if scheduling.division == "Aggregated":
        pool = [(c.name, room[c.name]) for c in targets]
        if spread.max_clusters:
            pool = sorted(pool, key=lambda cr: -cr[1])[: spread.max_clusters]
        shares = _aggregate(
            primary.replicas,
            pool,
            minimum=scheduling.min_per_cluster,
            maximum=scheduling.max_per_cluster,
        )
    else:
        if scheduling.dynamic:
            weights = [(c.name, room[c.name]) for c in targets]
        else:
            weights = [(c.name, scheduling.static_weight(c)) for c in targets]
        weights = [cw for cw in weights if cw[1] > 0]
        if spread.max_clusters:
            keep = {c for c, _ in sorted(weights, key=lambda cw: -cw[1])[: spread.max_clusters]}
            weights = [cw for cw in weights if cw[0] in keep]
        shares = divide(
            primary.replicas,
            weights,
            minimum=scheduling.min_per_cluster,
            maximum=scheduling.max_per_cluster,
            room=room if scheduling.dynamic else None,
        )
    if shares is None:
        fit = sum(room.values()) if room else None
        detail = f"; {fit} fit on the free nodes of the allowed clusters" if fit is not None else ""
        return refuse(
            f"policy {policy.name} cannot divide the {primary.replicas} replicas of component "
            f'"{primary.label}" within its bounds{detail}'
        )
    if len(shares) < spread.min_clusters:
        return refuse(
            f"policy {policy.name} divides over at least {spread.min_clusters} cluster(s) "
            f"(minGroups), the division uses {len(shares)}"
        )
    copies = []
    for cluster in [c.name for c in targets if c.name in shares]:
        fraction = shares[cluster]
        replicas = {primary.label: fraction}
        for other in scalable[1:]:
            replicas[other.label] = max(1, other.replicas * fraction // primary.replicas)
        copied = copy_workload(workload, cluster, replicas)
        copies.append(Copy(cluster, copied, tuple(sorted(replicas.items()))))
    return copies, None


def expand(
    workloads: Sequence[Workload], fleet: Fleet, policies: Sequence[PlacementPolicy]
) -> Expansion:
    """The solver's input: spread workloads as copies (see the module docstring)."""
    expansion = Expansion(originals=workloads, workloads=[])
    for index, workload in enumerate(workloads):
        policy = policy_for(workload, policies)
        spread = policy.spread if policy is not None else None
        if policy is None or spread is None or spread.scheduling is None:
            expansion.workloads.append(workload)
            continue
        copies, refused = _plan_copies(workload, policy, spread, fleet)
        if refused is not None:
            expansion.refused[index] = refused
            continue
        expansion.copies[index] = copies
        for item in copies:
            expansion.workloads.append(item.workload)
            expansion.by_ref[item.workload.ref] = (index, item)
    return expansion


def fold(decision: Decision, expansion: Expansion) -> Decision:
    """The decision in the input's terms (see the module docstring)."""
    placed: dict[int, list[Placement]] = {}
    failed: dict[int, dict[str, str]] = {}
    placements: list[Placement | tuple[int, Placement]] = []
    for placement in decision.placements:
        known = expansion.by_ref.get(placement.workload)
        if known is None:
            placements.append(placement)
            continue
        index, _ = known
        original = expansion.originals[index].ref
        folded = replace(placement, workload=original)
        placed.setdefault(index, []).append(folded)
        placements.append((index, folded))
    unplaced: list[Unplaced] = []
    for item in decision.unplaced:
        known = expansion.by_ref.get(item.workload)
        if known is None:
            unplaced.append(item)
            continue
        index, copy = known
        reason = item.reasons.get(copy.cluster, "")
        failed.setdefault(index, {})[copy.cluster] = (
            f"its copy for this cluster ({_replicas_text(copy)}) does not fit: {reason}"
        )
    for index, reasons in failed.items():
        for placement in placed.get(index, []):
            reasons[placement.cluster] = (
                f"its copy fits here, but not the copy for {', '.join(sorted(reasons))} "
                "(a spread workload is placed whole or not at all)"
            )
        unplaced.append(Unplaced(expansion.originals[index].ref, reasons))
    for index, reasons in expansion.refused.items():
        unplaced.append(Unplaced(expansion.originals[index].ref, reasons))
    kept = [p if isinstance(p, Placement) else p[1] for p in placements]
    kept = [
        p
        for p, item in zip(kept, placements, strict=True)
        if not isinstance(item, tuple) or item[0] not in failed
    ]
    placed_requests: dict[str, int] = {}
    for p in kept:
        placed_requests = add(placed_requests, p.requests)
    summary = replace(
        decision.summary,
        workloads=len(expansion.originals),
        placed=len({p.workload for p in kept}),
        placed_requests=placed_requests,
    )
    return Decision(placements=tuple(kept), unplaced=tuple(unplaced), summary=summary)


def _replicas_text(copy: Copy) -> str:
    if not copy.replicas:
        return "the whole workload"
    return ", ".join(f"{n} replicas of {label}" for label, n in copy.replicas)


def solve_spread(
    workloads: Sequence[Workload],
    fleet: Fleet,
    *,
    policies: Sequence[PlacementPolicy] = (),
    **options: Any,
) -> Decision:
    """:func:`placer.solver.solve` with spread workloads (see the module docstring)."""
    from placer.solver.decide import solve

    expansion = expand(workloads, fleet, policies)
    decision = solve(expansion.workloads, fleet, policies=policies, **options)
    return fold(decision, expansion)
