"""The simulation loop: one solver, one mode, timed workloads on a fleet snapshot.

Three modes, all built on :func:`placer.solver.solve` and nothing else, so a simulated decision
is exactly the decision ``placer plan`` or the controller would take on the same input:

``batch``
    one joint decision over every workload (arrival times ignored).
``online``
    one solver call in ``online`` mode: the workloads are decided one at a time in arrival
    order, each on what the ones before it left (FGD's replay protocol when nothing departs).
``stream``
    a discrete-event replay. Workloads arrive at ``arrival_s``; a placed workload holds its
    pods until ``start + duration_s`` and then :func:`placer.solver.release` gives them back.
    At every *decision epoch* — each distinct event time, or the end of every ``interval``
    seconds when one is set (a controller's resync period) — departures are processed first,
    then arrivals join the pending queue, then one ``batch`` decision is taken over the
    candidates and :func:`placer.solver.charge` binds what it placed. Candidates are the whole
    queue when capacity was freed since the last decision, and only the new arrivals
    otherwise: a queued workload did not fit at the end of the last decision and capacity has
    only shrunk since, so asking again cannot change the answer (this keeps long queues cheap).
    A queued workload whose demand exceeds every cluster's free totals (a necessary condition,
    never a heuristic) also skips the solver, with that as its reason: "can never fit" when
    it exceeds them even on the fleet the stream started from (the snapshot's own pods never
    leave, so no cluster will ever have more free), "waiting in the queue" otherwise.

With ``Settings.reservations`` (stream only) a gang that waited long enough gets a reservation
and the rest backfills around it (:mod:`placer.solver.reservations`, bookkeeping in
:mod:`placer.simulate.reserving`): gangs holding one are decided first at every epoch, in a
solver call of their own; the others' decision sees the reserved nodes tainted, tolerated
only by work expected to end before the reservation's start; a gang whose reservation starts
now is decided again in the same epoch; and a reservation ending without its gang placed
makes the next epoch retry the whole queue (room came back). With
``ReservationPolicy.preempt_after_s`` a reserved gang that waited that long is forced in by
eviction (:mod:`placer.solver.reservation_preemption`): the stream also decides at each such
deadline, forces due reservations before deciding the queue (one at a time, the other
reservations planned again after each), and the victims go back to the queue, their run lost.

Every decision is checked by the independent verifier (:func:`placer.solver.verify`) against
the fleet it was taken on; problems are recorded, never hidden. Everything is deterministic for
a seed: events are ordered by time then input position, the solver is deterministic, and no
clock influences a decision (wall time is only measured).

Pure: no I/O. Long runs report progress through an optional callback.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from placer.model import Decision, Fleet, Placement, Workload
from placer.policy import PlacementPolicy
from placer.queues import QueueSet, Usage, membership
from placer.simulate import MODES
from placer.simulate.capacity import FreeTotals, free_totals, gpu_milli, shortfall, used_gpu_milli
from placer.simulate.reserving import ReservationRecord, Reserver, runtime_estimates
from placer.solver import charge, release, solve, verify
from placer.solver.fairshare import Running, fleet_capacity, solve_fair
from placer.solver.preempt import Eviction, Victim, find_victims
from placer.solver.priority_repair import repair_priorities
from placer.solver.rebalance import RebalancePolicy, rebalance_move
from placer.solver.reservation_preemption import force
from placer.solver.reservations import ReservationPolicy

__all__ = [
    "MODES",
    "DecisionRecord",
    "Observer",
    "Outcome",
    "PreemptionRecord",
    "Progress",
    "Run",
    "Sample",
    "Settings",
    "Timed",
    "gpu_bound",
    "simulate",
]


class Timed(Protocol):
    """A workload with its arrival time and run time (``simulations.TimedWorkload`` is one)."""

    @property
    def workload(self) -> Workload: ...

    @property
    def arrival_s(self) -> float: ...

    @property
    def duration_s(self) -> float | None: ...


#: progress callback: ``(solver, done, total, detail)``; ``done``/``total`` count workloads
#: that arrived (stream) or decisions (batch, online).
Progress = Callable[[str, int, int, str], None]

#: stream observer, called at every decision epoch before the decision (departures and
#: arrivals done): ``(time, fleet, running, queue)`` with the fleet as the decision sees it,
#: the running workloads (input index -> placement) and the queue (input indices, arrival
#: order). For measurements that need the decision's input (an oracle on the same state);
#: it must not change what it is given.
Observer = Callable[[float, Fleet, Mapping[int, Placement], Sequence[int]], None]


@dataclass(frozen=True)
class Settings:
    """How to simulate: solver, mode and the solver's knobs."""

    solver: str = "cpsat"
    mode: str = "batch"
    policies: tuple[PlacementPolicy, ...] = ()
    #: seconds per decision (the solver's time limit).
    time_limit: float = 1.0
    seed: int = 0
    #: stream: length of a decision epoch in seconds (0: decide at every distinct event time).
    interval: float = 0.0
    #: queues the decisions honour (:mod:`placer.solver.fairshare`); ``None``: no queues.
    queues: QueueSet | None = None
    #: stream with queues: evict running work for pending work the rules allow
    #: (:mod:`placer.solver.preempt`); an evicted workload goes back to the queue and starts
    #: over when placed again.
    preemption: bool = False
    #: stream: reservations with backfill for gangs that waited too long
    #: (:mod:`placer.solver.reservations`); ``None``: none.
    reservations: ReservationPolicy | None = None
    #: stream with reservations: a workload without an expected-runtime annotation is
    #: expected to run its recorded run time (``duration_s``) ...
    trace_estimates: bool = True
    #: ... times a factor drawn uniformly from [1 - noise, 1 + noise] (0: exact).
    runtime_noise: float = 0.0
    #: with preemption: over-quota work may also reclaim towards the weighted fair share
    #: (:data:`placer.solver.preempt.FAIR_SHARE`; at most one such eviction per queue and
    #: decision: its waiting work is tried in order until one finds victims).
    fair_share_reclaim: bool = False
    #: with preemption: fair-share rebalancing (:mod:`placer.solver.rebalance`) after the
    #: reclaims of each decision — over-share queues' over-quota work evicted for
    #: under-share queues' waiting gangs while the split is off the weights by more than the
    #: policy's tolerance; ``None``: none.
    rebalance: RebalancePolicy | None = None
    #: stream with queues: close every decision in priority order
    #: (:mod:`placer.solver.priority_repair`). Off only to measure what the repair costs
    #: (``simulations/bench_repair.py``): priorities may then be inverted.
    priority_repair: bool = True


@dataclass(frozen=True)
class Outcome:
    """What happened to one workload (input order)."""

    cluster: str | None
    #: cluster -> why not, when the workload was never placed (from its last decision).
    reasons: Mapping[str, str] = field(default_factory=dict)
    #: stream: when it was placed and when it left (``None``: never / never departs).
    start_s: float | None = None
    end_s: float | None = None
    #: where every pod went (``None`` when not placed).
    placement: Placement | None = None


@dataclass(frozen=True)
class DecisionRecord:
    """One solver call."""

    time_s: float
    #: wall time of the solver call (model, search, bounds and explanations).
    seconds: float
    workloads: int
    placed: int
    status: str
    placed_gpu_milli: int
    #: the tightest GPU bound the decision proved, in thousandths (see ``gpu_bound``).
    bound_gpu_milli: int
    #: the verifier's findings; empty when the decision is valid.
    problems: tuple[str, ...] = ()
    #: the bounds as the solver reported them (``summary.bound``).
    solver_bounds: Mapping[str, float] = field(default_factory=dict)
    #: CPU time of this process during the call (all threads; CP-SAT uses two), a check on
    #: wall times measured on a shared, overloaded machine.
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class PreemptionRecord:
    """One eviction of the stream: the preemptor, its victims and what they lost."""

    time_s: float
    preemptor: int
    cluster: str
    #: (victim input index, ``reclaim`` or ``preempt``).
    victims: tuple[tuple[int, str], ...]
    #: when each victim had started the run it lost (same order).
    started: tuple[float, ...]
    gpu_milli: int
    #: GPU-seconds of work the victims had done and lose (they start over).
    lost_gpu_seconds: float


@dataclass(frozen=True)
class Sample:
    """The fleet after a stream decision epoch."""

    time_s: float
    allocated_gpu_milli: int
    running: int
    queued: int
    queued_gpu_milli: int


@dataclass(frozen=True)
class Run:
    """A finished simulation of one solver."""

    settings: Settings
    #: per input workload, in input order.
    outcomes: tuple[Outcome, ...]
    decisions: tuple[DecisionRecord, ...]
    #: stream only: the fleet after every epoch.
    timeline: tuple[Sample, ...]
    before: Fleet
    after: Fleet
    #: the fleet at its most loaded point of interest (batch/online: ``after``; stream: right
    #: after the last arrival was decided) and the workloads pending then, for fragmentation.
    loaded: Fleet
    pending: tuple[int, ...]
    wall_s: float
    #: stream with preemption: every eviction, in order.
    preemptions: tuple[PreemptionRecord, ...] = ()
    #: stream with reservations: every reservation, in the order they were made.
    reservations: tuple[ReservationRecord, ...] = ()
    #: stream with queues: the priority repair's calls (one per placement step that started
    #: something while work waited), the CPU time of this process they took, the waiting
    #: workloads they started and the started ones they took back.
    repair_calls: int = 0
    repair_cpu_seconds: float = 0.0
    repair_started: int = 0
    repair_unstarted: int = 0


def simulate(
    items: Sequence[Timed],
    fleet: Fleet,
    settings: Settings,
    *,
    progress: Progress | None = None,
    observe: Observer | None = None,
) -> Run:
    """Simulate ``items`` on ``fleet`` (see the module docstring). ``observe`` (stream only)
    sees every decision's input (:data:`Observer`).

    Raises:
        ValueError: an unknown mode (the solver rejects unknown solvers and time limits).
    """
    if settings.mode not in MODES:
        raise ValueError(f"unknown mode {settings.mode!r}; choose one of {', '.join(MODES)}")
    started = time.perf_counter()
    if settings.reservations is not None and (settings.mode != "stream" or settings.preemption):
        raise ValueError("reservations need --mode stream, and do not go with preemption yet")
    if settings.mode == "stream":
        return _Stream(items, fleet, settings, progress, started, observe).run()
    workloads = [item.workload for item in items]
    if progress:
        progress(settings.solver, 0, 1, f"deciding {len(workloads)} workloads")
    decision, record = _decide(workloads, fleet, settings, settings.mode, 0.0)
    after = charge(fleet, decision.placements)
    outcomes = _outcomes(workloads, decision)
    pending = tuple(i for i, o in enumerate(outcomes) if o.cluster is None)
    if progress:
        progress(settings.solver, 1, 1, f"{record.placed} placed in {record.seconds:.2f} s")
    return Run(
        settings=settings,
        outcomes=outcomes,
        decisions=(record,),
        timeline=(),
        before=fleet,
        after=after,
        loaded=after,
        pending=pending,
        wall_s=time.perf_counter() - started,
    )


def gpu_bound(decision: Decision, demand_milli: int, free_milli: int) -> int:
    """The tightest GPU upper bound of a decision, in thousandths of a GPU.

    The smallest of the solver's bounds (cluster LP B2, node-aware LP B3, node-class LP and
    its own ``tightest_gpu``, all counting shared GPUs by their thousandths) and the trivial
    bound B0 = min(demand, free capacity), computed here as well so that a solver reporting
    fewer bounds is still held to B0.
    """
    bounds = [demand_milli, free_milli]
    for key in ("cluster_lp_gpu", "node_lp_gpu", "class_lp_gpu", "tightest_gpu"):
        value = decision.summary.bound.get(key)
        if value is not None:
            bounds.append(math.ceil(round(value * 1000, 3)))
    return max(0, min(bounds))


def _decide(
    workloads: Sequence[Workload],
    fleet: Fleet,
    settings: Settings,
    mode: str,
    at: float,
    running: Sequence[Running] = (),
    created: Sequence[float] | None = None,
) -> tuple[Decision, DecisionRecord]:
    started = time.perf_counter()
    cpu_started = time.process_time()
    if settings.queues is not None:
        decision = solve_fair(
            workloads,
            fleet,
            settings.queues,
            running=running,
            policies=settings.policies,
            solver=settings.solver,
            mode=mode,
            time_limit=settings.time_limit,
            seed=settings.seed,
            created=created,
        ).decision
    else:
        decision = solve(
            workloads,
            fleet,
            policies=settings.policies,
            solver=settings.solver,
            mode=mode,
            time_limit=settings.time_limit,
            seed=settings.seed,
        )
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    problems = verify(decision, workloads, fleet, policies=settings.policies)
    placed_milli = sum(gpu_milli(p.requests) for p in decision.placements)
    demand = sum(gpu_milli(w.largest_requests()) for w in workloads)  # elastic: at its most
    free = sum(t.gpu_milli for t in free_totals(fleet).values())
    record = DecisionRecord(
        time_s=at,
        seconds=seconds,
        workloads=len(workloads),
        placed=len(decision.placements),
        status=decision.summary.status,
        placed_gpu_milli=placed_milli,
        bound_gpu_milli=gpu_bound(decision, demand, free),
        problems=tuple(problems),
        solver_bounds=dict(decision.summary.bound),
        cpu_seconds=cpu_seconds,
    )
    return decision, record


def _outcomes(workloads: Sequence[Workload], decision: Decision) -> tuple[Outcome, ...]:
    index = _positions(workloads)
    outcomes: list[Outcome] = [Outcome(cluster=None) for _ in workloads]
    for placement in decision.placements:
        outcomes[index[placement.workload]] = Outcome(
            cluster=placement.cluster, placement=placement
        )
    for unplaced in decision.unplaced:
        outcomes[index[unplaced.workload]] = Outcome(cluster=None, reasons=unplaced.reasons)
    return tuple(outcomes)


def _positions(workloads: Sequence[Workload]) -> dict[object, int]:
    positions: dict[object, int] = {}
    for i, workload in enumerate(workloads):
        positions.setdefault(workload.ref, i)
    return positions


# --------------------------------------------------------------------------------------------
# stream


class _Stream:
    """The discrete-event replay of ``stream`` mode (see the module docstring)."""

    def __init__(
        self,
        items: Sequence[Timed],
        fleet: Fleet,
        settings: Settings,
        progress: Progress | None,
        started: float,
        observe: Observer | None = None,
    ) -> None:
        self.observe = observe
        self.items = items
        self.workloads = [item.workload for item in items]
        self.demand = [gpu_milli(w.total_requests()) for w in self.workloads]
        self.settings = settings
        self.progress = progress
        self.started = started
        self.before = fleet
        self.fleet = fleet
        self.order = sorted(range(len(items)), key=lambda i: (items[i].arrival_s, i))
        self.next = 0  # position in ``order`` of the next arrival
        self.queue: list[int] = []  # pending workloads, arrival order
        self.fresh: list[int] = []  # arrived since the last decision
        self.freed = False  # capacity given back since the last decision
        self.departures: list[tuple[float, int]] = []  # heap of (end time, workload)
        self.placements: dict[int, Placement] = {}  # running now
        self.placed: dict[int, Placement] = {}  # ever placed
        self.start: dict[int, float] = {}
        self.end: dict[int, float] = {}
        self.reasons: dict[int, Mapping[str, str]] = {}
        self.records: list[DecisionRecord] = []
        self.timeline: list[Sample] = []
        self.allocated = used_gpu_milli(fleet)
        self.loaded: Fleet | None = None
        #: reasons for the clusters the free totals do not cover (unreachable, drained, empty)
        self.elsewhere = {
            c.name: f"cluster unreachable: {c.reason or 'no answer'}"
            if not c.reachable
            else "the cluster has no nodes"
            for c in fleet.clusters
            if not c.reachable or not c.nodes
        }
        self.loaded_pending: tuple[int, ...] = ()
        #: the most each cluster will ever have free: the stream's workloads all gone.
        self.emptiest = free_totals(fleet)
        self.preemptions: list[PreemptionRecord] = []
        self.repair_calls = 0
        self.repair_cpu_seconds = 0.0
        self.repair_started = 0
        self.repair_unstarted = 0
        self.reserver: Reserver | None = None
        if settings.reservations is not None:
            runtimes = runtime_estimates(
                self.workloads,
                [item.duration_s for item in items],
                trace=settings.trace_estimates,
                noise=settings.runtime_noise,
                seed=settings.seed,
            )
            arrivals = [item.arrival_s for item in items]
            self.reserver = Reserver(
                self.workloads,
                arrivals,
                runtimes,
                settings.reservations,
                settings.policies,
                settings.seed,
            )

    def run(self) -> Run:
        total = len(self.items)
        while self.next < total or self.departures:
            now = self._next_epoch()
            self._depart(now)
            self._arrive(now)
            self._decide(now)
            self.timeline.append(
                Sample(
                    time_s=now,
                    allocated_gpu_milli=self.allocated,
                    running=len(self.placements),
                    queued=len(self.queue),
                    queued_gpu_milli=sum(self.demand[i] for i in self.queue),
                )
            )
            if self.next == total and self.loaded is None:
                self.loaded = self.fleet
                self.loaded_pending = tuple(sorted(self.queue))
            if self.progress:
                self.progress(
                    self.settings.solver,
                    self.next,
                    total,
                    f"t={now:.0f}s running {len(self.placements)} queued {len(self.queue)}",
                )
        outcomes = tuple(
            Outcome(
                cluster=self.placed[i].cluster if i in self.placed else None,
                reasons={} if i in self.placed else self.reasons.get(i, {}),
                start_s=self.start.get(i),
                end_s=self.end.get(i),
                placement=self.placed.get(i),
            )
            for i in range(total)
        )
        return Run(
            settings=self.settings,
            outcomes=outcomes,
            decisions=tuple(self.records),
            timeline=tuple(self.timeline),
            before=self.before,
            after=self.fleet,
            loaded=self.loaded if self.loaded is not None else self.fleet,
            pending=self.loaded_pending,
            wall_s=time.perf_counter() - self.started,
            preemptions=tuple(self.preemptions),
            reservations=tuple(self.reserver.records) if self.reserver else (),
            repair_calls=self.repair_calls,
            repair_cpu_seconds=self.repair_cpu_seconds,
            repair_started=self.repair_started,
            repair_unstarted=self.repair_unstarted,
        )

    def _next_epoch(self) -> float:
        times = []
        if self.next < len(self.order):
            times.append(self.items[self.order[self.next]].arrival_s)
        if self.departures:
            times.append(self.departures[0][0])
        if self.reserver is not None and self.timeline:
            wakeup = self.reserver.wakeup(self.timeline[-1].time_s)
            if wakeup is not None:
                times.append(wakeup)
        event = min(times)
        interval = self.settings.interval
        if interval > 0:
            return math.ceil(event / interval) * interval
        return event

    def _depart(self, now: float) -> None:
        leaving: list[Placement] = []
        while self.departures and self.departures[0][0] <= now:
            end, index = heapq.heappop(self.departures)
            if index not in self.placements or self.end.get(index) != end:
                continue  # evicted since: this departure is void
            placement = self.placements.pop(index)
            leaving.append(placement)
            self.allocated -= gpu_milli(placement.requests)
        if leaving:
            self.fleet = release(self.fleet, leaving)
            self.freed = True
            if self.reserver is not None:
                self.reserver.freed()

    def _arrive(self, now: float) -> None:
        while self.next < len(self.order):
            index = self.order[self.next]
            if self.items[index].arrival_s > now:
                break
            self.queue.append(index)
            self.fresh.append(index)
            self.next += 1

    def _decide(self, now: float) -> None:
        if self.observe is not None:
            self.observe(now, self.fleet, dict(self.placements), tuple(self.queue))
        if self.reserver is not None:
            self.reserver.review(self.fleet, self.queue, now)
            self.freed = self.reserver.loosened() or self.freed
            self._forcing(now)  # gangs forced in first: the queue is decided around them
        self._place(now)
        if self.reserver is not None:
            self.reserver.expire(now)
            self.reserver.reserve(self.fleet, self.queue, self.placements, self.start, now)
            # room a reservation held came back: the queue is retried at the next epoch
            self.freed = self.reserver.loosened() or self.freed
            if self.reserver.due(now):  # a gang can start now: decided at once, not an epoch late
                self.freed = True
                self._place(now)
                self.freed = self.reserver.loosened() or self.freed
            self._forcing(now)  # reservations just planned may be due already

    def _forcing(self, now: float) -> None:
        """Reservations due for eviction are forced one by one, the others planned again after
        each (they may now start right behind the forced gang)."""
        assert self.reserver is not None
        while self._force(now):
            self.reserver.reserve(self.fleet, self.queue, self.placements, self.start, now)
            if self.reserver.due(now):  # one planned to start now: decided now
                self.freed = True
                self._place(now)

    def _force(self, now: float) -> bool:
        """The first reservation due for eviction that can be forced starts its gang now
        (:mod:`placer.solver.reservation_preemption`), and the other reservations are dropped
        to be planned again on the fleet it left (they may now start right after it instead
        of evicting elsewhere); True when one was forced."""
        reserver = self.reserver
        assert reserver is not None
        for index in reserver.forcing(now):
            if index not in reserver.held or index in self.placements:
                continue
            fleet, workloads = reserver.view(self.fleet, [index], now)
            eviction = force(
                workloads[0],
                fleet,
                self._victims(),
                now,
                policies=self.settings.policies,
                seed=self.settings.seed,
                time_limit=self.settings.time_limit,
            )
            if eviction is None:
                continue
            self._evict(index, eviction, now)
            self.queue = [i for i in self.queue if i != index]
            reserver.placed({index}, now)
            reserver.forced(now)
            return True
        return False

    def _place(self, now: float) -> None:
        self._place_once(now)
        self._repair(now)

    def _place_once(self, now: float) -> None:
        candidates = self.queue if self.freed else self.fresh
        self.fresh = []
        self.freed = False
        preempting = self.settings.preemption and self.settings.queues is not None
        if not candidates:
            if preempting and self.queue:
                self._settle(set(), now)
            return
        totals = free_totals(self.fleet)
        chosen: list[int] = []
        for index in candidates:
            reason = _cannot_fit(self.workloads[index], totals, self.emptiest)
            if reason is None:
                chosen.append(index)
            else:
                merged = {**reason, **self.elsewhere}
                self.reasons[index] = {n: merged[n] for n in self.before.names if n in merged}
        if not chosen:
            if preempting:
                self._settle(set(), now)
            return
        placed: set[int] = set()
        if self.reserver is None:
            placed = self._decide_on(chosen, now)
        else:  # gangs holding a reservation are decided first, on their own
            held = self.reserver.held
            for group in ([i for i in chosen if i in held], [i for i in chosen if i not in held]):
                if group:
                    placed |= self._decide_on(group, now)
        if preempting:
            self._settle(placed, now)
        elif placed:
            self.queue = [i for i in self.queue if i not in placed]

    def _repair(self, now: float) -> None:
        """The decision closed in priority order (:mod:`placer.solver.priority_repair`): a
        gang it started gives its room to a waiting gang of a higher priority that fits there
        (a reclaim victim of a later step, or work not offered to the first step). With queues.

        With reservations the repair keeps their rule, the same the decision follows
        (:func:`placer.solver.reservations.backfill_view`): a waiting gang may start only on
        what its view of the fleet allows — a node reserved for another gang only when it is
        expected to end before that reservation's start — and a gang that started on its own
        reservation in this decision (every pod on its reserved nodes) is never taken back.
        There a reservation outranks priority (:meth:`_reserved_starts`)."""
        queues = self.settings.queues
        if queues is None or not self.settings.priority_repair:
            return
        begun = [i for i in self.placements if self.start.get(i) == now]
        if not begun:
            return
        waiting = [i for i in self.queue if i not in self.placements and self._may_fit(i)]
        if not waiting:
            return
        kept = self._reserved_starts(begun, now)
        movable = [i for i in begun if i not in kept]
        fleet = self.fleet
        waiting_workloads = [self.workloads[i] for i in waiting]
        if self.reserver is not None:
            fleet, waiting_workloads = self.reserver.view(self.fleet, waiting, now)
        cpu = time.process_time()
        repair = repair_priorities(
            fleet,
            [(self.workloads[i], self.placements[i]) for i in movable],
            waiting_workloads,
            queues=queues,
            running=[
                (self.workloads[i], p) for i, p in self.placements.items() if i not in movable
            ],
            policies=self.settings.policies,
        )
        self.repair_calls += 1
        self.repair_cpu_seconds += time.process_time() - cpu
        self.repair_started += len(repair.started)
        self.repair_unstarted += len(repair.unstarted)
        if not repair.started:
            return
        index_of = _positions(self.workloads)
        taken: list[Placement] = []
        for ref in repair.unstarted:
            i = index_of[ref]
            placement = self.placements.pop(i)
            taken.append(placement)
            self.allocated -= gpu_milli(placement.requests)
            self.placed.pop(i, None)
            self.start.pop(i, None)
            self.end.pop(i, None)  # its departure is void
            why = f"its room went to a waiting workload of a higher priority at t={now:g}s"
            self.reasons[i] = {placement.cluster: why}
            if self.reserver is not None:
                self.reserver.taken_back(i, now, why)
            if i not in self.queue:
                self.queue.append(i)
        if self.reserver is None:
            self.fleet = repair.fleet
        else:  # (the repair saw the reservations' view: their taints stay out of the fleet)
            self.fleet = charge(release(self.fleet, taken), repair.started)
        started = {index_of[p.workload] for p in repair.started}
        for placement in repair.started:
            self._start(index_of[placement.workload], placement, now)
        if self.reserver is not None:
            self.reserver.placed(started, now)
        self.queue = [i for i in self.queue if i not in self.placements]

    def _reserved_starts(self, begun: Sequence[int], now: float) -> set[int]:
        """The gangs of ``begun`` that started at ``now`` on their own reservation (every pod
        on its reserved nodes): the repair never takes them back. The reservation held that
        room for its gang, and backfill was only allowed there because it never delays it
        (:mod:`placer.solver.reservations`); a higher-priority gang that arrived meanwhile was
        kept off those nodes by the decision itself (the same rule). Taking the gang back at
        its start would void the reservation and plan it again later, and again whenever
        higher-priority work came: the starvation reservations exist to end. Higher-priority
        work qualifies for a reservation of its own at once with ``ReservationPolicy.priority``,
        and reservations are planned highest priority first."""
        if self.reserver is None:
            return set()
        begun_set = set(begun)
        kept: set[int] = set()
        for record in self.reserver.records:
            i = record.workload
            if record.outcome != "placed" or record.ended_s != now or i not in begun_set:
                continue
            placement = self.placements[i]
            nodes = set(record.nodes)
            if placement.cluster == record.cluster and all(p.node in nodes for p in placement.pods):
                kept.add(i)
        return kept

    def _decide_on(self, chosen: list[int], now: float) -> set[int]:
        """One solver call over the ``chosen`` queued workloads; binds what it placed."""
        workloads = [self.workloads[i] for i in chosen]
        fleet = self.fleet
        if self.reserver is not None:
            fleet, workloads = self.reserver.view(self.fleet, chosen, now)
        running = [
            Running(self.workloads[i], p.cluster, p.requests) for i, p in self.placements.items()
        ]
        # a queue's order: arrival time stands for creation time (placer.queues.order)
        arrivals = [self.items[i].arrival_s for i in chosen]
        decision, record = _decide(workloads, fleet, self.settings, "batch", now, running, arrivals)
        self.records.append(record)
        self.fleet = charge(self.fleet, decision.placements)
        positions = _positions(workloads)
        placed: set[int] = set()
        for placement in decision.placements:
            index = chosen[positions[placement.workload]]
            placed.add(index)
            self._start(index, placement, now)
        for unplaced in decision.unplaced:
            self.reasons[chosen[positions[unplaced.workload]]] = unplaced.reasons
        if self.reserver is not None:
            self.reserver.placed(placed, now)
        return placed

    def _settle(self, placed: set[int], now: float) -> None:
        """With preemption: the queue without ``placed``, then evictions for what still waits
        (every queued workload, not only this epoch's candidates: another queue's work may
        have gone over its quota since)."""
        waiting = [i for i in self.queue if i not in placed]
        started, evicted = self._preempt(waiting, now)
        placed = (placed | started) - evicted
        self.queue = [i for i in self.queue if i not in placed]

    def _start(self, index: int, placement: Placement, now: float) -> None:
        self.placements[index] = placement
        self.placed[index] = placement
        self.start[index] = now
        self.reasons.pop(index, None)
        self.allocated += gpu_milli(placement.requests)
        duration = self.items[index].duration_s
        if duration is not None:
            self.end[index] = now + duration
            heapq.heappush(self.departures, (now + duration, index))

    def _usage(self) -> tuple[Usage, list[Victim]]:
        """The queues' use by the running workloads, and those workloads as victims."""
        queues = self.settings.queues
        assert queues is not None
        usage = Usage(queues)
        for i, placement in self.placements.items():
            usage.add(
                membership(self.workloads[i], queues).queue,
                self.workloads[i].total_requests(),
                placement.cluster,
            )
        return usage, self._victims()

    def _victims(self) -> list[Victim]:
        """The running workloads as candidate victims (when each started)."""
        return [
            Victim(self.workloads[i], placement, self.start.get(i, 0.0))
            for i, placement in self.placements.items()
        ]

    def _preemptors(self, waiting: list[int]) -> list[int]:
        """``waiting`` in the order they may evict: the highest priority first; within a
        priority, work in its queue's quota first, then the queue with the least weighted
        over-quota share (:meth:`placer.queues.Usage.over_share`: who is furthest below its
        fair share reclaims first), then arrival."""
        queues = self.settings.queues
        assert queues is not None
        usage, _ = self._usage()
        capacity = fleet_capacity(self.fleet)

        def key(i: int) -> tuple[int, int, float, int]:
            workload = self.workloads[i]
            member = membership(workload, queues)
            demand = workload.total_requests()
            over = usage.quota_problem(member.queue, demand, ancestors=False) is not None
            return (-member.priority, int(over), usage.over_share(member.queue, capacity), i)

        return sorted(waiting, key=key)

    def _preempt(self, waiting: list[int], now: float) -> tuple[set[int], set[int]]:
        """Evictions for the workloads left pending, highest priority first (then arrival):
        each that the rules allow is placed on what its victims free; the victims go back to
        the queue (:mod:`placer.solver.preempt`). Then, when something was evicted or fits as
        things stand, one more decision over what still waits but this decision's victims
        (:func:`solve_fair`: priorities first), so that the room the evictions left is not
        given by the order of the victim searches: returns (started, evicted)."""
        queues = self.settings.queues
        assert queues is not None
        started: set[int] = set()
        gone: set[int] = set()
        order = self._preemptors(waiting)
        fair_done: set[str | None] = set()  # queues that got a fair-share eviction
        fits = False
        priority = {i: membership(self.workloads[i], queues).priority for i in order}

        def priority_of(i: int) -> int:
            return membership(self.workloads[i], queues).priority

        for index in order:
            usage, victims = self._usage()
            member = membership(self.workloads[index], queues)
            demand = self.workloads[index].total_requests()
            fair = usage.quota_problem(member.queue, demand, ancestors=False) is not None
            # fair-share reclaim only at the highest priority still waiting: it never starts
            # work while work of a higher priority waits (priorities before fair share)
            # (this decision's victims wait too: a priority-10 victim of a reclaim is waiting
            # work of priority 10)
            top = max(
                (
                    *(priority[i] for i in order if i not in started),
                    *(priority_of(i) for i in gone),
                ),
                default=member.priority,
            )
            if fair and (
                not self.settings.fair_share_reclaim
                or member.queue in fair_done
                or member.priority < top
            ):
                fair = False
            eviction = find_victims(
                self.workloads[index],
                self.fleet,
                victims,
                queues,
                usage,
                policies=self.settings.policies,
                seed=self.settings.seed,
                time_limit=self.settings.time_limit,
                fair_share=fair,
            )
            if eviction is None or index in self.placements:
                continue
            if fair:
                fair_done.add(member.queue)
            if not eviction.victims:
                # it fits as things stand: the decision below places it, in priority order
                # with the rest (a gang that may not evict but fits the room left by the
                # evictions goes first when its priority is higher)
                fits = True
                continue
            evicted = self._evict(index, eviction, now)
            gone.update(evicted)
            started.difference_update(evicted)
            started.add(index)
        if self.settings.rebalance is not None:
            self._rebalance(self.settings.rebalance, started, gone, now)
        if fits or gone:
            # what the evictions freed beyond their preemptors' needs, and what fits as things
            # stand, goes to the waiting work by the queues' order (priorities first); this
            # decision's victims wait for the next one (placed again at once, the over-served
            # queues' work took the room back: bench_fairshare's split 19 -> 27 pp)
            rest = after_evictions(
                [i for i in self.queue if i not in self.placements], gone, priority_of
            )
            if rest:
                again = self._decide_on(rest, now)
                started |= again
                # a victim placed again at once runs (it is bound in ``placements``): it is
                # no longer evicted, or ``_settle`` would leave it queued and a later decision
                # would place it a second time (its first placement's room never freed)
                gone -= again
        return started, gone

    def _rebalance(
        self, policy: RebalancePolicy, started: set[int], gone: set[int], now: float
    ) -> None:
        """Fair-share rebalancing moves (:func:`placer.solver.rebalance.rebalance_move`), one
        after another while they make progress: the waiting work that can ever fit is the
        queues' demand; what did not lose its run in this decision may start; ``started`` and
        ``gone`` take the moves in."""
        queues = self.settings.queues
        assert queues is not None
        for _ in range(policy.max_evictions):
            usage, victims = self._usage()
            waiting = [i for i in self.queue if i not in self.placements and self._may_fit(i)]
            candidates = [i for i in waiting if i not in gone]
            move = rebalance_move(
                [self.workloads[i] for i in waiting],
                [self.workloads[i] for i in candidates],
                self.fleet,
                victims,
                queues,
                usage,
                policy,
                now,
                policies=self.settings.policies,
                seed=self.settings.seed,
                time_limit=self.settings.time_limit,
            )
            if move is None:
                return
            index = next(i for i in candidates if self.workloads[i].ref == move.preemptor)
            evicted = self._evict(index, move, now)
            gone.update(evicted)
            started.difference_update(evicted)
            started.add(index)

    def _may_fit(self, index: int) -> bool:
        """Whether some cluster could hold workload ``index`` with none of the stream's work
        running."""
        workload = self.workloads[index]
        return any(shortfall(workload, empty) is None for empty in self.emptiest.values())

    def _evict(self, index: int, eviction: Eviction, now: float) -> list[int]:
        """Evict ``eviction``'s victims (back to the queue, their run lost), start workload
        ``index`` where it said and record it; the victims' input indices."""
        index_of = _positions(self.workloads)
        lost = 0.0
        evicted = []
        begun = []
        for victim in eviction.victims:
            i = index_of[victim.workload]
            placement = self.placements.pop(i)
            self.fleet = release(self.fleet, [placement])
            self.allocated -= gpu_milli(placement.requests)
            lost += victim.gpu_milli / 1000 * (now - self.start.get(i, now))
            begun.append(self.start.get(i, now))
            self.placed.pop(i, None)
            self.start.pop(i, None)
            self.end.pop(i, None)
            self.reasons[i] = {
                eviction.cluster: f"evicted ({victim.reason}) for "
                f"{self.workloads[index].ref} at t={now:g}s"
            }
            if i not in self.queue:
                self.queue.append(i)
            self.fresh.append(i)
            evicted.append((i, victim.reason))
        self.fleet = charge(self.fleet, [eviction.placement])
        self._start(index, eviction.placement, now)
        self.freed = True
        if not evicted:  # it fitted as things stood: started, nobody preempted
            return []
        self.preemptions.append(
            PreemptionRecord(
                time_s=now,
                preemptor=index,
                cluster=eviction.cluster,
                victims=tuple(evicted),
                started=tuple(begun),
                gpu_milli=eviction.gpu_milli,
                lost_gpu_seconds=lost,
            )
        )
        return [i for i, _ in evicted]


def after_evictions(
    waiting: Sequence[int], evicted: set[int], priority: Callable[[int], int]
) -> list[int]:
    """The workloads the decision after a decision's evictions considers: what still waits but
    the victims (placed again at once, an over-served queue's work would take the room back),
    except a victim of a higher priority than some other waiting work — priorities before
    fair share: nothing of a lower priority starts on room a higher-priority victim fits."""
    others = [i for i in waiting if i not in evicted]
    if not others:
        return []
    lowest = min(priority(i) for i in others)
    return [i for i in waiting if i not in evicted or priority(i) > lowest]


def _cannot_fit(
    workload: Workload, totals: Mapping[str, FreeTotals], emptiest: Mapping[str, FreeTotals]
) -> dict[str, str] | None:
    """Reasons per cluster when the workload exceeds every cluster's free totals, else None.

    ``emptiest``: the clusters' free totals with none of the stream's workloads running; a
    shortfall there means the cluster can never take the workload.
    """
    reasons: dict[str, str] = {}
    for name, free in totals.items():
        missing = shortfall(workload, free)
        if missing is None:
            return None
        empty = emptiest.get(name)
        never = shortfall(workload, empty) if empty is not None else None
        if never is not None:
            reasons[name] = f"can never fit, even with no other workload running: {never}"
        else:
            reasons[name] = f"waiting in the queue: {missing}"
    return reasons if reasons else None
