"""Queue order repair: no workload a decision started holds the room of an earlier one of its
queue and priority that waits (first in, first out among equals; BestEffortFIFO).

:func:`placer.solver.fairshare.solve_fair` offers each queue's workloads in the queue's order
(:mod:`placer.queues.order`: priority, then creation time), but a solver call places the
offered set by value (:mod:`placer.solver`: the most GPUs), so when the room holds only one of
two gangs it may start the later, larger one. :func:`repair_order` closes the decision in the
queue's order, over the workloads it started (``S``) and those left waiting (``W``):

for each waiting ``w ∈ W`` in key order (earliest first): over the started ``s ∈ S`` of the
same queue and priority with ``key(s) > key(w)`` (the latest first), the first one whose room
lets ``w`` pack on the real nodes of its cluster (first fit) is taken back — it waits again,
its run not begun, and is itself a waiting workload later in the order — and ``w`` starts in
its place. A workload taken back first tries to start anywhere in what is free. Every swap
keeps, for ``w``'s queue ``q`` and its ancestors, the limits (fleet-wide and per cluster),
``overQuotaWeight: 0`` (never over quota) and the tier of ``s``: when ``s`` ran in quota,
``w`` must be in quota after the swap (in quota before over quota ranks above the order).

A swap replaces a started workload by an earlier one of the same lane, so the sorted list of
started keys only improves and the loop ends; it tries at most ``MAX_TRIALS`` packings (a
cheap test on the cluster's free totals comes first), so its cost stays bounded on large
streams. Only single workloads move (a ``placer.dev/group`` starts or waits whole).

Pure: reads its arguments, returns new objects (``usage`` is updated in place: the caller's
booking of what the decision started).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from placer.model import Fleet, Placement, Workload
from placer.policy import PlacementPolicy
from placer.queues import OrderKey, Usage
from placer.solver.charging import charge, release
from placer.solver.decide import solve

__all__ = ["MAX_TRIALS", "Item", "OrderRepair", "repair_order"]

#: the most packings one repair tries.
MAX_TRIALS = 48


@dataclass(frozen=True)
class Item:
    """A workload of the decision, by the caller's index."""

    workload: Workload
    queue: str | None
    priority: int
    key: OrderKey
    #: whether the repair may start or take back this workload (single, offered, in a queue
    #: the decision honours).
    movable: bool = True


@dataclass
class OrderRepair:
    """What the repair changed."""

    fleet: Fleet
    #: index -> placement: what the decision starts after the repair.
    started: dict[int, Placement]
    #: indices started in quota after the repair (of those in ``started``).
    in_quota: set[int]
    #: taken back -> the earlier workload that got its room.
    displaced: dict[int, int] = field(default_factory=dict)
    #: packings tried.
    trials: int = 0


def _fits_totals(need: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(amount <= free.get(name, 0) for name, amount in need.items() if amount > 0)


def repair_order(
    fleet: Fleet,
    items: Sequence[Item],
    started: Mapping[int, Placement],
    in_quota: set[int],
    usage: Usage,
    *,
    policies: Sequence[PlacementPolicy] = (),
    max_trials: int = MAX_TRIALS,
) -> OrderRepair:
    """Repair the decision (module docstring). ``fleet``: as the decision left it;
    ``started``: index -> placement of what it started; ``in_quota``: those started in
    quota; ``usage``: the queues' usage with ``started`` booked (updated in place)."""
    result = OrderRepair(fleet=fleet, started=dict(started), in_quota=set(in_quota))

    def lane(i: int) -> tuple[str | None, int]:
        return items[i].queue, items[i].priority

    waiting = [
        (items[i].key, i) for i in range(len(items)) if items[i].movable and i not in result.started
    ]
    lanes_started = {lane(i) for i in result.started if items[i].movable}
    waiting = [(k, i) for k, i in waiting if lane(i) in lanes_started]
    if not waiting:
        return result
    heapq.heapify(waiting)
    taken_back: set[int] = set()

    def admitted(i: int, cluster: str, need: Mapping[str, int], quota: bool) -> bool:
        queue = items[i].queue
        return (
            usage.limit_problem(queue, need) is None
            and usage.cluster_problem(queue, need, cluster) is None
            and usage.weight_problem(queue, need) is None
            and (not quota or usage.quota_problem(queue, need) is None)
        )

    def pack(i: int, on: Fleet, cluster: str) -> Placement | None:
        if result.trials >= max_trials:
            return None
        result.trials += 1
        one = replace(on, clusters=tuple(c for c in on.clusters if c.name == cluster))
        decision = solve(
            [items[i].workload], one, policies=policies, solver="first-fit", grow=False
        )
        return decision.placements[0] if decision.placements else None

    def start(i: int, placement: Placement) -> None:
        result.in_quota.discard(i)
        if usage.quota_problem(items[i].queue, placement.requests) is None:
            result.in_quota.add(i)
        usage.add(items[i].queue, placement.requests, placement.cluster)
        result.fleet = charge(result.fleet, [placement])
        result.started[i] = placement

    while waiting and result.trials < max_trials:
        key, w = heapq.heappop(waiting)
        need = items[w].workload.total_requests()
        if w in taken_back:  # first anywhere in what is free
            placed = None
            for cluster in result.fleet.clusters:
                if not cluster.reachable or not _fits_totals(need, cluster.free()):
                    continue
                if not admitted(w, cluster.name, need, quota=False):
                    continue
                placed = pack(w, result.fleet, cluster.name)
                if placed is not None:
                    break
            if placed is not None:
                start(w, placed)
                continue
        later = sorted(
            (
                s
                for s in result.started
                if items[s].movable and lane(s) == lane(w) and items[s].key > key
            ),
            key=lambda s: items[s].key,
            reverse=True,
        )
        for s in later:
            held = result.started[s]
            room = dict(next(c for c in result.fleet.clusters if c.name == held.cluster).free())
            for name, amount in held.requests.items():
                room[name] = room.get(name, 0) + amount
            if not _fits_totals(need, room):
                continue
            usage.remove(items[s].queue, held.requests, held.cluster)
            if not admitted(w, held.cluster, need, quota=s in result.in_quota):
                usage.add(items[s].queue, held.requests, held.cluster)
                continue
            freed = release(result.fleet, [held])
            placed = pack(w, freed, held.cluster)
            if placed is None:
                usage.add(items[s].queue, held.requests, held.cluster)
                continue
            del result.started[s]
            result.in_quota.discard(s)
            result.fleet = freed
            start(w, placed)
            result.displaced[s] = w
            taken_back.add(s)
            heapq.heappush(waiting, (items[s].key, s))
            break
    return result
