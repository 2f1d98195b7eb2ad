"""Reservations with backfill in the placement controller (docs/reservations.md).

The planning and the rule of backfill are pure (:mod:`placer.solver.reservations`); this module
holds the controller's reservations and ties them to its cycles
(:class:`~placer.controller.cycles.DecisionCycle`), with ``ControllerSettings.reservations``:

1. **Backfill in every decision** (:meth:`Reserving.view`): the reserved nodes carry the taint
   ``placer.dev/reserved=<gang>:NoSchedule`` in the fleet the cycle decides on, and each
   workload tolerates it only when it is the gang, or when its expected run time says it is
   done by the reservation's start (:func:`~placer.solver.reservations.backfill_view`). The
   expected run time is the hub object's annotation ``placer.dev/expected-runtime``, else its
   ``spec.activeDeadlineSeconds`` (:func:`runtime_of`); work without either never backfills,
   and a bad annotation makes the object ``InvalidWorkload`` (named) while reservations are on.
2. **New reservations after the cycle's dispatch** (:meth:`Reserving.after`): the workloads the
   cycle left pending that qualify (:func:`~placer.solver.reservations.qualifies`: waited at
   least ``after_s`` since :func:`waiting_since`, or a priority at least ``priority``; asking at
   least ``min_gpus``), highest priority first, then longest waiting, get reservations up to
   ``max_reservations`` held at once: :func:`~placer.solver.reservations.plan` on the fleet as
   the cycle leaves it and the running work's expected ends — each hub object holding capacity
   (:func:`~placer.controller.preemption.placed_work`), with the pods it holds as its member
   shows them plus what is in flight for it (:func:`~placer.controller.holdings.held_pods_of`),
   ending at its ``placer.dev/placed-at`` plus its expected run time (never, without one).
3. **Release**: when the gang is placed (its cycle placed it, or its hub object has a placement
   record), when its hub object is deleted (:meth:`Reserving.forget`, or gone at a look), when
   it *expires* (its cycle could not place it at or after its start plus ``grace_s``: an
   estimate was too short; it is planned again in the same cycle), and when the fleet changed
   under it (:func:`~placer.solver.reservations.stale`: a reserved node gone or cordoned, its
   member unreachable or left out), looked at every gather (:meth:`Reserving.review`; the gang
   is then decided again at once, and planned again). A gang placed after its start may run
   past the start of reservations planned after it on its cluster: those are planned again.
4. **Drain horizon** (``ReservationPolicy.horizon_s``, optional; as in the stream simulation,
   :func:`~placer.solver.reservations.horizon_view`): the nodes of one member (the policy's
   ``horizon_cluster``, else the one with the most GPUs) carry the taint
   ``placer.dev/drain-horizon=<member>:NoSchedule`` in every decision, tolerated only by work
   whose expected run time is at most ``horizon_s`` (work without one never), so that member
   empties for a big gang within about that long without evictions; reservations are planned
   on the same view. Elastic growth never takes that member's nodes.
5. **Eviction** (``ReservationPolicy.preempt_after_s``, :meth:`Reserving.forcing`): a gang
   holding a reservation that has waited that long (:func:`waiting_since`) while its start is
   still more than ``preempt_slack_s`` ahead is *due*
   (:func:`~placer.solver.reservation_preemption.due`): the cycle's preemption
   (:mod:`placer.controller.preemption`) evicts for it after the dispatch, among the work
   the queues' evictions (before the dispatch) left. The gang is decided again at the
   moment it becomes due (:meth:`Reserving.review` wakes it once), not after its backoff.
6. **Persistence and visibility**: the reservations are kept in the hub's ConfigMap
   ``placer-reservations`` (:mod:`placer.controller.reservationstore`), read when the controller
   starts acting, so a restart or a new leader keeps them; the gang's hub object gets a
   ``Reserved`` condition (True: the cluster, nodes and start; False once a reservation it held
   is gone and it has none) and a Normal Event ``Reserved``; ``/v1/placements`` lists them;
   ``placer_reservations{cluster}`` counts those held,
   ``placer_reservation_outcomes_total{outcome}`` how they ended.

Times are Unix seconds (``time.time``): reservations outlive the process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from placer.controller.events import EventRecorder
from placer.controller.holdings import held_pods_of
from placer.controller.hubcache import HubCache
from placer.controller.hubwrites import HubWriter
from placer.controller.members import MembersView
from placer.controller.metrics import Metrics
from placer.controller.preemption import placed_work
from placer.controller.records import (
    JSON,
    RESERVED_CONDITION,
    condition_of,
    cut_message,
    record_of,
    status_patch,
)
from placer.controller.reservationstore import Booked, ReservationStore, entry_of
from placer.dispatch import IN_FLIGHT, Ledger, Manifest, Outcome
from placer.dispatch.ledger.sync import LedgerReads
from placer.errors import KubeError
from placer.kube import KubeClient
from placer.model import Fleet, Placement, Workload, WorkloadRef
from placer.objects import annotations_of, generation_of, meta, uid_of
from placer.policy import PlacementPolicy
from placer.solver.charging import charge
from placer.solver.reservation_preemption import deadline, due
from placer.solver.reservations import (
    Reservation,
    ReservationPolicy,
    RunningWork,
    backfill_view,
    expected_runtime,
    expired,
    horizon_view,
    plan,
    qualifies,
    stale,
)
from placer.timestamps import parse_rfc3339, rfc3339

__all__ = [
    "Reserving",
    "describe",
    "reserved_condition",
    "runtime_of",
    "waiting_since",
]

log = logging.getLogger(__name__)

#: ``invalid(ref, obj, reason, text)``: report a hub object that cannot be placed as written.
Invalid = Callable[[WorkloadRef, JSON, str, str], None]


# --------------------------------------------------------------------------------------------
# pure helpers


def runtime_of(obj: Mapping[str, Any]) -> float | None:
    """A hub object's expected run time in seconds (``None``: it gives none).

    Raises:
        ValueError: its annotation or ``spec.activeDeadlineSeconds`` is not a duration (the
            message names which).
    """
    spec = obj.get("spec")
    return expected_runtime(annotations_of(obj), spec if isinstance(spec, Mapping) else None)


def _runtime_or_none(obj: Mapping[str, Any]) -> float | None:
    try:
        return runtime_of(obj)
    except ValueError:
        return None


def waiting_since(obj: Mapping[str, Any], now: float) -> float:
    """Since when a pending hub object waits: the last time its ``Placed`` condition turned
    False (it was placed before and went back to pending: a lost member, a move, an eviction),
    else its creation (``now`` when it says neither)."""
    placed = condition_of(obj) or {}
    created = parse_rfc3339(meta(obj).get("creationTimestamp"))
    since = (
        parse_rfc3339(placed.get("lastTransitionTime")) if placed.get("status") == "False" else None
    )
    known = [t for t in (created, since) if t is not None]
    return min(now, max(known)) if known else now


def describe(reservation: Reservation) -> str:
    """A reservation in words (the condition's and the Event's message)."""
    count = len(reservation.nodes)
    shown = ", ".join(reservation.nodes[:8]) + (", ..." if count > 8 else "")
    return (
        f"holds a reservation on cluster {reservation.cluster} from "
        f"{rfc3339(reservation.start_s)} ({count} node{'s' if count != 1 else ''}: {shown}); "
        f"{reservation.reason}; until then other work uses those nodes only if it is expected "
        "to be done by that time"
    )


def reserved_condition(
    reservation: Reservation | None, why: str, now: float, *, generation: object = None
) -> dict[str, Any]:
    """The ``Reserved`` condition: True describing ``reservation``, or False saying ``why``
    it holds none (reason ``NotReserved``)."""
    condition: dict[str, Any] = {
        "type": RESERVED_CONDITION,
        "status": "True" if reservation is not None else "False",
        "reason": "Reserved" if reservation is not None else "NotReserved",
        "message": cut_message(describe(reservation) if reservation is not None else why),
        "lastTransitionTime": rfc3339(now),
    }
    if isinstance(generation, int):
        condition["observedGeneration"] = generation
    return condition


# --------------------------------------------------------------------------------------------
# the controller's reservations


class Reserving:
    """The controller's reservations (see the module docstring).

    Args:
        policy: who gets reservations, how many, the grace after a start.
        hub: the hub cache (objects, records, decompositions).
        store: where the reservations are kept on the hub.
        writer: writes on hub objects (the ``Reserved`` condition).
        events: the hub's Events.
        metrics: the controller's metrics.
        members: the members (clients, this hub's copies).
        ledger: the in-flight ledger.
        reads: ``reads(cluster, client)``: where a member's pods are read.
        lock: the lock the controller's state objects share.
        clock: Unix seconds.
    """

    def __init__(
        self,
        policy: ReservationPolicy,
        *,
        hub: HubCache,
        store: ReservationStore,
        writer: HubWriter,
        events: EventRecorder,
        metrics: Metrics,
        members: MembersView,
        ledger: Ledger,
        reads: Callable[[str, KubeClient], LedgerReads],
        lock: threading.RLock,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.policy = policy
        self.hub = hub
        self.store = store
        self.writer = writer
        self.events = events
        self.metrics = metrics
        self.members = members
        self.ledger = ledger
        self._reads = reads
        self._lock = lock
        self._clock = clock
        #: held now, in the order they were planned.
        self._held: dict[WorkloadRef, Booked] = {}
        self._loaded = False
        #: the ConfigMap lags what is held (a write failed, or a release not written yet).
        self._dirty = False
        #: gangs to decide again at once (a reservation of theirs ended outside their cycle).
        self._woken: set[WorkloadRef] = set()
        #: a reservation ended without its gang placed since :meth:`loosened` was last asked.
        self._loosened = False
        #: gangs woken at the moment their reservation became due for eviction (once each).
        self._force_woken: set[WorkloadRef] = set()

    # -- reading -----------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        with self._lock:
            return self._loaded

    def held(self) -> list[Booked]:
        """The reservations held, in the order they were planned."""
        with self._lock:
            return list(self._held.values())

    def reservations(self) -> list[Reservation]:
        return [b.reservation for b in self.held()]

    def get(self, ref: WorkloadRef) -> Booked | None:
        with self._lock:
            return self._held.get(ref)

    def document(self) -> list[dict[str, Any]]:
        """The reservations as ``/v1/placements`` lists them."""
        return [entry_of(b) for b in self.held()]

    def load(self) -> bool:
        """Read the kept reservations once (at the first look after acting starts); whether
        they are known (a hub that cannot be read is tried again at the next look, and until
        then no reservation is planned or applied, so that none kept is overwritten)."""
        if self.loaded:
            return True
        try:
            kept = self.store.load()
        except KubeError as err:
            log.warning(
                "reservations not read from the hub (tried again): %s",
                err,
                extra={"event": "reservations-unread"},
            )
            return False
        with self._lock:
            if self._loaded:
                return True
            self._held = {b.ref: b for b in sorted(kept, key=lambda b: b.reservation.planned_s)}
            self._loaded = True
        if kept:
            log.info(
                "%d reservations read from the hub",
                len(kept),
                extra={"event": "reservations-read", "count": len(kept)},
            )
        self._gauge()
        return True

    def fenced(self, fleet: Fleet) -> Fleet:
        """``fleet`` with the reserved nodes tainted and nothing tolerating them: what work
        that is already running may take (elastic growth: it runs on past any start)."""
        fleet = horizon_view(fleet, [], [], self.policy)[0]
        if not self.load():
            return fleet
        held = self.reservations()
        return backfill_view(fleet, [], [], held, self._clock())[0] if held else fleet

    # -- the cycle's decision ----------------------------------------------------------------

    def view(
        self, manifests: Sequence[Manifest], fleet: Fleet, invalid: Invalid
    ) -> tuple[list[Manifest], Fleet]:
        """The manifests and fleet a cycle decides on: reserved nodes tainted, each workload
        tolerating the reservations it may use (module docstring, 1). A manifest whose expected
        run time cannot be read is reported through ``invalid`` and left out."""
        kept: list[Manifest] = []
        runtimes: list[float | None] = []
        for manifest in manifests:
            try:
                runtimes.append(runtime_of(manifest.body))
            except ValueError as err:
                invalid(manifest.ref, dict(manifest.body), "InvalidWorkload", str(err))
                continue
            kept.append(manifest)
        held = self.reservations() if self.load() else []
        if not held and self.policy.horizon_s is None:
            return kept, fleet
        viewed_fleet, workloads = backfill_view(
            fleet, [m.workload for m in kept], runtimes, held, self._clock()
        )
        viewed_fleet, workloads = horizon_view(viewed_fleet, workloads, runtimes, self.policy)
        viewed = []
        for manifest, workload in zip(kept, workloads, strict=True):
            if workload is not manifest.workload:
                decomposition = replace(manifest.decomposition, workload=workload)
                manifest = replace(manifest, decomposition=decomposition)
            viewed.append(manifest)
        return viewed, viewed_fleet

    def after(
        self,
        outcomes: Sequence[Outcome],
        manifests: Mapping[WorkloadRef, Manifest],
        refused: Iterable[WorkloadRef],
        fleet: Fleet,
        policies: Sequence[PlacementPolicy],
        prioritised: Callable[[Workload], Workload] = lambda w: w,
    ) -> None:
        """After a cycle's dispatch (module docstring, 2 and 3): release the reservations of
        the gangs it placed, plan again those that expired, plan new ones for the workloads it
        left pending that qualify; keep them on the hub and write the gangs' conditions.

        ``fleet``: the fleet the cycle decided on, before the reserved nodes were tainted;
        ``refused``: workloads the hub's queues refuse as written, and spread workloads (no
        reservation);
        ``prioritised``: a workload with the priority its priority class gives it.
        """
        if not self.load():
            return
        now = self._clock()
        placed = [o for o in outcomes if o.placed and o.placement is not None]
        skip = set(refused)
        waiting = [
            manifests[o.workload]
            for o in outcomes
            if not o.placed
            and o.state not in ("failed", IN_FLIGHT)
            and o.workload not in skip
            and o.workload in manifests
        ]
        changed = self._placed_now(placed, now)
        changed |= self._expire([m.ref for m in waiting], now)
        made = self._plan(waiting, fleet, placed, manifests, policies, prioritised, now)
        changed |= bool(made)
        if changed:
            self._save()
        for manifest in waiting:  # (held by this cycle: no claim needed)
            self._show(manifest.ref)

    # -- between cycles ----------------------------------------------------------------------

    def review(self, fleet: Fleet) -> set[WorkloadRef]:
        """At every gather (module docstring, 3): release the reservations of gangs placed or
        gone, drop those the fleet changed under, keep the hub's copy current; the gangs to
        decide again at once (a reservation of theirs was dropped, or its start has come)."""
        if not self.load():
            return set()
        now = self._clock()
        changed = False
        with self._lock:
            items = list(self._held.items())
            dirty = self._dirty
        for ref, booked in items:
            obj = self.hub.get(ref)
            if obj is None or uid_of(obj) != booked.uid:
                if obj is not None or self.hub.synced(ref.api_version, ref.kind):
                    changed |= self._end(ref, "gone", "its hub object is gone")
                continue
            if record_of(obj) is not None:
                changed |= self._end(ref, "placed", "its gang is placed")
                continue
            why = stale(booked.reservation, fleet)
            if why is not None:
                changed |= self._end(ref, "replanned", why)
        if changed or dirty:
            self._save()
        self._gauge()
        with self._lock:
            woken, self._woken = self._woken, set()
            started = {r for r, b in self._held.items() if b.reservation.start_s <= now}
        return woken | started | self._due_now(now)

    def forcing(self, waiting: Sequence[Manifest]) -> list[WorkloadRef]:
        """Of ``waiting`` (a cycle's workloads left pending), the gangs whose reservation is due
        for eviction now (module docstring, 4), in the order the reservations were planned;
        none without ``preempt_after_s``."""
        after = self.policy.preempt_after_s
        if after is None or not self.loaded:
            return []
        now = self._clock()
        bodies = {m.ref: m.body for m in waiting}
        return [
            booked.ref
            for booked in self.held()
            if booked.ref in bodies
            and due(
                booked.reservation,
                waiting_since(bodies[booked.ref], now),
                now,
                after,
                self.policy.preempt_slack_s,
            )
        ]

    def forced(self, ref: WorkloadRef, cluster: str, nodes: Iterable[str]) -> None:
        """Running work was evicted for ``ref``'s reservation (module docstring, 4): it now
        holds the nodes the eviction freed, on ``cluster``, from now on — nothing backfills
        there (no run time ends before now), so the room goes to the gang once the victims'
        pods are gone, not to whoever is decided first. It expires as any other (its start
        plus the grace) if the gang still cannot start."""
        now = self._clock()
        with self._lock:
            booked = self._held.get(ref)
            if booked is None:
                return
            before = booked.reservation
            reservation = replace(
                before,
                cluster=cluster,
                nodes=tuple(sorted(set(nodes))),
                start_s=now,
                reason=f"{before.reason}; started by eviction at {rfc3339(now)}",
            )
            self._held[ref] = replace(booked, reservation=reservation)
            self._dirty = True
        log.info(
            "%s: reservation forced, on %s from now (%d nodes)",
            ref,
            cluster,
            len(reservation.nodes),
            extra={"event": "reservation-forced", "workload": str(ref), "cluster": cluster},
        )
        self._save()
        self._show(ref)

    def _due_now(self, now: float) -> set[WorkloadRef]:
        """The gangs whose reservation became due for eviction since the last look (each once
        per reservation): to be decided now, not after their backoff."""
        after = self.policy.preempt_after_s
        if after is None:
            return set()
        found: set[WorkloadRef] = set()
        for booked in self.held():
            obj = self.hub.get(booked.ref)
            if obj is None:
                continue
            since = waiting_since(obj, now)
            when = deadline(booked.reservation, since, after, self.policy.preempt_slack_s)
            if when <= now and booked.ref not in self._force_woken:
                found.add(booked.ref)
        with self._lock:
            self._force_woken = (self._force_woken & set(self._held)) | found
        return found

    def forget(self, ref: WorkloadRef, uid: str) -> bool:
        """The hub object ``ref`` of ``uid`` is gone (the controller's ``forget``, under its
        lock: no I/O here): its reservation is released, the hub's copy written at the next
        look (the caller asks for one soon); whether it held one."""
        with self._lock:
            booked = self._held.get(ref)
            if booked is None or (uid and booked.uid and booked.uid != uid):
                return False
        return self._end(ref, "gone", "its hub object was deleted")

    def loosened(self) -> bool:
        """Whether a reservation ended without its gang placed since the last call: the
        nodes it held are open again, so work kept off them may fit now (the caller makes the
        workloads waiting for room worth a new look)."""
        with self._lock:
            answer, self._loosened = self._loosened, False
            return answer

    # -- inside --------------------------------------------------------------------------------

    def _placed_now(self, placed: Sequence[Outcome], now: float) -> bool:
        """Release the reservations of the gangs the cycle placed; a gang placed after its
        start may overrun the reservations planned after it on its cluster: those end too."""
        changed = False
        for outcome in placed:
            booked = self.get(outcome.workload)
            if booked is None:
                continue
            changed |= self._end(outcome.workload, "placed", f"placed on {outcome.cluster}")
            if now <= booked.reservation.start_s:
                continue
            for later in self.held():
                if (
                    later.reservation.planned_s >= booked.reservation.planned_s
                    and later.reservation.cluster == booked.reservation.cluster
                ):
                    why = f"{booked.ref} started late, at {rfc3339(now)}"
                    changed |= self._end(later.ref, "replanned", why)
        return changed

    def _expire(self, waiting: Sequence[WorkloadRef], now: float) -> bool:
        """Drop the reservations of the waiting gangs whose start (plus the grace) came."""
        changed = False
        for ref in waiting:
            booked = self.get(ref)
            if booked is None:
                continue
            why = expired(booked.reservation, now, self.policy.grace_s)
            if why is not None:
                changed |= self._end(ref, "replanned", why)
        return changed

    def _plan(
        self,
        waiting: Sequence[Manifest],
        fleet: Fleet,
        placed: Sequence[Outcome],
        manifests: Mapping[WorkloadRef, Manifest],
        policies: Sequence[PlacementPolicy],
        prioritised: Callable[[Workload], Workload],
        now: float,
    ) -> dict[WorkloadRef, Reservation]:
        """New reservations for the waiting workloads that qualify (module docstring, 2)."""
        room = self.policy.max_reservations - len(self.held())
        if room <= 0 or not waiting:
            return {}
        candidates: list[tuple[int, float, str, Manifest, Workload]] = []
        for manifest in waiting:
            if self.get(manifest.ref) is not None:
                continue
            workload = prioritised(manifest.workload)
            since = waiting_since(manifest.body, now)
            if qualifies(workload, now - since, self.policy) is None:
                continue
            candidates.append((-workload.priority, since, str(manifest.ref), manifest, workload))
        if not candidates:
            return {}
        candidates.sort(key=lambda c: c[:3])
        placements = [o.placement for o in placed if o.placement is not None]
        future = charge(fleet, placements) if placements else fleet
        running = self._running(now, exclude=list(manifests), placed=placed, manifests=manifests)
        made: dict[WorkloadRef, Reservation] = {}
        for _, since, _, manifest, workload in candidates:
            if room <= 0:
                break
            reason = qualifies(workload, now - since, self.policy) or ""
            runtime = _runtime_or_none(manifest.body)
            # planned on the fleet as the gang's decisions see it (the drain horizon's member
            # only for a gang expected to end within the horizon)
            viewed, (workload,) = horizon_view(future, [workload], [runtime], self.policy)
            reservation = plan(
                workload,
                viewed,
                running,
                now,
                reason=reason,
                runtime_s=runtime,
                held=self.reservations(),
                policies=policies,
                policy=self.policy,
            )
            if reservation is None:
                log.info(
                    "%s qualifies for a reservation, but no member will hold it as far as the "
                    "expected run times tell",
                    manifest.ref,
                    extra={"event": "reservation-none", "workload": str(manifest.ref)},
                )
                continue
            with self._lock:
                self._held[manifest.ref] = Booked(reservation, uid_of(manifest.body))
            made[manifest.ref] = reservation
            room -= 1
            self.metrics.reservation_outcomes.labels("made").inc()
            log.info(
                "%s: reservation on %s from %s",
                manifest.ref,
                reservation.cluster,
                rfc3339(reservation.start_s),
                extra={
                    "event": "reserved",
                    "workload": str(manifest.ref),
                    "cluster": reservation.cluster,
                    "nodes": len(reservation.nodes),
                    "start": rfc3339(reservation.start_s),
                },
            )
            self.events.record(manifest.body, "Normal", "Reserved", describe(reservation))
        return made

    def _running(
        self,
        now: float,
        *,
        exclude: Sequence[WorkloadRef],
        placed: Sequence[Outcome],
        manifests: Mapping[WorkloadRef, Manifest],
    ) -> list[RunningWork]:
        """The running work and its expected ends: what was placed before this cycle (the
        pods its member shows plus what is in flight) and what this cycle placed."""
        held = placed_work(self.hub, self.ledger, exclude=exclude)
        pods = held_pods_of(held, self.members, self.ledger, self._reads)
        work: list[RunningWork] = []
        for item in held:
            mine = pods.get(item.ref)
            if not mine:
                continue
            runtime = _runtime_or_none(item.obj)
            started = item.placed_at or now
            requests: dict[str, int] = {}
            for pod in mine:
                for name, amount in pod.requests.items():
                    requests[name] = requests.get(name, 0) + amount
            placement = Placement(item.ref, item.cluster, tuple(mine), requests)
            work.append(RunningWork(placement, None if runtime is None else started + runtime))
        for outcome in placed:
            if outcome.placement is None or outcome.workload not in manifests:
                continue
            runtime = _runtime_or_none(manifests[outcome.workload].body)
            work.append(RunningWork(outcome.placement, None if runtime is None else now + runtime))
        return work

    def _end(self, ref: WorkloadRef, outcome: str, why: str) -> bool:
        """Release ``ref``'s reservation (``outcome``: placed, gone, replanned)."""
        with self._lock:
            booked = self._held.pop(ref, None)
            if booked is None:
                return False
            self._dirty = True
            if outcome == "replanned":
                self._woken.add(ref)
            if outcome != "placed":
                self._loosened = True
        self.metrics.reservation_outcomes.labels(outcome).inc()
        log.info(
            "%s: reservation on %s released (%s): %s",
            ref,
            booked.reservation.cluster,
            outcome,
            why,
            extra={
                "event": "reservation-released",
                "workload": str(ref),
                "cluster": booked.reservation.cluster,
                "outcome": outcome,
            },
        )
        return True

    def _save(self) -> None:
        """Write the reservations held to the hub (a failure is tried again at the next look)."""
        held = self.held()
        try:
            self.store.save(held)
        except KubeError as err:
            log.warning(
                "reservations not written to the hub (tried again): %s",
                err,
                extra={"event": "reservations-unwritten"},
            )
            with self._lock:
                self._dirty = True
            return
        with self._lock:
            if self.held() == held:
                self._dirty = False
        self._gauge()

    def _gauge(self) -> None:
        counts: dict[str, int] = {}
        for booked in self.held():
            counts[booked.reservation.cluster] = counts.get(booked.reservation.cluster, 0) + 1
        self.metrics.reservations.clear()
        for cluster, count in counts.items():
            self.metrics.reservations.labels(cluster).set(count)

    def _show(self, ref: WorkloadRef) -> None:
        """The gang's ``Reserved`` condition as it should read now: True with its reservation,
        False once a reservation it held ended and it holds none (written only on a change)."""
        obj = self.hub.get(ref)
        if obj is None:
            return
        booked = self.get(ref)
        current = condition_of(obj, RESERVED_CONDITION)
        if booked is None and (current is None or current.get("status") != "True"):
            return
        now = self._clock()
        condition = reserved_condition(
            booked.reservation if booked is not None else None,
            "the reservation it held ended (its start passed, or the fleet changed under it) "
            "and no member offers a start for it now as far as the expected run times tell",
            now,
            generation=generation_of(obj),
        )
        if current is not None and all(
            current.get(k) == condition[k] for k in ("status", "reason", "message")
        ):
            return
        try:
            self.writer.patch_status(ref, obj, status_patch(obj, condition))
        except KubeError as err:
            log.info("%s: Reserved condition not written: %s", ref, err)
