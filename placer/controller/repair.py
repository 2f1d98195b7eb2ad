"""A cycle's decision closed in priority order before it is dispatched.

A cycle decides its batch (priorities first, :func:`placer.solver.fairshare.solve_fair`), then
evicts for what stayed pending (:class:`~placer.controller.preemption.Preemption`). A reclaim
may evict work of a higher priority than work the same decision placed (its victims are of a
priority no higher than the preemptor's, not than everything else placed beside it); work held
back by an eviction under way (its victims, until their preemptor is placed) was not in the
batch at all. Either may then wait while a lower priority the cycle placed holds room it fits:
an inversion. :func:`close_decision` applies :func:`placer.solver.priority_repair.
repair_priorities` to the decision before it is dispatched:

* started: the decision's placements; waiting: the batch's workloads it left pending (but
  the preemptors of this cycle, whose room is being freed, and those the queues refused) and
  the victims of the evictions under way that are pending on the hub;
* the fleet as the decision left it, victims still counted: the room an eviction frees is its
  preemptor's, not its victims';
* a placement the repair takes back is not dispatched: the workload waits (``Placed=False``,
  its reason names who the room is kept for) and is decided again; a waiting workload of the
  batch the repair starts is dispatched like any other placement; a victim the repair starts
  is not (it is not this cycle's: it is decided once its hold ends, and finds the room free).

Pure: reads its arguments, returns new objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from placer.model import Decision, Fleet, Placement, Unplaced, Workload, WorkloadRef
from placer.policy import PlacementPolicy
from placer.queues import QueueSet
from placer.solver.charging import charge
from placer.solver.fairshare import Running
from placer.solver.priority_repair import repair_priorities

__all__ = ["Closed", "close_decision"]


@dataclass(frozen=True)
class Closed:
    """The decision to dispatch, and what the repair changed."""

    decision: Decision
    #: placements of the decision that are not dispatched, and why (per workload).
    withheld: Mapping[WorkloadRef, str]
    #: waiting workloads the room is kept for (not dispatched by this cycle).
    kept_for: tuple[WorkloadRef, ...] = ()


def close_decision(
    decision: Decision,
    fleet: Fleet,
    batch: Mapping[WorkloadRef, Workload],
    waiting: Sequence[Workload],
    queues: QueueSet,
    running: Sequence[Running] = (),
    policies: Sequence[PlacementPolicy] = (),
) -> Closed:
    """The decision closed in priority order (module docstring). ``fleet``: what the decision
    was taken on; ``batch``: the cycle's workloads by reference (the decision's placements
    are theirs); ``waiting``: the pending workloads that may take a placement's room (the
    batch's left pending and the victims of evictions under way); ``running``: the work
    placed before (it counts toward its queues, never moved)."""
    placed = [p for p in decision.placements if p.workload in batch]
    if not placed or not waiting:
        return Closed(decision, {})
    held = [
        (
            r.workload,
            Placement(
                r.workload.ref,
                r.cluster,
                (),
                dict(r.requests) if r.requests is not None else r.workload.total_requests(),
            ),
        )
        for r in running
    ]
    repair = repair_priorities(
        charge(fleet, decision.placements),
        [(batch[p.workload], p) for p in placed],
        waiting,
        queues=queues,
        running=held,
        policies=policies,
    )
    if not repair.unstarted and not any(p.workload in batch for p in repair.started):
        return Closed(decision, {})
    kept_for = tuple(p.workload for p in repair.started if p.workload not in batch)
    back = set(repair.unstarted)
    whom = ", ".join(str(ref) for ref in kept_for) or "a workload of a higher priority"
    withheld = {
        p.workload: f"its room is kept for {whom}, of a higher priority, waiting to be decided"
        for p in decision.placements
        if p.workload in back
    }
    started = [p for p in repair.started if p.workload in batch]
    now_placed = {p.workload for p in started}
    placements = (*(p for p in decision.placements if p.workload not in back), *started)
    unplaced = (
        *(u for u in decision.unplaced if u.workload not in now_placed),
        *(
            Unplaced(p.workload, {p.cluster: withheld[p.workload]})
            for p in decision.placements
            if p.workload in back
        ),
    )
    repaired = replace(decision, placements=tuple(placements), unplaced=tuple(unplaced))
    return Closed(repaired, withheld, kept_for)
