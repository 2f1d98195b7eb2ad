"""Priority repair: after a decision, no gang it started holds the room of a waiting gang of a
higher priority.

A decision may be taken in several steps (the stream replay: a solver call over the new
arrivals, evictions for the work still waiting, one more call over what the evictions freed).
Each step is lexicographic in priorities (:mod:`placer.solver.fairshare`), but a step only
sees its own input: a priority-10 gang evicted by a later step's reclaim, or one not offered
to an earlier step, may end up waiting while a priority-0 gang this decision started holds room
it fits. :func:`repair_priorities` closes the decision in the model's order (issue #14:
priorities are never inverted, before quotas and fair share):

for each waiting workload ``w``, highest priority first (then input order): if it fits the
fleet as the decision left it, it starts there; else, over the workloads this decision started
with a priority ``p_s < p_w`` (lowest priority first, then the fewest GPUs, then the latest
started), the first whose release lets ``w`` pack on the real nodes (first fit) is taken back
(it waits again, its run not begun) and ``w`` starts in its place. Queue limits (fleet-wide and
per cluster) hold for every swap, and a queue with ``overQuotaWeight: 0`` stays within its
quota. Only single workloads are moved (not ``placer.dev/group``
members: a group starts or waits whole, decided by the solver).

Pure: reads its arguments, returns new objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from placer.model import GPU_SHARE, Fleet, Placement, Workload, WorkloadRef
from placer.policy import PlacementPolicy
from placer.quantity import GPU
from placer.queues import QueueSet, Usage, membership
from placer.solver.charging import charge, release
from placer.solver.decide import solve

__all__ = ["Repair", "repair_priorities"]


@dataclass(frozen=True)
class Repair:
    """What the repair changed."""

    #: the fleet after the repair.
    fleet: Fleet
    #: waiting workloads it starts, in the order started.
    started: tuple[Placement, ...]
    #: workloads the decision had started that wait again (their room went to a higher
    #: priority), in the order taken back.
    unstarted: tuple[WorkloadRef, ...]


def _gpu_milli(requests: Mapping[str, int]) -> int:
    return requests.get(GPU, 0) * 1000 + requests.get(GPU_SHARE, 0)


def repair_priorities(
    fleet: Fleet,
    started: Sequence[tuple[Workload, Placement]],
    waiting: Sequence[Workload],
    *,
    queues: QueueSet | None = None,
    running: Sequence[tuple[Workload, Placement]] = (),
    policies: Sequence[PlacementPolicy] = (),
) -> Repair:
    """Repair the decision (module docstring). ``fleet``: as the decision left it (``started``
    and ``running`` charged); ``started``: what the decision started (may be taken back);
    ``running``: the other work holding room (counted in the queues' usage, never moved);
    ``queues``: the queues (priorities by :func:`placer.queues.membership`, limits); without
    them the workloads' own priorities and no limits."""

    def priority(workload: Workload) -> int:
        return membership(workload, queues).priority if queues is not None else workload.priority

    def queue_of(workload: Workload) -> str | None:
        return membership(workload, queues).queue if queues is not None else None

    usage = Usage(queues) if queues is not None else None
    if usage is not None:
        for holder, holding in (*running, *started):
            usage.add(queue_of(holder), holding.requests, holding.cluster)

    def allowed(workload: Workload, placement: Placement) -> bool:
        if usage is None:
            return True
        queue = queue_of(workload)
        demand = placement.requests
        return (
            usage.limit_problem(queue, demand) is None
            and usage.cluster_problem(queue, demand, placement.cluster) is None
            and usage.weight_problem(queue, demand) is None  # overQuotaWeight 0: never over
        )

    names = [c.name for c in fleet.clusters if c.reachable]

    def place(workload: Workload, on: Fleet, where: Sequence[str] = ()) -> Placement | None:
        """First fit of ``workload`` alone, cluster by cluster (``where`` first): first fit
        picks a cluster on its totals, and would miss one whose nodes hold it."""
        for name in (*where, *(n for n in names if n not in where)):
            barred = {n: "not this cluster" for n in names if n != name}
            decision = solve(
                [workload], on, policies=policies, solver="first-fit", exclusions={0: barred}
            )
            if decision.placements:
                return decision.placements[0]
        return None

    started_refs = {w.ref for w, _ in started}
    movable = [(w, p) for w, p in started if not w.group]
    new: list[Placement] = []
    back: list[WorkloadRef] = []
    order = sorted(range(len(waiting)), key=lambda i: (-priority(waiting[i]), i))
    for i in order:
        workload = waiting[i]
        if workload.group:
            continue
        mine = priority(workload)
        if not any(priority(w) < mine for w, _ in movable):
            continue  # nothing of a lower priority started: nothing to repair for it
        placement = place(workload, fleet)
        if placement is not None and allowed(workload, placement):
            fleet = charge(fleet, [placement])
            if usage is not None:
                usage.add(queue_of(workload), placement.requests, placement.cluster)
            new.append(placement)
            movable.append((workload, placement))
            continue
        lower = sorted(
            (k for k, (w, _) in enumerate(movable) if priority(w) < mine),
            key=lambda k: (priority(movable[k][0]), _gpu_milli(movable[k][1].requests), -k),
        )
        for k in lower:
            theirs, held = movable[k]
            freed = release(fleet, [held])
            if usage is not None:
                usage.remove(queue_of(theirs), held.requests, held.cluster)
            placement = place(workload, freed, (held.cluster,))
            if placement is not None and allowed(workload, placement):
                fleet = charge(freed, [placement])
                if usage is not None:
                    usage.add(queue_of(workload), placement.requests, placement.cluster)
                del movable[k]
                if theirs.ref in started_refs:
                    back.append(theirs.ref)
                else:  # started by this repair for a higher priority: it waits again
                    new = [p for p in new if p.workload != theirs.ref]
                new.append(placement)
                movable.append((workload, placement))
                break
            if usage is not None:
                usage.add(queue_of(theirs), held.requests, held.cluster)
    return Repair(fleet=fleet, started=tuple(new), unstarted=tuple(back))
