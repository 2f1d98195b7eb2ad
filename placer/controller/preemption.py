"""Queues in the controller's cycles: what placed work holds, and preemption and reclaim.

With Queue objects on the hub (:mod:`placer.controller.hubconfig`) each placement cycle decides
under the queues (:func:`placer.solver.fairshare.solve_fair`), the work already placed booked
to its queues first (:func:`placed_work`: every hub object with a placement record that has
not finished, and every one whose copy is in flight without a record yet, so that two cycles
in a row never take a queue past its limit). Then :class:`Preemption` looks at what the cycle
left pending:

* for each such workload, highest priority first (at most :data:`MAX_PREEMPTORS` a cycle), the
  least disruptive eviction the rules allow (:func:`placer.solver.preempt.find_victims`:
  *reclaim* — it is in its queue's quota and the victims' queues are over theirs, only their
  over-quota part is taken; *preempt* — lower-priority work of its own queue) on the cluster's
  real nodes: the victims' pods as the member shows them (the copy's pods, through the owner
  chain) plus what is still in flight for them (the ledger's planned pods);
* each victim is evicted **whole**: its copy on the member is *suspended* where its definition
  can suspend it (the framework removes its pods; the copy stays, *parked*, annotated
  ``placer.dev/preempted-by``: :func:`placer.dispatch.eviction.evict_copy`), else deleted
  (the member's garbage collector removes its pods), its in-flight entry removed either way;
  its hub object goes back to pending: placement record cleared, ``Placed=False`` reason
  ``Preempted``, a ``Preempted`` condition (reason ``Reclaim`` or ``Preempt``) and a Warning
  Event, both naming the preemptor; the preemptor gets a Normal Event ``Preempting`` naming
  the victims. ``placer.dev/preemptible: "false"`` on a workload and ``reclaimable: false`` on
  its queue protect work;
* **timing**: the preemptor is decided again as soon as its victims' pods are gone from the
  member (:meth:`Preemption.pods_changed`, called on the member's pod watch events and at each
  gather), without backoff — at once when the victims held no pod the member showed. Until then
  it is *held* (not decided: it would find no room), and so are its victims until it is placed
  (or had its decision once their pods were gone), so that the room they free goes to it, not
  back to them. The cycle reads that room from the member's pods as they are, terminating ones
  included, so a node is never overcommitted. A hold ends after :data:`EVICTION_SECONDS` at
  the latest (a pod stuck terminating), as does the rule that the preemptor gets no new
  victims meanwhile: the eviction is never repeated for room that is only slow to free.
  Meanwhile the room is kept for it (:meth:`Preemption.reserve`: every cycle that does not
  decide it sees the placement the victim search found for it charged), so that other pending
  work — an earlier eviction's victims among it — does not take it;
* **placed again** (:meth:`Preemption.unpark`, before a cycle dispatches): a workload placed on
  the member where its copy is parked has that copy resumed in place (the dispatch then applies
  over it, pinned to that member); placed on another member, its parked copy is deleted first.
  Either write failing leaves the workload unplaced in that cycle: never two copies.

**Reservations** (``--reserve-preempt-after``, :mod:`placer.controller.reserving`): a gang
whose reservation is due for eviction is a preemptor too (:meth:`Preemption.run`), after the
cycle's dispatch — the queues' preemptors are looked at before it, so that the cycle's
decision is closed in priority order with their victims waiting (:mod:`placer.controller.
repair`) — among the work they left: its victims are chosen by
:func:`placer.solver.reservation_preemption.force` (lower priority, or its priority and fewer
GPUs; never ``placer.dev/preemptible: "false"``; with Queues on the hub, another queue's work
only from its over-quota part, reclaimable, and only for a gang within its own quota: a queue's
quota is never broken for a reservation) and evicted the same way, reason ``Reservation``
(metric reason ``reservation``). One victim is never evicted twice, and a preemptor with an
eviction under way gets no other.

**Fair-share rebalancing** (``--rebalance TOLERANCE``, ``settings.rebalance``): after the
reclaims, in the same plan, :func:`placer.solver.rebalance.rebalance_move` is asked for moves —
a pending workload of a queue below its share of the over-quota capacity evicts over-quota
work of queues above theirs (reason ``Rebalance``, metric reason ``rebalance``) — up to the
policy's moves a cycle, among the victims left, each evicted the same way
(:meth:`Preemption._rebalance`).

A victim the loop or a cycle is working on is left alone (the eviction is tried again next
cycle); a victim whose copy cannot be suspended or deleted keeps its placement (never two
running copies: the hub record is only cleared once the copy is stopped).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from placer.controller.events import EventRecorder
from placer.controller.holdings import observed_pods
from placer.controller.hubcache import HubCache
from placer.controller.hubwrites import HubWriter
from placer.controller.members import MembersView
from placer.controller.records import (
    JSON,
    clear_record_patch,
    condition_of,
    cut_message,
    hub_uid_of,
    placed_condition,
    record_of,
    recorded_workload,
    status_patch,
)
from placer.dispatch import Ledger, Manifest
from placer.dispatch.eviction import (
    SUSPENDED,
    evict_for,
    is_parked,
    resume_parked,
    victim_of,
)
from placer.dispatch.ledger.sync import LedgerReads
from placer.dispatch.scaling import running_workload
from placer.errors import ClusterUnreachableError, KubeError, NotFoundError, PlacerError
from placer.kube import KubeClient
from placer.model import (
    Decision,
    Fleet,
    Placement,
    PodAssignment,
    Unplaced,
    Workload,
    WorkloadRef,
)
from placer.objects import generation_of, uid_of, version_of
from placer.policy import PlacementPolicy
from placer.queues import QueueSet, Usage, membership
from placer.queues.report import pending_demand, pending_order, queue_rows
from placer.simulate.capacity import free_totals, shortfall
from placer.solver.charging import charge, release
from placer.solver.fairshare import Running
from placer.solver.preempt import RECLAIM, Eviction, Victim
from placer.solver.rebalance import REBALANCE, RebalancePolicy, rebalance_move
from placer.solver.reservation_preemption import RESERVATION, force
from placer.timestamps import rfc3339

__all__ = [
    "EVICTION_SECONDS",
    "MAX_PREEMPTORS",
    "PREEMPTED",
    "PREEMPTING",
    "Held",
    "Preemption",
    "RunningCounts",
    "hub_queue_rows",
    "placed_again",
    "placed_work",
    "queue_report",
    "waiting_work",
]

log = logging.getLogger(__name__)

#: the victims' condition type, their ``Placed`` condition's reason and their Event's reason.
PREEMPTED = "Preempted"
#: the preemptor's Event reason.
PREEMPTING = "Preempting"
#: seconds a preemptor whose victims were evicted gets no new victims.
EVICTION_SECONDS = 120.0
#: pending workloads looked at for preemption in one cycle at most.
MAX_PREEMPTORS = 16


@dataclass(frozen=True)
class Held:
    """A hub object whose copy holds capacity on ``cluster`` (placed, or in flight)."""

    ref: WorkloadRef
    obj: JSON
    workload: Workload
    cluster: str
    #: when it was placed (epoch seconds; 0 when unknown).
    placed_at: float = 0.0

    def running(self) -> Running:
        return Running(self.workload, self.cluster)


class RunningCounts:
    """An elastic workload placed by the controller runs the replica count its copy carries
    (the decision's choice, or its growth since), not its minimum: what its queue is charged
    (:func:`placer.dispatch.scaling.running_workload`, read from the copy in the members'
    cache; cached per copy version), else what its hub record says
    (:data:`~placer.controller.records.ANNOTATION_REPLICAS`)."""

    #: copies' counts kept at most (all dropped when full).
    KEPT = 10_000

    def __init__(self, hub: HubCache, members: MembersView) -> None:
        self.hub = hub
        self.members = members
        self._cache: dict[tuple[str, str, str], Workload] = {}

    def __call__(self, workload: Workload, obj: JSON, cluster: str) -> Workload:
        if not workload.elastic:
            return workload
        found, _ = self.members.view(workload.ref, uid_of(obj))
        copy = found.get(cluster)
        if copy is None or not copy.get("spec"):  # (not cached whole yet: as its record says)
            record = record_of(obj)
            return recorded_workload(workload, record) if record is not None else workload
        key = (cluster, uid_of(copy), version_of(copy))
        cached = self._cache.get(key)
        if cached is None or cached.ref != workload.ref:
            try:
                cached = running_workload(self.hub.decompose(copy), workload)
            except PlacerError:
                return workload
            if len(self._cache) >= self.KEPT:
                self._cache.clear()
            self._cache[key] = cached
        return cached


def placed_work(
    hub: HubCache,
    ledger: Ledger,
    exclude: Sequence[WorkloadRef] = (),
    counts: Callable[[Workload, JSON, str], Workload] | None = None,
) -> list[Held]:
    """The hub objects holding capacity (module docstring), but ``exclude`` (those being
    decided now); one that does not decompose any more is left out (it is reported
    elsewhere). ``counts``: an elastic workload at its running count (:class:`RunningCounts`;
    default: at its minimum)."""
    skip = set(exclude)
    in_flight = {e.workload: e.cluster for e in ledger.entries()}
    held: list[Held] = []
    for ref, obj in hub.items():
        if ref in skip:
            continue
        record = record_of(obj)
        if record is not None and record.terminal:
            continue
        cluster = record.cluster if record is not None else in_flight.get(ref)
        if not cluster:
            continue
        try:
            workload = hub.decompose(obj).workload
        except PlacerError:
            continue
        if counts is not None:
            workload = counts(workload, obj, cluster)
        placed_at = record.placed_at if record is not None and record.placed_at else 0.0
        held.append(Held(ref, obj, workload, cluster, placed_at))
    return held


def queue_report(
    hub: HubCache,
    ledger: Ledger,
    queues: QueueSet,
    pending: Iterable[WorkloadRef],
    counts: Callable[[Workload, JSON, str], Workload] | None = None,
) -> list[dict[str, Any]]:
    """The hub's queues as rows (:func:`hub_queue_rows`): allocated by the work placed or in
    flight, pending the objects waiting for a cycle."""
    running = [h.running() for h in placed_work(hub, ledger, counts=counts)]
    return hub_queue_rows(queues, running, waiting_work(hub, pending))


def waiting_work(hub: HubCache, pending: Iterable[WorkloadRef]) -> list[tuple[Workload, JSON]]:
    """The workloads of the hub objects ``pending`` (those waiting for a cycle) with their
    objects; one gone or that does not decompose is left out (it is reported elsewhere)."""
    waiting = []
    for ref in pending:
        obj = hub.get(ref)
        if obj is None:
            continue
        try:
            waiting.append((hub.decompose(obj).workload, obj))
        except PlacerError:
            continue
    return waiting


def hub_queue_rows(
    queues: QueueSet, running: Sequence[Running], waiting: Sequence[tuple[Workload, JSON]]
) -> list[dict[str, Any]]:
    """Rows of :func:`placer.queues.report.queue_rows`: ``running`` allocated, ``waiting``
    (workloads with their hub objects) pending, in each queue's order, and per queue how many
    of those wait after an eviction (their ``Preempted`` condition)."""
    usage = queue_usage(queues, running)
    members = []
    preempted: dict[str, int] = {}
    for workload, obj in waiting:
        member = membership(workload, queues)
        members.append((workload, member))
        evicted = condition_of(obj, PREEMPTED) or {}
        if member.queue is not None and evicted.get("status") == "True":
            for queue in queues.chain(member.queue):
                preempted[queue.name] = preempted.get(queue.name, 0) + 1
    pending = pending_demand(queues, members)
    return queue_rows(queues, usage, pending, preempted, order=pending_order(members))


def queue_usage(queues: QueueSet, running: Sequence[Running]) -> Usage:
    """What ``running`` uses per queue."""
    usage = Usage(queues)
    for item in running:
        usage.add(
            membership(item.workload, queues).queue, item.workload.total_requests(), item.cluster
        )
    return usage


#: a pod on a member: (namespace, name).
PodKey = tuple[str, str]


@dataclass(frozen=True)
class _Plan:
    """Where one run's plan stands for the rebalancing after the reclaims: the fleet and
    usage with its evictions taken in, the victims left, and every candidate victim and held
    workload by reference (to evict them)."""

    fleet: Fleet
    victims: Sequence[Victim]
    usage: Usage
    candidates: Mapping[WorkloadRef, Victim]
    held: Mapping[WorkloadRef, Held]


@dataclass
class _Eviction:
    """An eviction under way for one preemptor."""

    cluster: str
    victims: frozenset[WorkloadRef]
    #: the victims' pods the member showed, not gone yet: the preemptor is held until none is.
    pods: set[PodKey]
    #: until when it gets no new victims, and the holds end at the latest (monotonic seconds).
    until: float
    #: its victims are held (until it is placed, or had its decision once their pods went).
    holding_victims: bool = True
    started: float = field(default=0.0)
    #: where the victim search put the preemptor: kept for it meanwhile (:meth:`Preemption.
    #: reserve`).
    placement: Placement | None = None


class Preemption:
    """Evicts placed work for pending work the queues entitle (module docstring).

    Args:
        hub: the hub cache (objects, their records).
        members: the members (clients, this hub's copies).
        writer: writes on hub objects.
        ledger: the in-flight ledger (the victims' entries are dropped).
        events: the hub's Events.
        reads: ``reads(cluster, client)``: where a member's pods are read (the capacity
            watches' caches, or listing).
        evict_copy: ``evict_copy(ref, obj, cluster, preemptor)`` suspends (or deletes) the copy
            of hub object ``obj`` on ``cluster`` with its in-flight entry, returning
            ``suspended`` or ``deleted`` (raises :class:`~placer.errors.KubeError` when it
            cannot).
        delete_copy: ``delete_copy(ref, cluster)`` deletes a parked copy with its in-flight
            entry (raises :class:`~placer.errors.KubeError`).
        remember: ``remember(cluster, ref, copy)`` puts a copy just written in the members'
            cache.
        claim: take an object for an eviction, unless the loop or a cycle works on it.
        release: the eviction of an object is over (the loop looks at it again).
        preempted: ``preempted(reason)`` counts one victim (the metric).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        *,
        hub: HubCache,
        members: MembersView,
        writer: HubWriter,
        ledger: Ledger,
        events: EventRecorder,
        reads: Callable[[str, KubeClient], LedgerReads],
        evict_copy: Callable[[WorkloadRef, JSON, str, WorkloadRef], str],
        delete_copy: Callable[[WorkloadRef, str], None],
        remember: Callable[[str, WorkloadRef, JSON], None],
        claim: Callable[[WorkloadRef], bool],
        release: Callable[[WorkloadRef], None],
        preempted: Callable[[str], None] = lambda reason: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hub = hub
        self.members = members
        self.writer = writer
        self.ledger = ledger
        self.events = events
        self._reads = reads
        self._evict_copy = evict_copy
        self._delete_copy = delete_copy
        self._remember = remember
        self._claim = claim
        self._release = release
        self._preempted = preempted
        self._clock = clock
        #: preemptor -> its eviction under way (informer threads read it: ``_lock``).
        self._evicting: dict[WorkloadRef, _Eviction] = {}
        self._lock = threading.Lock()
        #: per candidate victim of the current run, the pods its member showed.
        self._seen: dict[WorkloadRef, list[PodKey]] = {}

    def evicting(self, ref: WorkloadRef) -> bool:
        """Whether an eviction for ``ref`` is under way."""
        with self._lock:
            eviction = self._evicting.get(ref)
            if eviction is None:
                return False
            if eviction.until <= self._clock():
                del self._evicting[ref]
                return False
            return True

    def holds(self, ref: WorkloadRef) -> bool:
        """Whether ``ref`` is not to be decided now: a preemptor whose victims' pods are still
        on the member, or a victim whose preemptor is not placed yet (module docstring)."""
        with self._lock:
            if not self._evicting:
                return False
            now = self._clock()
            eviction = self._evicting.get(ref)
            if eviction is not None and eviction.pods and eviction.until > now:
                return True
            return any(
                e.holding_victims and e.until > now and ref in e.victims
                for e in self._evicting.values()
            )

    def placed(self, ref: WorkloadRef) -> None:
        """``ref`` was placed (or is gone): its eviction is over."""
        with self._lock:
            self._evicting.pop(ref, None)

    def decided(self, ref: WorkloadRef) -> None:
        """``ref`` was decided and left unplaced: once its victims' pods are gone, they are
        held no longer (the room went elsewhere; they may compete for what is left)."""
        with self._lock:
            eviction = self._evicting.get(ref)
            if eviction is not None and not eviction.pods:
                eviction.holding_victims = False

    def reserve(self, fleet: Fleet, deciding: Iterable[WorkloadRef]) -> Fleet:
        """``fleet`` with the room of each eviction under way charged to its preemptor (where
        the victim search put it), but for the preemptors in ``deciding`` (decided now: the
        room is theirs to take): until a preemptor is placed, or had its decision once its
        victims' pods went, no other pending work takes the room its victims free — the victims
        of earlier evictions among it."""
        skip = set(deciding)
        now = self._clock()
        with self._lock:
            kept = [
                e.placement
                for ref, e in self._evicting.items()
                if e.placement is not None
                and e.holding_victims
                and e.until > now
                and ref not in skip
            ]
        for placement in kept:
            try:
                fleet = charge(fleet, [placement])
            except ValueError:  # (its member or node is gone from the fleet: nothing to keep)
                continue
        return fleet

    def victims(self, preemptors: Iterable[WorkloadRef] | None = None) -> set[WorkloadRef]:
        """The victims of the evictions under way (of ``preemptors`` only, when given): they
        wait to be decided again (:mod:`placer.controller.repair`)."""
        with self._lock:
            now = self._clock()
            chosen = (
                self._evicting.values()
                if preemptors is None
                else [self._evicting[r] for r in preemptors if r in self._evicting]
            )
            return {v for e in chosen if e.until > now for v in e.victims}

    def watched_clusters(self) -> set[str]:
        """The members where victims' pods are awaited."""
        with self._lock:
            return {e.cluster for e in self._evicting.values() if e.pods}

    def pods_changed(
        self, cluster: str, left: Callable[[set[PodKey]], set[PodKey]]
    ) -> list[WorkloadRef]:
        """``cluster``'s pods changed: ``left(pods)`` says which of ``pods`` are still there
        (not gone, not finished). Returns the preemptors whose victims' pods are all gone now
        (to be decided at once)."""
        with self._lock:
            waiting = [
                (ref, set(e.pods))
                for ref, e in self._evicting.items()
                if e.cluster == cluster and e.pods
            ]
        if not waiting:
            return []
        released: list[WorkloadRef] = []
        for ref, pods in waiting:
            remaining = left(pods)
            with self._lock:
                eviction = self._evicting.get(ref)
                if eviction is None:
                    continue
                eviction.pods &= remaining
                if not eviction.pods:
                    released.append(ref)
        for ref in released:
            log.info(
                "%s: its victims' pods on %s are gone; deciding it now",
                ref,
                cluster,
                extra={"event": "victims-gone", "workload": str(ref), "cluster": cluster},
            )
        return released

    def run(
        self,
        waiting: Sequence[Workload],
        fleet: Fleet,
        held: Sequence[Held],
        placed_now: Sequence[Running],
        queues: QueueSet | None,
        policies: Sequence[PlacementPolicy],
        time_limit: float = 0.5,
        *,
        forced: Sequence[Workload] = (),
        queue_preemption: bool = True,
        prioritised: Callable[[Workload], Workload] = lambda w: w,
        on_forced: Callable[[WorkloadRef, Eviction], None] = lambda ref, eviction: None,
        rebalance: RebalancePolicy | None = None,
        pending: Sequence[Workload] = (),
    ) -> dict[WorkloadRef, str]:
        """Evict for ``waiting`` (the cycle's pending work) on ``fleet`` (charged with
        everything placed, ``placed_now`` included) — one plan: first for ``forced`` (gangs
        whose reservation is due for eviction, in the order the reservations were planned:
        :func:`placer.solver.reservation_preemption.force`, the queues' guarantee kept), then,
        with ``queues`` and ``queue_preemption``, for the rest by the queues' rules, among the
        victims left (none is evicted twice), then with ``rebalance`` fair-share rebalancing
        moves (:meth:`_rebalance`; ``pending``: the work waiting outside this cycle, part of
        the queues' demand); per preemptor whose victims were evicted, what it evicted in
        words. ``prioritised``: a workload with the priority its queue or priority class gives
        it (the reservation rule compares priorities); ``on_forced``: told of each eviction for
        a reservation (its placement names the nodes freed)."""
        now = self._clock()
        with self._lock:  # (gone ones)
            self._evicting = {r: e for r, e in self._evicting.items() if e.until > now}
        forcing = [w for w in forced if not self.evicting(w.ref)]
        order = (
            sorted(
                (w for w in waiting if not self.evicting(w.ref)),
                key=lambda w: -membership(w, queues).priority,
            )[:MAX_PREEMPTORS]
            if queues is not None and queue_preemption
            else []
        )
        rebalancing = rebalance is not None and queues is not None and queue_preemption
        if not order and not forcing and not (rebalancing and waiting):
            return {}
        running = [*(h.running() for h in held), *placed_now]
        usage = queue_usage(queues, running) if queues is not None else None
        victims = self._victims(held)
        candidates = {v.workload.ref: v for v in victims}
        by_ref = {h.ref: h for h in held}
        done: dict[WorkloadRef, str] = {}
        left = list(victims)
        gone: list[Victim] = []  # (this run's victims: they wait again)
        for preemptor in forcing:
            eviction = force(
                prioritised(preemptor),
                fleet,
                [replace(v, workload=prioritised(v.workload)) for v in left],
                time.time(),  # (the victims started on this clock: placer.dev/placed-at)
                policies=policies,
                time_limit=time_limit,
                queues=queues,
                usage=usage,
            )
            if eviction is None or not eviction.victims:
                continue
            evicted = self._evict(eviction, preemptor, candidates, by_ref)
            if not evicted:
                continue
            # the room is the gang's from now on (its reservation moves there): the rest of
            # the plan sees it taken
            fleet = charge(release(fleet, [v.placement for v in evicted]), [eviction.placement])
            if usage is not None and queues is not None:
                for victim in evicted:
                    queue = membership(victim.workload, queues).queue
                    usage.remove(queue, victim.workload.total_requests(), victim.placement.cluster)
                queue = membership(preemptor, queues).queue
                usage.add(queue, preemptor.total_requests(), eviction.cluster)
            evicted_refs = {v.workload.ref for v in evicted}
            left = [v for v in left if v.workload.ref not in evicted_refs]
            gone += evicted
            done[preemptor.ref] = self._under_way(preemptor, eviction, evicted)
            on_forced(preemptor.ref, eviction)
        order = [w for w in order if w.ref not in done]
        if order and left and queues is not None and usage is not None:

            def carry(preemptor: Workload, eviction: Eviction) -> list[Victim]:
                return self._evict(eviction, preemptor, candidates, by_ref)

            reclaimed = evict_for(
                order, fleet, left, queues, usage, carry, policies=policies, time_limit=time_limit
            )
            for preemptor, eviction, evicted in reclaimed:
                done[preemptor.ref] = self._under_way(preemptor, eviction, evicted)
                # (evict_for took the victims out of ``usage``; the preemptor goes where they
                # were, for the rebalancing below)
                fleet = charge(release(fleet, [v.placement for v in evicted]), [eviction.placement])
                usage.add(
                    membership(preemptor, queues).queue,
                    preemptor.total_requests(),
                    eviction.cluster,
                )
                evicted_refs = {v.workload.ref for v in evicted}
                left = [v for v in left if v.workload.ref not in evicted_refs]
                gone += evicted
        if rebalance is not None and rebalancing and queues is not None and usage is not None:
            state = _Plan(fleet, left, usage, candidates, by_ref)
            demand = [*waiting, *pending, *(v.workload for v in gone)]
            done.update(
                self._rebalance(
                    rebalance, state, waiting, demand, done, queues, policies, time_limit
                )
            )
        self._seen = {}
        return done

    def _rebalance(
        self,
        policy: RebalancePolicy,
        plan: _Plan,
        waiting: Sequence[Workload],
        demand: Sequence[Workload],
        done: Mapping[WorkloadRef, str],
        queues: QueueSet,
        policies: Sequence[PlacementPolicy],
        time_limit: float,
    ) -> dict[WorkloadRef, str]:
        """Fair-share rebalancing (:func:`placer.solver.rebalance.rebalance_move`): up to the
        policy's ``max_evictions`` moves, each for one of ``waiting`` (this cycle's pending
        work, oldest first) with no eviction under way, among ``plan``'s victims left, on its
        fleet and usage (what this cycle placed and evicted taken in); ``demand``: every
        workload waiting (the queues' waiting demand; as ``placer simulate`` counts it, not
        one no cluster could hold with every victim gone, nor one its queue refuses: neither
        can start, so neither holds lower priorities back). A preemptor whose eviction is under
        way (this cycle's or an earlier one's) is booked to its queue where its victims were,
        not counted as waiting (its room is taken: no second move for the same gap) — until it
        was decided once its victims' pods were gone and left unplaced (other work took that
        room): it waits, and may move again, as reclaim's preemptors do after
        :data:`EVICTION_SECONDS`. A move whose victims cannot all be evicted (busy, a write
        refused) ends the rebalancing of this cycle: its preemptor stays pending, backing off,
        and is tried again later. Per preemptor, what it evicted in words."""
        with self._lock:  # (one decided and left unplaced once its victims' pods were gone
            # lost that room to other work: it waits again, and may move again)
            going = {ref: e.cluster for ref, e in self._evicting.items() if e.holding_victims}
        usage = plan.usage
        # the room placer's work could free: a workload that would not fit even there (or that
        # its queue refuses) is no demand — nor does its priority hold the others back
        emptiest = free_totals(release(plan.fleet, [v.placement for v in plan.victims]))
        seen = set(done)  # (this run's preemptors are booked already)
        waiting_now: list[Workload] = []
        for workload in demand:
            if workload.ref in seen:
                continue
            seen.add(workload.ref)
            cluster = going.get(workload.ref)
            if cluster is not None:
                usage.add(membership(workload, queues).queue, workload.total_requests(), cluster)
            elif membership(workload, queues).refusal is None and any(
                shortfall(workload, room) is None for room in emptiest.values()
            ):
                waiting_now.append(workload)
        candidates = [w for w in waiting if w.ref not in done and w.ref not in going]
        fleet, victims = plan.fleet, list(plan.victims)
        moved: dict[WorkloadRef, str] = {}
        now = time.time()  # (the victims started on this clock: placer.dev/placed-at)
        for _ in range(policy.max_evictions):
            move = rebalance_move(
                waiting_now,
                candidates,
                fleet,
                victims,
                queues,
                usage,
                policy,
                now,
                policies=policies,
                time_limit=time_limit,
            )
            if move is None:
                break
            preemptor = next(w for w in candidates if w.ref == move.preemptor)
            evicted = self._evict(move, preemptor, plan.candidates, plan.held)
            if not evicted:
                break
            moved[preemptor.ref] = self._under_way(preemptor, move, evicted)
            if len(evicted) < len(move.victims):
                break  # (the room is not all there: no further move on a guess)
            fleet = charge(release(fleet, [v.placement for v in evicted]), [move.placement])
            for victim in evicted:
                queue = membership(victim.workload, queues).queue
                usage.remove(queue, victim.workload.total_requests(), victim.placement.cluster)
            usage.add(membership(preemptor, queues).queue, preemptor.total_requests(), move.cluster)
            evicted_refs = {v.workload.ref for v in evicted}
            victims = [v for v in victims if v.workload.ref not in evicted_refs]
            candidates = [w for w in candidates if w.ref != preemptor.ref]
            waiting_now = [
                *(w for w in waiting_now if w.ref != preemptor.ref),
                *(v.workload for v in evicted),
            ]
        return moved

    def _under_way(self, preemptor: Workload, eviction: Eviction, evicted: Sequence[Victim]) -> str:
        """Record the eviction for ``preemptor`` (it and its victims are held until their pods
        are gone, module docstring); what it evicted in words."""
        pods = {key for v in evicted for key in self._seen.get(v.workload.ref, ())}
        started = self._clock()
        with self._lock:
            self._evicting[preemptor.ref] = _Eviction(
                eviction.cluster,
                frozenset(v.workload.ref for v in evicted),
                pods,
                started + EVICTION_SECONDS,
                started=started,
                placement=eviction.placement,
            )
        return self._words(eviction, evicted)

    # -- the victims' placements -----------------------------------------------------------------

    def _victims(self, held: Sequence[Held]) -> list[Victim]:
        """Each held workload with the pods it holds on its member's nodes: what the member
        shows of its copy's pods, plus what is still in flight for it; one holding nothing
        known is no candidate (evicting it could free nothing)."""
        by_cluster: dict[str, list[Held]] = {}
        for item in held:
            by_cluster.setdefault(item.cluster, []).append(item)
        victims: list[Victim] = []
        self._seen = {}
        for cluster, items in sorted(by_cluster.items()):
            client = self.members.clients.get(cluster)
            if client is None:
                continue
            observed = self._observed(cluster, client, items)
            for item in items:
                pods = list(observed.get(item.ref, ()))
                # (held_pods names each pod it saw in ``component``)
                self._seen[item.ref] = [(item.ref.namespace, p.component) for p in pods]
                entry = self.ledger.get(cluster, item.ref)
                if entry is not None:
                    pods += entry.placement.pods
                victim = victim_of(item.workload, cluster, pods, item.placed_at)
                if victim is not None:
                    victims.append(victim)
        return victims

    def _observed(
        self, cluster: str, client: KubeClient, items: Sequence[Held]
    ) -> dict[WorkloadRef, list[PodAssignment]]:
        """The pods each held workload's copy owns on ``cluster``
        (:func:`~placer.controller.holdings.observed_pods`)."""
        return observed_pods(self.members, self._reads, cluster, client, items)

    # -- evicting --------------------------------------------------------------------------------

    def _evict(
        self,
        eviction: Eviction,
        preemptor: Workload,
        candidates: Mapping[WorkloadRef, Victim],
        held: Mapping[WorkloadRef, Held],
    ) -> list[Victim]:
        """Evict ``eviction``'s victims (none when one of them is busy); those evicted."""
        refs = [v.workload for v in eviction.victims]
        claimed: list[WorkloadRef] = []
        for ref in refs:
            if not self._claim(ref):
                break
            claimed.append(ref)
        try:
            if len(claimed) < len(refs):
                return []
            evicted = [
                candidates[v.workload]
                for v in eviction.victims
                if v.workload in held and self._evict_one(held[v.workload], v.reason, preemptor.ref)
            ]
        finally:
            for ref in claimed:
                self._release(ref)
        if evicted:
            names = ", ".join(str(v.workload.ref) for v in evicted)
            self.events.record(
                self.hub.get(preemptor.ref) or {},
                "Normal",
                PREEMPTING,
                f"evicted {names} on cluster {eviction.cluster} ({_rules(eviction)}) to make "
                "room: it is placed once they are gone",
            )
        return evicted

    def _evict_one(self, item: Held, rule: str, preemptor: WorkloadRef) -> bool:
        """Suspend (or delete) ``item``'s copy, then put its hub object back to pending,
        saying why."""
        ref, cluster = item.ref, item.cluster
        obj = self.hub.get(ref)
        if obj is None or uid_of(obj) != uid_of(item.obj):
            return False
        try:
            how = self._evict_copy(ref, obj, cluster, preemptor)
        except PlacerError as err:
            log.warning(
                "%s: not evicted for %s, its copy on %s could not be suspended or deleted (%s)",
                ref,
                preemptor,
                cluster,
                err.message,
                extra={"event": "eviction-failed", "workload": str(ref), "cluster": cluster},
            )
            return False
        kind, why = _cause(rule, preemptor)
        done = (
            "suspended (its pods go; resumed if it is placed there again)"
            if how == SUSPENDED
            else "deleted"
        )
        message = (
            f"cluster {cluster}: {why}; its copy there was {done}, it waits to be placed again"
        )
        try:
            obj = self.writer.patch_meta(ref, obj, clear_record_patch)
            placed = placed_condition(
                False, PREEMPTED, message, time.time(), generation=generation_of(obj)
            )
            preempted = {
                "type": PREEMPTED,
                "status": "True",
                "reason": kind,
                "message": cut_message(message),
                "lastTransitionTime": placed["lastTransitionTime"],
            }
            obj = self.writer.patch_status(
                ref, obj, status_patch(obj, placed, with_condition(obj, preempted))
            )
        except KubeError as err:
            log.warning("%s: evicted, but its hub record not written: %s", ref, err)
        self.events.record(obj, "Warning", PREEMPTED, message)
        self._preempted(rule)
        log.warning(
            "%s: %s",
            ref,
            message,
            extra={
                "event": "preempted",
                "workload": str(ref),
                "cluster": cluster,
                "preemptor": str(preemptor),
                "reason": rule,
                "evicted": how,
            },
        )
        return True

    # -- placed again ----------------------------------------------------------------------------

    def unpark(
        self, decision: Decision, manifests: Mapping[WorkloadRef, Manifest]
    ) -> tuple[Decision, dict[WorkloadRef, Manifest]]:
        """Before ``decision`` is dispatched: each placed workload's parked copies resumed where
        it is placed (its manifest then pinned to that member), deleted elsewhere (module
        docstring). Returns the decision without the placements whose parked copy could not
        be settled (unplaced, saying why), and the manifests pinned."""
        pinned: dict[WorkloadRef, Manifest] = {}
        refused: dict[WorkloadRef, dict[str, str]] = {}
        for placement in decision.placements:
            manifest = manifests.get(placement.workload)
            if manifest is None:
                continue
            found, _ = self.members.view(placement.workload, uid_of(manifest.body))
            parked = {c: copy for c, copy in found.items() if is_parked(copy)}
            for cluster in sorted(parked):
                problem = self._settle_parked(manifest, cluster, placement.cluster)
                if problem:
                    refused[placement.workload] = {placement.cluster: problem}
                    break
                if cluster == placement.cluster:
                    workload = replace(manifest.workload, pinned_cluster=cluster)
                    decomposition = replace(manifest.decomposition, workload=workload)
                    pinned[placement.workload] = replace(manifest, decomposition=decomposition)
        if not refused:
            return decision, pinned
        kept = tuple(p for p in decision.placements if p.workload not in refused)
        unplaced = (*decision.unplaced, *(Unplaced(r, why) for r, why in refused.items()))
        return replace(decision, placements=kept, unplaced=unplaced), pinned

    def _settle_parked(self, manifest: Manifest, cluster: str, target: str) -> str:
        """Resume the parked copy of ``manifest`` on ``cluster`` (``target``: where it is placed
        now) or delete it; ``""``, or why it could not be."""
        ref = manifest.ref
        client = self.members.clients.get(cluster)
        if client is None:
            return f"its suspended copy on cluster {cluster} cannot be reached"
        try:
            if cluster != target:
                if not self.members.health(cluster).reachable:
                    return self._left_parked(ref, cluster, target)
                try:
                    self._delete_copy(ref, cluster)
                except ClusterUnreachableError:
                    return self._left_parked(ref, cluster, target)
                log.info(
                    "%s: its suspended copy on %s deleted, it is placed on %s",
                    ref,
                    cluster,
                    target,
                    extra={"event": "parked-deleted", "workload": str(ref), "cluster": cluster},
                )
                return ""
            try:
                current = client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
            except NotFoundError:
                return ""  # gone meanwhile: the dispatch creates it
            if not is_parked(current) or hub_uid_of(current) != uid_of(manifest.body):
                return ""  # resumed meanwhile (or not this copy): the dispatch decides
            written = resume_parked(client, current, manifest.decomposition.definition)
            self._remember(cluster, ref, written)
        except PlacerError as err:
            verb = "deleted" if cluster != target else "resumed"
            log.warning(
                "%s: its suspended copy on %s could not be %s: %s",
                ref,
                cluster,
                verb,
                err.message,
                extra={"event": "unpark-failed", "workload": str(ref), "cluster": cluster},
            )
            return (
                f"its suspended copy on cluster {cluster} could not be {verb} ({err.message}); "
                "it is tried again"
            )
        log.info(
            "%s: its suspended copy on %s resumed",
            ref,
            cluster,
            extra={"event": "parked-resumed", "workload": str(ref), "cluster": cluster},
        )
        return ""

    @staticmethod
    def _left_parked(ref: WorkloadRef, cluster: str, target: str) -> str:
        """A parked copy on a member that does not answer is left there: suspended, it runs
        nothing, so its workload is placed on ``target`` at once; once its record names
        ``target``, the copy is stale, deleted as soon as its member answers again."""
        log.info(
            "%s: its suspended copy on %s is left there (the member does not answer; it runs "
            "nothing) and deleted as stale once it answers; placed on %s",
            ref,
            cluster,
            target,
            extra={"event": "parked-left", "workload": str(ref), "cluster": cluster},
        )
        return ""

    @staticmethod
    def _words(eviction: Eviction, evicted: Sequence[Victim]) -> str:
        names = ", ".join(str(v.workload.ref) for v in evicted)
        return (
            f"evicting {names} on cluster {eviction.cluster} ({_rules(eviction)}): "
            "placed once they are gone"
        )


def _cause(rule: str, preemptor: WorkloadRef) -> tuple[str, str]:
    """The victim's ``Preempted`` reason and why, in words, for an eviction by ``rule``."""
    if rule == RECLAIM:
        return "Reclaim", (
            f"reclaimed by {preemptor}: its queue is within its quota and this workload's "
            "queue is over its own"
        )
    if rule == RESERVATION:
        return "Reservation", (
            f"evicted for {preemptor}, whose reservation waited past the controller's "
            "--reserve-preempt-after (this workload is of a lower priority, or of its priority "
            "and smaller)"
        )
    if rule == REBALANCE:
        return "Rebalance", (
            f"evicted by fair-share rebalancing for {preemptor}: this workload's queue holds "
            "more than its overQuotaWeight share of the capacity over the queues' quotas, the "
            "preemptor's queue less (the controller's --rebalance)"
        )
    return "Preempt", f"preempted by {preemptor}, of a higher priority in the same queue"


def _rules(eviction: Eviction) -> str:
    return ", ".join(sorted({v.reason for v in eviction.victims}))


def placed_again(obj: JSON, cluster: str, now: float) -> JSON | None:
    """``obj``'s status with its ``Preempted`` condition turned ``False`` (reason ``Placed``),
    to write with its ``Placed`` condition once it is placed again; ``None`` when it was not
    preempted."""
    if (condition_of(obj, PREEMPTED) or {}).get("status") != "True":
        return None
    cleared = {
        "type": PREEMPTED,
        "status": "False",
        "reason": "Placed",
        "message": f"placed again, on cluster {cluster}",
        "lastTransitionTime": rfc3339(now),
    }
    return with_condition(obj, cleared)


def with_condition(obj: JSON, condition: Mapping[str, object]) -> JSON:
    """``obj``'s status with ``condition`` among its conditions (the one of its type
    replaced)."""
    status = dict(obj.get("status") or {})
    conditions = [
        dict(c)
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping) and c.get("type") != condition.get("type")
    ]
    status["conditions"] = [*conditions, dict(condition)]
    return status
