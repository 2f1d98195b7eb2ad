"""Deciding a unit again during a dispatch: elsewhere after a refusal, or on one cluster.

A unit that failed on a cluster (and was cleaned up there, :mod:`placer.dispatch.rollback`) is
decided again by the solver on the fleet as it now stands — the clusters that failed it
excluded, with their failure as the reason, and this dispatch's successful placements charged
— and dispatched to the next best cluster, until it is placed or no cluster is left
(:meth:`Redecider.elsewhere`). The concurrent-decision check re-plans a unit whose nodes were
taken on the remaining nodes of its cluster (:meth:`Redecider.on_cluster`).

Re-decisions use the first decision's policies and solver settings, or the caller's ``decide``
hook (snapshot-free decisions; the controller's parts, which decide again one at a time).

A first decision made under queues (:func:`placer.solver.fairshare.solve_fair`) admitted each
unit against its queue's limits fleet-wide; moving it to another cluster keeps those totals but
not its queue's per-cluster caps. The ``guard`` (:func:`queue_guard`) leaves out of a
re-decision every cluster where the unit would take a queue past its ``clusterLimits``, with
that reason, on the queues' use by the work already running and every other placement of the
decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from placer.dispatch.ledger import charge_known
from placer.dispatch.options import Decide, DispatchOptions, Guard
from placer.dispatch.outcomes import Manifest
from placer.dispatch.units import Unit
from placer.model import Decision, Fleet, Placement, Unplaced, Workload, WorkloadRef
from placer.policy import PlacementPolicy
from placer.queues import QueueSet, Usage, membership
from placer.solver import solve

if TYPE_CHECKING:
    from placer.solver.fairshare import Running

__all__ = ["Redecider", "queue_guard"]


def queue_guard(
    queues: QueueSet,
    running: Sequence[Running],
    decision: Decision,
    workloads: Sequence[Workload],
) -> Guard:
    """The ``guard`` of re-decisions of ``decision`` (module docstring): ``running`` and the
    decision's placements (of ``workloads``) booked to their queues; a unit re-decided is
    taken out of them before its clusters are judged."""
    by_ref = {w.ref: w for w in workloads}
    usage = Usage(queues)
    for item in running:
        usage.add(
            membership(item.workload, queues).queue, item.workload.total_requests(), item.cluster
        )
    placed: dict[WorkloadRef, str] = {}
    for placement in decision.placements:
        workload = by_ref.get(placement.workload)
        if workload is not None:
            queue = membership(workload, queues).queue
            usage.add(queue, workload.total_requests(), placement.cluster)
            placed[workload.ref] = placement.cluster

    def guard(unit: Sequence[Workload], clusters: Sequence[str]) -> dict[str, str]:
        mine = usage.copy()
        for workload in unit:
            if workload.ref in placed:
                queue = membership(workload, queues).queue
                mine.remove(queue, workload.total_requests(), placed[workload.ref])
        barred: dict[str, str] = {}
        for cluster in clusters:
            here = mine.copy()
            for workload in unit:
                queue = membership(workload, queues).queue
                problem = here.cluster_problem(queue, workload.total_requests(), cluster)
                if problem is not None:
                    barred[cluster] = problem
                    break
                here.add(queue, workload.total_requests(), cluster)
        return barred

    return guard


@dataclass(frozen=True)
class Redecider:
    """How one dispatch decides again (see the module docstring)."""

    policies: tuple[PlacementPolicy, ...] = ()
    solver: str = "cpsat"
    time_limit: float = 1.0
    seed: int = 0
    #: replaces the solver.
    decide: Decide | None = None
    #: clusters a re-decision leaves out (module docstring).
    guard: Guard | None = None

    @classmethod
    def from_options(cls, options: DispatchOptions) -> Redecider:
        return cls(
            policies=tuple(options.policies),
            solver=options.solver,
            time_limit=options.time_limit,
            seed=options.seed,
            decide=options.decide,
            guard=options.guard,
        )

    def decision(self, workloads: Sequence[Workload], fleet: Fleet) -> Decision:
        """``workloads`` decided on ``fleet`` (without the clusters the guard bars)."""
        if self.guard is not None:
            barred = self.guard(workloads, [c.name for c in fleet.clusters if c.reachable])
            if barred:
                fleet = replace(
                    fleet,
                    clusters=tuple(
                        replace(c, reachable=False, reason=barred[c.name])
                        if c.name in barred
                        else c
                        for c in fleet.clusters
                    ),
                )
        if self.decide is not None:
            return self.decide(workloads, fleet)
        return solve(
            workloads,
            fleet,
            policies=self.policies,
            solver=self.solver,
            time_limit=self.time_limit,
            seed=self.seed,
        )

    def on_cluster(
        self, unit: Unit, by_ref: Mapping[WorkloadRef, Manifest], fleet: Fleet
    ) -> list[Placement] | None:
        """The unit's workloads placed again on ``fleet`` (one cluster), or ``None``."""
        workloads = [by_ref[ref].workload for ref in unit.refs]
        decision = self.decision(workloads, fleet)
        if decision.unplaced or len(decision.placements) != len(workloads):
            return None
        return list(decision.placements)

    def elsewhere(
        self,
        unit: Unit,
        by_ref: Mapping[WorkloadRef, Manifest],
        fleet: Fleet,
        success: Sequence[Placement],
    ) -> Unit | Decision:
        """The unit decided again without its failed clusters: a new unit, or the decision
        that left it unplaced (each failed cluster's reason is its dispatch failure)."""
        excluded = {name: a for name, a in unit.excluded.items()}
        clusters = []
        for cluster in fleet.clusters:
            if cluster.name in excluded:
                clusters.append(
                    replace(cluster, reachable=False, reason=excluded[cluster.name].error)
                )
            else:
                clusters.append(cluster)
        base = replace(fleet, clusters=tuple(clusters))
        known = {c.name for c in base.clusters if c.reachable}
        charged = charge_known(base, [p for p in success if p.cluster in known])
        workloads = [by_ref[ref].workload for ref in unit.refs]
        decision = self.decision(workloads, charged)
        if decision.placements and not decision.unplaced:
            return Unit(list(decision.placements), dict(unit.excluded))
        fixed = tuple(
            Unplaced(
                u.workload,
                {
                    name: (f"dispatch failed: {excluded[name].error}" if name in excluded else text)
                    for name, text in u.reasons.items()
                },
            )
            for u in decision.unplaced
        )
        return replace(decision, placements=(), unplaced=fixed)
