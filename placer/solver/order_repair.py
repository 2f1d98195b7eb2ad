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
started keys only improves and the loop ends. Cost: before a packing is tried, two necessary
conditions are checked from cached per-cluster figures — ``w``'s requests within the
cluster's free totals plus ``s``'s (first against the most any one later workload of the lane
there releases, per resource, to skip a whole cluster at once), and for each component of
``w`` with pod requests ``a``, ``Σ_n min_r ⌊(f_{n,r} + s_{n,r}) / a_r⌋ ≥`` its replicas over
the usable nodes ``n`` (``f``: free, ``s_{n,r}``: what ``s`` holds on ``n``; the sum
without ``s`` is kept per workload and cluster, so a pair costs only ``s``'s nodes). At most
``MAX_TRIALS`` packings are tried, and none once ``seconds`` (the decision's clock,
:mod:`placer.solver.clock`) are used; what is not repaired then stays as the solver decided
(the time limit holds). Only single workloads move (a
``placer.dev/group`` starts or waits whole).

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
from placer.solver.charging import charge
from placer.solver.clock import Clock
from placer.solver.decide import solve

__all__ = ["MAX_TRIALS", "Item", "OrderRepair", "repair_order"]

#: the most packings one repair tries.
MAX_TRIALS = 48

Lane = tuple[str | None, int]


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


class _Room:
    """Per cluster of a fleet: free totals and the free resources of each usable node, cached
    (a cluster's figures are dropped when it changes)."""

    def __init__(self, fleet: Fleet) -> None:
        self._clusters = {c.name: c for c in fleet.clusters}
        self._totals: dict[str, dict[str, int]] = {}
        self._nodes: dict[str, dict[str, dict[str, int]]] = {}
        #: (workload index, cluster) -> per component: (copies, copies per node)
        self._copies: dict[tuple[int, str], list[tuple[int, dict[str, int]]]] = {}

    def update(self, fleet: Fleet, cluster: str) -> None:
        self._clusters = {c.name: c for c in fleet.clusters}
        self._totals.pop(cluster, None)
        self._nodes.pop(cluster, None)
        for key in [k for k in self._copies if k[1] == cluster]:
            del self._copies[key]

    def copies(
        self, index: int, workload: Workload, cluster: str
    ) -> list[tuple[int, dict[str, int]]]:
        """Per component of ``workload``: how many of its pods the free nodes hold one by
        one, in all and per node (nodes holding none left out)."""
        key = (index, cluster)
        if key not in self._copies:
            nodes = self.nodes(cluster)
            out = []
            for component in workload.components:
                asks = _asks(component.pod.requests)
                per = {}
                for node, free in nodes.items():
                    count = _count(free, {}, asks)
                    if count:
                        per[node] = count
                out.append((sum(per.values()), per))
            self._copies[key] = out
        return self._copies[key]

    def totals(self, name: str) -> dict[str, int]:
        if name not in self._totals:
            self._totals[name] = self._clusters[name].free()
        return self._totals[name]

    def nodes(self, name: str) -> dict[str, dict[str, int]]:
        if name not in self._nodes:
            self._nodes[name] = {n.name: n.free for n in self._clusters[name].nodes if n.usable}
        return self._nodes[name]


def _within(need: Mapping[str, int], free: Mapping[str, int], extra: Mapping[str, int]) -> bool:
    return all(
        amount <= free.get(name, 0) + extra.get(name, 0)
        for name, amount in need.items()
        if amount > 0
    )


def _asks(requests: Mapping[str, int]) -> list[tuple[str, int]]:
    return [(name, amount) for name, amount in requests.items() if amount > 0]


def _count(free: Mapping[str, int], extra: Mapping[str, int], asks: list[tuple[str, int]]) -> int:
    """Pods asking ``asks`` that ``free`` plus ``extra`` hold one by one."""
    if not asks:
        return 1 << 30
    return max(0, min((free.get(r, 0) + extra.get(r, 0)) // a for r, a in asks))


def _may_fit(
    index: int,
    workload: Workload,
    need: Mapping[str, int],
    room: _Room,
    cluster: str,
    held: Placement | None,
) -> bool:
    """The necessary conditions of the module docstring (``held``: released first)."""
    if not _within(need, room.totals(cluster), held.requests if held is not None else {}):
        return False
    back: dict[str, dict[str, int]] = {}
    if held is not None:
        for pod in held.pods:
            into = back.setdefault(pod.node, {})
            for name, amount in pod.requests.items():
                into[name] = into.get(name, 0) + amount
    nodes = room.nodes(cluster)
    copies = room.copies(index, workload, cluster)
    for component, (total, per) in zip(workload.components, copies, strict=True):
        if component.replicas <= 0:
            continue
        asks = _asks(component.pod.requests)
        if not asks:
            continue
        for node, extra in back.items():
            if node in nodes:
                total += _count(nodes[node], extra, asks) - per.get(node, 0)
        if total < component.replicas:
            return False
    return True


def repair_order(
    base: Fleet,
    fleet: Fleet,
    items: Sequence[Item],
    started: Mapping[int, Placement],
    in_quota: set[int],
    usage: Usage,
    *,
    policies: Sequence[PlacementPolicy] = (),
    max_trials: int = MAX_TRIALS,
    seconds: float | None = None,
) -> OrderRepair:
    """Repair the decision (module docstring). ``base``: the fleet before the decision
    (GPU devices spelled out); ``fleet``: as the decision left it, ``base`` charged with
    ``started`` in its order; ``started``: index -> placement of what it started, in the
    order charged; ``in_quota``: those started in
    quota; ``usage``: the queues' usage with ``started`` booked (updated in place);
    ``seconds``: the time it may take (``None``: no limit but ``max_trials``)."""
    clock = Clock()
    result = OrderRepair(fleet=fleet, started=dict(started), in_quota=set(in_quota))

    def lane(i: int) -> Lane:
        return items[i].queue, items[i].priority

    # per lane, what the decision started, latest first
    lanes: dict[Lane, list[int]] = {}
    for i in result.started:
        if items[i].movable:
            lanes.setdefault(lane(i), []).append(i)
    for members in lanes.values():
        members.sort(key=lambda i: items[i].key, reverse=True)
    waiting = [
        (items[i].key, i)
        for i in range(len(items))
        if items[i].movable and i not in result.started and lane(i) in lanes
    ]
    if not waiting:
        return result
    heapq.heapify(waiting)
    room = _Room(fleet)
    taken_back: set[int] = set()

    def admitted(i: int, cluster: str, need: Mapping[str, int], quota: bool) -> bool:
        queue = items[i].queue
        return (
            usage.limit_problem(queue, need) is None
            and usage.cluster_problem(queue, need, cluster) is None
            and usage.weight_problem(queue, need) is None
            and (not quota or usage.quota_problem(queue, need) is None)
        )

    def out_of_time() -> bool:
        return result.trials >= max_trials or (seconds is not None and clock() >= seconds)

    def pack(i: int, on: Fleet, cluster: str) -> Placement | None:
        result.trials += 1
        one = replace(on, clusters=tuple(c for c in on.clusters if c.name == cluster))
        decision = solve(
            [items[i].workload], one, policies=policies, solver="first-fit", grow=False
        )
        return decision.placements[0] if decision.placements else None

    def without(cluster: str, skip: int) -> Fleet:
        """``result.fleet`` with ``cluster`` charged again from ``base`` with what was started
        there but ``skip``, in the order charged: charging picks a whole-GPU pod's device
        when the one it planned is taken (:func:`placer.solver.charging.whole_devices`), so
        giving back a placement's planned devices could free devices another one holds."""
        own = replace(base, clusters=tuple(c for c in base.clusters if c.name == cluster))
        held = [p for i, p in result.started.items() if p.cluster == cluster and i != skip]
        rebuilt = charge(own, held).clusters[0]
        return replace(
            result.fleet,
            clusters=tuple(rebuilt if c.name == cluster else c for c in result.fleet.clusters),
        )

    def start(i: int, placement: Placement) -> None:
        result.in_quota.discard(i)
        if usage.quota_problem(items[i].queue, placement.requests) is None:
            result.in_quota.add(i)
        usage.add(items[i].queue, placement.requests, placement.cluster)
        result.fleet = charge(result.fleet, [placement])
        room.update(result.fleet, placement.cluster)
        result.started[i] = placement
        line = lanes.setdefault(lane(i), [])
        line.append(i)
        line.sort(key=lambda k: items[k].key, reverse=True)

    while waiting and not out_of_time():
        key, w = heapq.heappop(waiting)
        workload = items[w].workload
        need = workload.total_requests()
        if w in taken_back:  # first anywhere in what is free
            placed = None
            for cluster in result.fleet.clusters:
                if out_of_time():
                    break
                if not cluster.reachable or not _may_fit(
                    w, workload, need, room, cluster.name, None
                ):
                    continue
                if not admitted(w, cluster.name, need, quota=False):
                    continue
                placed = pack(w, result.fleet, cluster.name)
                if placed is not None:
                    break
            if placed is not None:
                start(w, placed)
                continue
        later: list[int] = []
        most: dict[str, dict[str, int]] = {}  # per cluster, the most one of them releases
        for s in lanes.get(lane(w), ()):
            if items[s].key <= key:
                break  # the rest of the lane started before w
            later.append(s)
            top = most.setdefault(result.started[s].cluster, {})
            for name, amount in result.started[s].requests.items():
                top[name] = max(top.get(name, 0), amount)
        hopeful = {c for c, top in most.items() if _within(need, room.totals(c), top)}
        for s in later:
            held = result.started[s]
            if held.cluster not in hopeful:
                continue
            if out_of_time():
                break
            if not _may_fit(w, workload, need, room, held.cluster, held):
                continue
            usage.remove(items[s].queue, held.requests, held.cluster)
            if not admitted(w, held.cluster, need, quota=s in result.in_quota):
                usage.add(items[s].queue, held.requests, held.cluster)
                continue
            freed = without(held.cluster, s)
            placed = pack(w, freed, held.cluster)
            if placed is None:
                usage.add(items[s].queue, held.requests, held.cluster)
                continue
            del result.started[s]
            lanes[lane(s)].remove(s)
            result.in_quota.discard(s)
            result.fleet = freed
            room.update(freed, held.cluster)
            start(w, placed)
            result.displaced[s] = w
            taken_back.add(s)
            heapq.heappush(waiting, (items[s].key, s))
            break
    return result
