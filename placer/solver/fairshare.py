"""Fair share: one placement decision that honours queues, quotas, limits and priorities.

``solve_fair`` wraps :func:`placer.solver.solve` (CP-SAT or any baseline, batch or online):
it decides which workloads each call of the solver may place, in tiers, and the solver then
places the best packing of each tier on what the tiers before it left.

Model
=====
Symbols
-------
* Workloads ``w`` with queue ``q(w)`` and its chain ``A(q)`` (the queue and its ancestors),
  priority ``p_w`` (:func:`placer.queues.membership`), total requests ``d_w ∈ ℕ^K`` and the
  queue-order key ``k_w = (−p_w, t_w, i_w, name_w)`` (:mod:`placer.queues.order`: creation
  or arrival time ``t_w``, input position ``i_w``); a group's key is its earliest member's.
* Per queue ``q`` and resource ``r`` it lists: quota ``Q_{q,r}``, limit ``L_{q,r}`` (∞ when
  none), over-quota weight ``ω_{q,r} ≥ 0`` and per-cluster caps ``L_{q,r,c}``.
* Usage ``U_{q,r}`` (running work plus what this decision placed so far, children included)
  and per cluster ``U_{q,r,c}``; fleet capacity ``C_r`` (allocatable on usable nodes).

Constraints (hard)
------------------
For every queue ``q`` and ancestor, resource ``r`` and cluster ``c`` after the decision:
``U_{q,r} ≤ L_{q,r}`` and ``U_{q,r,c} ≤ L_{q,r,c}``. A workload that would pass a limit is
never offered to the solver (its reason names the queue and the word ``limit``); cluster caps
exclude the clusters where the workload alone would pass them, and a tier's placements that
together pass one are taken back (the later ones in the queue order) and offered again in the
next round.

Objective, lexicographic
------------------------
1. **Priorities**, strictly: levels from the highest, each decided on what the levels above
   left, so a higher priority is never displaced by a lower one (never inverted). A
   decision taken in several steps (the stream replay: a call over new arrivals, evictions,
   a call over what they freed) is closed by :func:`placer.solver.priority_repair.
   repair_priorities`: a gang it started gives its room to a waiting gang of a higher
   priority that fits there (a reclaim victim of a later step, work not offered to an earlier
   one), within the queues' limits.
2. **In quota before over quota**, within a level: ``w`` is *in quota* when
   ``U_{q,r} + d_{w,r} ≤ Q_{q,r}`` for every ``q ∈ A(q(w))`` and listed ``r``. In-quota
   candidates are offered first, the queue with the least *deserved share*
   ``max_r U_{q,r} / Q_{q,r}`` first.
3. **Over-quota capacity divided by weight**: over-quota candidates are offered by weighted
   dominant-resource progressive filling — repeatedly the queue with the least

       s_q = max_r  max(0, U_{q,r} − Q_{q,r}) / (ω_{q,r} · C_r)

   offers its next workload (smallest ``k_w``), counted at once in ``U``. With demand to spare in
   every queue this equalises ``s_q``, so over-quota use of the dominant resource is in
   proportion to the weights: KAI Scheduler's and Run:ai's division of what remains after the
   deserved quotas, by ``overQuotaWeight``, capped by what each queue asks. A queue with
   ``ω_{q,r} = 0`` never goes over its quota of ``r``.
3'. **The queue's order** (first in, first out among equals; Kueue's and KAI's order:
   priority, then creation time): every tier and round offers each queue's workloads by
   ``k_w``, the solver gets them in that order, and after the last tier
   :func:`placer.solver.order_repair.repair_order` closes the decision on it — no started
   ``s`` with ``q(s) = q(w)``, ``p_s = p_w`` and ``k_s > k_w`` holds room where a waiting ``w``
   packs once ``s`` is taken back (``w`` starts there instead), within the limits and without
   taking an in-quota ``s``'s room over quota: terms 1-3 rank above it. BestEffortFIFO: a
   ``w`` that fits nowhere does not hold later ones back (docs/queues.md). The repair has
   ``ORDER_SHARE`` of the time limit and at most ``MAX_TRIALS`` packings; on large decisions
   it may stop before every pair is checked.
4. **Packing quality**: each tier's offered set is one call of the chosen solver, which
   maximises placed value, then preference (:mod:`placer.solver`).
5. **More replicas of elastic components**, after the last tier: every placed elastic
   workload grows as far as the capacity left and its queues' limits allow
   (:func:`placer.solver.elastic.grow_placements`; the tiers decide at the minimum).

Rounds: in each tier the offer is bounded by the fleet's free totals (the admitted demand fits
them per resource), so the solver's value maximisation cannot reorder the fair order; up to
``BOUNDED_ROUNDS`` rounds follow each other while they place something. Then one last round
offers every candidate of the tier not offered yet, so capacity that the fair rounds could not
use (fragmentation, indivisible gangs) is not left idle (work conservation). A workload the
solver refused in a tier is not offered again in that tier: the solver already decided it
jointly with the others, on more capacity.

Time: ``time_limit`` (CPU seconds, as :func:`placer.solver.solve`) is shared by the calls,
each getting what is left divided by the calls still expected (at least ``MIN_CALL_SECONDS``).

Pure: reads its arguments, returns new objects.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from placer.model import (
    GPU_SHARE,
    Decision,
    DecisionSummary,
    Fleet,
    Placement,
    PodDemand,
    Unplaced,
    Workload,
    WorkloadRef,
)
from placer.policy import PlacementPolicy
from placer.quantity import GPU
from placer.queues import Membership, OrderKey, QueueSet, Usage, membership, order_key
from placer.solver.charging import charge
from placer.solver.decide import solve
from placer.solver.elastic import grow_placements
from placer.solver.order_repair import Item, repair_order
from placer.solver.state import node_devices

__all__ = ["IN_QUOTA", "OVER_QUOTA", "FairDecision", "Running", "solve_fair"]

IN_QUOTA = "in-quota"
OVER_QUOTA = "over-quota"
#: bounded (fair-order) rounds per tier before the last, unbounded one.
BOUNDED_ROUNDS = 3
#: the least time one solver call gets.
MIN_CALL_SECONDS = 0.02
#: the share of the time limit kept for the queue order's repair (term 3').
ORDER_SHARE = 0.05


@dataclass(frozen=True)
class Running:
    """A workload already placed (it counts toward its queues)."""

    workload: Workload
    cluster: str
    #: what it holds, when not ``workload.total_requests()`` (an elastic workload grown above
    #: its minimum: its placement's requests).
    requests: Mapping[str, int] | None = None


@dataclass(frozen=True)
class FairDecision:
    """The decision, and how the queues saw each workload."""

    decision: Decision
    #: per input workload (input order).
    memberships: tuple[Membership, ...]
    #: placed workloads: the tier they were placed in (``IN_QUOTA`` or ``OVER_QUOTA``).
    tiers: Mapping[WorkloadRef, str] = field(default_factory=dict)
    #: the queues' usage after the decision (running work included).
    usage: Usage | None = None


@dataclass
class _Unit:
    """Workloads placed together (one, or a ``placer.dev/group``), with their queue demand."""

    members: tuple[int, ...]
    priority: int
    #: queue (``None``: in no queue) -> total requests of the members in it.
    demand: dict[str | None, dict[str, int]]
    refusal: str | None
    #: the queue that offers the unit in the fair order (its first member's).
    queue: str | None
    #: its place in the queue's order (:mod:`placer.queues.order`): its priority and its
    #: earliest member's key.
    order: OrderKey

    def total(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for requests in self.demand.values():
            for name, amount in requests.items():
                out[name] = out.get(name, 0) + amount
        return out


def fleet_capacity(fleet: Fleet) -> dict[str, int]:
    """``C_r``: allocatable of the usable nodes of the reachable clusters."""
    total: dict[str, int] = {}
    for cluster in fleet.clusters:
        if not cluster.reachable:
            continue
        for node in cluster.nodes:
            if node.usable:
                for name, amount in node.allocatable.items():
                    total[name] = total.get(name, 0) + amount
    return total


def _with_devices(fleet: Fleet) -> Fleet:
    """The fleet with every GPU node's devices spelled out (:func:`node_devices`), so that
    charging one tier's placements marks the very devices they took and the next tier's pods
    get other ones: the merged decision never names one device twice."""
    clusters = []
    for cluster in fleet.clusters:
        nodes = tuple(
            replace(node, gpu_devices=node_devices(node))
            if node.gpu_devices is None and node.allocatable.get(GPU, 0) > 0
            else node
            for node in cluster.nodes
        )
        clusters.append(replace(cluster, nodes=nodes))
    return replace(fleet, clusters=tuple(clusters))


def _free_totals(fleet: Fleet) -> dict[str, int]:
    total: dict[str, int] = {}
    for cluster in fleet.clusters:
        if cluster.reachable:
            for name, amount in cluster.free().items():
                total[name] = total.get(name, 0) + amount
    return total


def solve_fair(
    workloads: Sequence[Workload],
    fleet: Fleet,
    queues: QueueSet,
    *,
    running: Sequence[Running] = (),
    policies: Sequence[PlacementPolicy] = (),
    solver: str = "cpsat",
    mode: str = "batch",
    time_limit: float = 1.0,
    seed: int = 0,
    pod_mix: Sequence[tuple[PodDemand, float]] = (),
    created: Sequence[float | None] | None = None,
) -> FairDecision:
    """Decide where each workload goes under ``queues`` (see the module docstring).

    ``running``: work already placed, booked to its queues before the decision. ``created``:
    per workload, its creation (arrival) time for the queue order when not its own
    ``created`` (a simulated stream's arrivals). The other arguments are
    :func:`placer.solver.solve`'s.
    """
    started = time.perf_counter()
    cpu_started = time.process_time()
    if not time_limit > 0:
        raise ValueError(f"the time limit must be positive, got {time_limit!r}")
    members = tuple(membership(w, queues) for w in workloads)
    if created is not None and len(created) != len(workloads):
        raise ValueError(f"{len(created)} creation times for {len(workloads)} workloads")
    keys = [
        order_key(w, members[i].priority, i, created[i] if created is not None else None)
        for i, w in enumerate(workloads)
    ]
    usage = Usage(queues)
    for item in running:
        usage.add(
            membership(item.workload, queues).queue,
            item.requests if item.requests is not None else item.workload.total_requests(),
            item.cluster,
        )
    units = _units(workloads, members, keys)
    capacity = fleet_capacity(fleet)
    base = _with_devices(fleet)
    state = _State(fleet=base, usage=usage)
    reasons: dict[int, dict[str, str]] = {}
    names = fleet.names
    for index, unit in enumerate(units):
        if unit.refusal is not None:
            reasons[index] = dict.fromkeys(names or ("(fleet)",), unit.refusal)
    levels = sorted({u.priority for u in units if u.refusal is None}, reverse=True)
    expected = [4 * len(levels)]
    statuses: list[str] = []

    def call(chosen: list[int], tier: str) -> None:
        """One solver call over the units ``chosen``; books what it placed."""
        batch = [i for u in chosen for i in units[u].members]
        spent = time.process_time() - cpu_started
        left = time_limit * (1 - ORDER_SHARE) - spent
        share = max(MIN_CALL_SECONDS, left / max(1, expected[0]))
        expected[0] = max(1, expected[0] - 1)
        exclusions: dict[int, dict[str, str]] = {}
        for position, i in enumerate(batch):
            queue = members[i].queue
            demand = workloads[i].total_requests()
            barred = {
                c: text
                for c in names
                if (text := state.usage.cluster_problem(queue, demand, c)) is not None
            }
            if barred:
                exclusions[position] = barred
        decision = solve(
            [workloads[i] for i in batch],
            state.fleet,
            policies=policies,
            solver=solver,
            mode=mode,
            time_limit=share,
            seed=seed,
            pod_mix=pod_mix,
            exclusions=exclusions,
            grow=False,  # elastic components grow after the last tier (below)
        )
        statuses.append(decision.summary.status)
        by_ref = {p.workload: p for p in decision.placements}
        kept: list[Placement] = []
        for u in chosen:
            unit = units[u]
            found = [by_ref.get(workloads[i].ref) for i in unit.members]
            if not all(found):
                continue
            cluster = found[0].cluster if found[0] else ""
            if any(
                state.usage.cluster_problem(q, d, cluster) is not None
                for q, d in unit.demand.items()
            ):
                continue  # together with this tier's others it would pass a cluster limit
            for i, placement in zip(unit.members, found, strict=True):
                assert placement is not None
                kept.append(placement)
                state.placed[i] = placement
                state.tiers[workloads[i].ref] = tier
                state.usage.add(members[i].queue, workloads[i].total_requests(), cluster)
            state.done.add(u)
        state.fleet = charge(state.fleet, kept)
        unplaced = {item.workload: item.reasons for item in decision.unplaced}
        for u in chosen:
            if u in state.done:
                reasons.pop(u, None)
                continue
            state.tried.add(u)
            texts: dict[str, str] = {}
            for i in units[u].members:
                texts.update(unplaced.get(workloads[i].ref, {}))
            if not texts:
                texts = dict.fromkeys(
                    names,
                    "fits alone, but with this decision's others it would pass a "
                    "queue's clusterLimits; offered again in the next round",
                )
                state.tried.discard(u)
            prefix = _tier_text(units[u], state.usage, tier)
            reasons[u] = {c: f"{prefix}: {t}" for c, t in texts.items()}

    for level in levels:
        # each queue's units in its order (term 3' of the model)
        todo = sorted(
            (u for u, unit in enumerate(units) if unit.priority == level and unit.refusal is None),
            key=lambda u: units[u].order,
        )
        for tier in (IN_QUOTA, OVER_QUOTA):
            state.tried = set()
            for round_ in range(BOUNDED_ROUNDS + 1):
                bounded = round_ < BOUNDED_ROUNDS
                eligible = []
                for u in todo:
                    if u in state.done or u in state.tried:
                        continue
                    if tier == OVER_QUOTA and not _over_quota(units[u], state.usage):
                        continue  # in quota: it was offered in quota
                    problem = _admission_problem(units[u], state.usage, tier)
                    if problem is None:
                        eligible.append(u)
                    elif tier == OVER_QUOTA or _is_limit(units[u], state.usage):
                        reasons[u] = dict.fromkeys(names or ("(fleet)",), problem)
                if not eligible:
                    break
                chosen = (
                    _fair_offer(units, eligible, state, tier, capacity) if bounded else eligible
                )
                if not chosen:
                    continue
                before = len(state.done)
                call(chosen, tier)
                if bounded and len(state.done) == before:
                    # nothing placed in the fair order: go to the last round at once
                    continue
    spent = time.process_time() - cpu_started
    order_seconds = max(MIN_CALL_SECONDS, time_limit - spent)
    _keep_order(workloads, units, members, keys, base, state, reasons, policies, order_seconds)
    # term (5) of the model (placer.solver.elastic), after every tier, within the queues' limits
    grown = grow_placements(
        workloads,
        state.placed,
        state.fleet,
        policies=policies,
        admission=_QueueAdmission(state.usage, members),
    )
    state.placed.update(grown)
    decision = _merge(workloads, units, state, reasons, fleet, solver, mode, statuses, started)
    return FairDecision(
        decision=decision, memberships=members, tiers=dict(state.tiers), usage=state.usage
    )


@dataclass
class _QueueAdmission:
    """Extra pods of an elastic workload are admitted within its queues' limits."""

    usage: Usage
    members: Sequence[Membership]

    def allows(self, workload: int, cluster: str, extra: Mapping[str, int]) -> bool:
        queue = self.members[workload].queue
        return (
            self.usage.limit_problem(queue, extra) is None
            and self.usage.cluster_problem(queue, extra, cluster) is None
        )

    def book(self, workload: int, cluster: str, extra: Mapping[str, int]) -> None:
        self.usage.add(self.members[workload].queue, extra, cluster)


@dataclass
class _State:
    fleet: Fleet
    usage: Usage
    placed: dict[int, Placement] = field(default_factory=dict)
    tiers: dict[WorkloadRef, str] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)
    tried: set[int] = field(default_factory=set)


def _keep_order(
    workloads: Sequence[Workload],
    units: Sequence[_Unit],
    members: Sequence[Membership],
    keys: Sequence[OrderKey],
    base: Fleet,
    state: _State,
    reasons: dict[int, dict[str, str]],
    policies: Sequence[PlacementPolicy],
    seconds: float,
) -> None:
    """Term (3') of the model: :func:`placer.solver.order_repair.repair_order` over the
    decision's single workloads; ``state`` and ``reasons`` follow what it changed."""
    unit_of = {i: u for u, unit in enumerate(units) for i in unit.members}
    items = [
        Item(
            workload=w,
            queue=members[i].queue,
            priority=units[unit_of[i]].priority,
            key=keys[i],
            movable=len(units[unit_of[i]].members) == 1 and units[unit_of[i]].refusal is None,
        )
        for i, w in enumerate(workloads)
    ]
    repair = repair_order(
        base,
        state.fleet,
        items,
        state.placed,
        {i for i in state.placed if state.tiers.get(workloads[i].ref) == IN_QUOTA},
        state.usage,
        policies=policies,
        seconds=seconds,
    )
    if not repair.displaced:
        return
    state.fleet = repair.fleet
    for i in list(state.placed):
        if i not in repair.started:
            del state.placed[i]
            state.tiers.pop(workloads[i].ref, None)
            state.done.discard(unit_of[i])
            earlier = workloads[repair.displaced[i]].ref.name
            reasons[unit_of[i]] = dict.fromkeys(
                state.fleet.names,
                f"its room went to {earlier}, earlier in queue {members[i].queue or '(none)'} "
                "at the same priority (first in, first out), and it fits nowhere else",
            )
    for i, placement in repair.started.items():
        # new, or taken back and started again elsewhere: its placement is the repair's
        state.placed[i] = placement
        state.done.add(unit_of[i])
        reasons.pop(unit_of[i], None)
        state.tiers[workloads[i].ref] = IN_QUOTA if i in repair.in_quota else OVER_QUOTA


def _units(
    workloads: Sequence[Workload], members: Sequence[Membership], order: Sequence[OrderKey]
) -> list[_Unit]:
    keys: dict[str, list[int]] = {}
    for index, workload in enumerate(workloads):
        key = f"group:{workload.group}" if workload.group else f"workload:{index}"
        keys.setdefault(key, []).append(index)
    units = []
    for indices in keys.values():
        demand: dict[str | None, dict[str, int]] = {}
        for i in indices:
            into = demand.setdefault(members[i].queue, {})
            for name, amount in workloads[i].total_requests().items():
                into[name] = into.get(name, 0) + amount
        refusal = next((members[i].refusal for i in indices if members[i].refusal), None)
        units.append(
            _Unit(
                members=tuple(indices),
                priority=max(members[i].priority for i in indices),
                demand=demand,
                refusal=refusal,
                queue=members[indices[0]].queue,
                order=_unit_order(
                    max(members[i].priority for i in indices), [order[i] for i in indices]
                ),
            )
        )
    return units


def _unit_order(priority: int, keys: Sequence[OrderKey]) -> OrderKey:
    """A unit's key: its priority, then its earliest member's time, position and name."""
    first = min(keys)
    return (-priority, first[1], first[2], first[3])


def _is_limit(unit: _Unit, usage: Usage) -> bool:
    return any(usage.limit_problem(q, d) is not None for q, d in unit.demand.items())


def _over_quota(unit: _Unit, usage: Usage) -> bool:
    return any(usage.quota_problem(q, d) is not None for q, d in unit.demand.items())


def _admission_problem(unit: _Unit, usage: Usage, tier: str) -> str | None:
    """Why ``unit`` may not be offered in ``tier`` now (None: it may)."""
    for queue, demand in unit.demand.items():
        problem = usage.limit_problem(queue, demand)
        if problem is not None:
            return problem
    quota = next(
        (p for q, d in unit.demand.items() if (p := usage.quota_problem(q, d)) is not None),
        None,
    )
    if tier == IN_QUOTA or quota is None:
        return quota
    for queue, demand in unit.demand.items():
        problem = usage.weight_problem(queue, demand)
        if problem is not None:
            return problem
    return None


def _tier_text(unit: _Unit, usage: Usage, tier: str) -> str:
    queue = unit.queue if unit.queue is not None else "(none)"
    if tier == IN_QUOTA:
        return f"in the quota of queue {queue}"
    # the queue over its quota by it: its own, or an ancestor's (a child within its own quota
    # under a parent over the parent's), with the amounts
    over = next(
        (p for q, d in unit.demand.items() if (p := usage.quota_problem(q, d)) is not None),
        None,
    )
    return over or f"over the quota of queue {queue}"


def _fair_offer(
    units: Sequence[_Unit],
    eligible: list[int],
    state: _State,
    tier: str,
    capacity: Mapping[str, int],
) -> list[int]:
    """The units offered in a bounded round: progressive filling in the tier's order (least
    deserved share in quota, least weighted over-quota share over it), while the admitted
    demand fits the fleet's free totals and every queue's limits and (in quota) quotas."""
    room = _free_totals(state.fleet)
    tentative = state.usage.copy()
    waiting: dict[str | None, list[int]] = {}
    for u in eligible:
        waiting.setdefault(units[u].queue, []).append(u)

    def share(queue: str | None) -> float:
        if tier == IN_QUOTA:
            return tentative.deserved_share(queue)
        return tentative.over_share(queue, capacity)

    heap = [(share(q), q or "", q) for q in waiting]
    heapq.heapify(heap)
    chosen: list[int] = []
    while heap:
        _, key, queue = heapq.heappop(heap)
        line = waiting[queue]
        while line:
            u = line.pop(0)
            unit = units[u]
            total = unit.total()
            if any(total.get(n, 0) > room.get(n, 0) for n in total if total.get(n, 0) > 0):
                continue  # not in this round's room: the last round offers it
            if _admission_problem(unit, tentative, tier) is not None:
                continue
            chosen.append(u)
            for n, amount in total.items():
                room[n] = room.get(n, 0) - amount
            for q, demand in unit.demand.items():
                tentative.add(q, demand, "")
            break
        if line:
            heapq.heappush(heap, (share(queue), key, queue))
    return sorted(chosen, key=lambda u: units[u].order)


def _gpu_milli(requests: Mapping[str, int]) -> int:
    return requests.get(GPU, 0) * 1000 + requests.get(GPU_SHARE, 0)


def _merge(
    workloads: Sequence[Workload],
    units: Sequence[_Unit],
    state: _State,
    reasons: dict[int, dict[str, str]],
    fleet: Fleet,
    solver: str,
    mode: str,
    statuses: list[str],
    started: float,
) -> Decision:
    placements = tuple(state.placed[i] for i in sorted(state.placed))
    unplaced = []
    for u, unit in enumerate(units):
        if u in state.done:
            continue
        texts = reasons.get(u) or dict.fromkeys(fleet.names, "not offered to the solver")
        for i in unit.members:
            unplaced.append((i, Unplaced(workload=workloads[i].ref, reasons=dict(texts))))
    demand: dict[str, int] = {}
    placed_requests: dict[str, int] = {}
    for i, workload in enumerate(workloads):
        for name, amount in workload.largest_requests().items():
            demand[name] = demand.get(name, 0) + amount
        if i in state.placed:
            for name, amount in state.placed[i].requests.items():
                placed_requests[name] = placed_requests.get(name, 0) + amount
    if not statuses:
        status = "trivial"
    elif all(s in ("optimal", "trivial") for s in statuses):
        status = "optimal"
    elif any(s in ("optimal", "feasible") for s in statuses):
        status = "feasible"
    else:
        status = "fallback"
    free_milli = sum(_gpu_milli(c.free()) for c in fleet.clusters if c.reachable)
    bound_gpu = min(free_milli, _gpu_milli(demand)) / 1000.0
    summary = DecisionSummary(
        solver=solver,
        mode=mode,
        status=status,
        seconds=round(time.perf_counter() - started, 4),
        workloads=len(workloads),
        placed=len(placements),
        demand=demand,
        placed_requests=placed_requests,
        bound={"capacity_gpu": bound_gpu, "tightest_gpu": bound_gpu},
    )
    return Decision(
        placements=placements,
        unplaced=tuple(item for _, item in sorted(unplaced, key=lambda pair: pair[0])),
        summary=summary,
    )
