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

Cost: first fit runs once per cluster for each waiting workload it considers, and again per
lower-priority started candidate. None of the following changes the outcome: only a waiting
workload of a priority above the lowest priority started (and still movable) is considered at
all; a cluster is tried only when its free totals of whole GPUs, cpu and memory on usable
nodes cover the workload's (:func:`_short`, a necessary condition); each first fit is a
one-cluster fleet's decision, remembered per cluster object (a release or charge replaces only
the cluster it touches, so a candidate's release re-tries its own cluster only).

Pure: reads its arguments, returns new objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from placer.model import GPU_SHARE, Cluster, Fleet, Placement, Workload, WorkloadRef
from placer.policy import PlacementPolicy
from placer.quantity import CPU, GPU, MEMORY
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


#: the resources whose free totals screen a first fit (:func:`_short`).
SCREENED = (GPU, CPU, MEMORY)


def _gpu_milli(requests: Mapping[str, int]) -> int:
    return requests.get(GPU, 0) * 1000 + requests.get(GPU_SHARE, 0)


def _short(demand: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """Whether ``demand`` exceeds a cluster's ``free`` totals (usable nodes,
    :meth:`placer.model.Cluster.free`) in whole GPUs, cpu or memory: then no first fit can
    place it there (a necessary condition only; whole GPUs count wholly free devices)."""
    return any(demand.get(r, 0) > free.get(r, 0) for r in SCREENED)


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

    priorities: dict[WorkloadRef, int] = {}

    def priority(workload: Workload) -> int:
        known = priorities.get(workload.ref)
        if known is None:
            known = (
                membership(workload, queues).priority if queues is not None else workload.priority
            )
            priorities[workload.ref] = known
        return known

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

    # first fits and free totals per cluster object: a release or charge replaces only the
    # cluster it touches, so the other clusters' answers stand (checked by identity)
    fits: dict[tuple[WorkloadRef, int], tuple[Cluster, Placement | None]] = {}
    totals: dict[int, tuple[Cluster, dict[str, int]]] = {}

    def free_of(cluster: Cluster) -> dict[str, int]:
        known = totals.get(id(cluster))
        if known is None or known[0] is not cluster:
            known = (cluster, cluster.free())
            totals[id(cluster)] = known
        return known[1]

    def fit(workload: Workload, on: Fleet, cluster: Cluster) -> Placement | None:
        key = (workload.ref, id(cluster))
        known = fits.get(key)
        if known is not None and known[0] is cluster:
            return known[1]
        answer = None
        if not _short(workload.total_requests(), free_of(cluster)):
            alone = replace(on, clusters=(cluster,))
            decision = solve([workload], alone, policies=policies, solver="first-fit")
            answer = decision.placements[0] if decision.placements else None
        fits[key] = (cluster, answer)
        return answer

    def place(workload: Workload, on: Fleet, where: Sequence[str] = ()) -> Placement | None:
        """First fit of ``workload`` alone, cluster by cluster (``where`` first): first fit
        picks a cluster on its totals, and would miss one whose nodes hold it."""
        by_name = {c.name: c for c in on.clusters}
        for name in (*where, *(n for n in names if n not in where)):
            placement = fit(workload, on, by_name[name])
            if placement is not None:
                return placement
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
