"""Placement cycles: collect, decide together, dispatch, record (the cycle thread).

:class:`DecisionCycle` runs in its own thread. A cycle takes every ready pending object from
the :class:`~placer.controller.pending.PendingQueue` (after the batch window; unschedulable
ones when their backoff allows) and marks it busy in the loop's
:class:`~placer.controller.workqueue.WorkQueue`, reads the members' capacity and syncs the
in-flight ledger — from the watches' caches (:mod:`placer.controller.capacity`: no LIST in
steady state), or by listing every member (``settings.capacity == "list"``) — (a member
whose nodes, pods, ledger or copies of a kind in use cannot be listed or watched is left out,
with its reason: :meth:`~placer.controller.members.MembersView.exclude`), decomposes,
solves in batch, dispatches through :class:`placer.dispatch.Dispatcher` in concurrent parts
(:mod:`placer.controller.fanout`; the parts' re-decisions of refused workloads are made one at
a time) and hands the recording of each outcome on the hub to the worker pool, so that the next
cycle can decide while the hub is written; each object is released to the loop once its outcome
is recorded. Objects that cannot be placed as written are reported once (condition and Event)
until they change. While nothing is pending it gathers every ``resync_interval`` to follow
the members' health and capacity.

With Queue objects on the hub the decision honours them (:func:`placer.solver.fairshare.
solve_fair`, the work placed already booked to its queues: :func:`~placer.controller.
preemption.placed_work`), a workload naming a queue the hub does not define gets
``Placed=False`` reason ``UnknownQueue`` (``UnknownPriorityClass`` for its
``priorityClassName``), and what stays pending may evict placed work
(:class:`~placer.controller.preemption.Preemption`): such a preemptor is recorded
``Placed=False`` reason ``Preempting`` and decided again at once, without backoff. Those
evictions are made before the dispatch, and the decision is then closed in priority order
(:mod:`placer.controller.repair`): a placement holding room that a waiting workload of a higher
priority fits (a victim of an eviction under way) is not dispatched.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

from placer.controller.capacity import MemberCapacity
from placer.controller.events import EventRecorder
from placer.controller.fanout import Part, Redecisions, ensure_namespaces, split_decision
from placer.controller.growth import Grower
from placer.controller.hubcache import HubCache
from placer.controller.hubwrites import HubWriter
from placer.controller.members import MembersView
from placer.controller.metrics import Metrics, unschedulable_reason
from placer.controller.pending import PendingQueue, batch_deadline
from placer.controller.preemption import (
    PREEMPTING,
    Held,
    Preemption,
    RunningCounts,
    placed_again,
    placed_work,
    queue_report,
    waiting_work,
)
from placer.controller.reconcile import group_clusters
from placer.controller.records import (
    ANNOTATION_HUB_UID,
    JSON,
    LABEL_HUB,
    CopyRef,
    as_written,
    describe_error,
    is_own_copy,
    mark_copy,
    placed_condition,
    placed_counts,
    record_of,
    record_patch,
    replicas_annotation,
    status_patch,
)
from placer.controller.repair import close_decision
from placer.controller.reserving import Reserving
from placer.controller.settings import ControllerSettings
from placer.controller.stuck import StuckMover
from placer.controller.workqueue import WorkKey, WorkQueue
from placer.definitions import (
    GroupVersionKind,
)
from placer.dispatch import (
    IN_FLIGHT,
    Dispatcher,
    DispatchOptions,
    DispatchResult,
    Existing,
    Ledger,
    Manifest,
    Outcome,
    new_decision_id,
    sync_cluster,
)
from placer.dispatch.claims import Succession
from placer.dispatch.dependencies import read_from
from placer.dispatch.ledger.sync import LedgerReads, ListedReads
from placer.dispatch.options import Decide, Guard
from placer.dispatch.redecide import queue_guard
from placer.dispatch.spread import dispatch_spread, outcome_shares, spread_annotation, spreads
from placer.errors import (
    ClusterUnreachableError,
    KubeError,
    NoDefinitionError,
    NotFoundError,
    PlacerError,
)
from placer.fleet import ClusterSource, FleetConfig, gather_fleet
from placer.fleet.gather import failure_reason, unavailable
from placer.fleet.livecluster import add_room, usable_room
from placer.kube import KubeClient
from placer.model import LABEL_QUEUE, Cluster, Decision, Fleet, Unplaced, Workload, WorkloadRef
from placer.objects import generation_of, is_deleting, labels_of, name_of, uid_of
from placer.policy import PlacementPolicy
from placer.queues import QueueSet, membership
from placer.solver import solve
from placer.solver.charging import charge
from placer.solver.fairshare import Running, solve_fair
from placer.solver.preempt import Eviction
from placer.stopwatch import Stopwatch
from placer.timestamps import rfc3339

log = logging.getLogger(__name__)

__all__ = ["RECENT_GROUP_SECONDS", "DecisionCycle", "batch_deadline", "more_room"]

#: how long a dispatched group member's cluster is remembered while its hub record is written.
RECENT_GROUP_SECONDS = 120.0
#: why a spread workload waits while the hub has Queues.
SPREAD_UNDER_QUEUES = (
    "spread workloads (a policy's replicaScheduling) are not placed under the hub's Queues yet; "
    "`placer plan` decides them (docs/spread.md)"
)
#: seconds between two updates of the queue gauges at most.
QUEUE_METRICS_SECONDS = 1.0
#: seconds between gathers at most while victims' pods are awaited with ``--capacity list``.
VICTIMS_PROBE_SECONDS = 1.0


def more_room(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]]
) -> bool:
    """Whether any member has more of any resource free (or is newly reachable)."""
    for cluster, free in after.items():
        old = before.get(cluster)
        if old is None:
            return True
        if any(amount > old.get(name, 0) for name, amount in free.items()):
            return True
    return False


class DecisionCycle:
    """Placement cycles (see the module docstring).

    Args:
        settings: the controller's settings.
        config: the member clusters (and the fleet file's accelerator table).
        hub: the hub cache (objects, decompositions, policies).
        members: the members (clients, health, exclusions, copies).
        pending: the objects waiting for a cycle.
        queue: the loop's work queue (objects in a cycle are busy there).
        writer: writes on hub objects.
        ledger: the in-flight ledger.
        succession: the workload claims' succession (``None`` without leader election).
        events: the hub's Events.
        metrics: the controller's metrics.
        policies: the ``--policy`` files' policies (before the hub's).
        submit: runs a function in the worker pool.
        halt: set when the controller stops.
        lock: the lock the state objects share.
        capacity: the members' capacity kept by watches (``None``: each cycle lists them).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        settings: ControllerSettings,
        config: FleetConfig,
        *,
        hub: HubCache,
        members: MembersView,
        pending: PendingQueue,
        queue: WorkQueue[WorkKey],
        writer: HubWriter,
        ledger: Ledger,
        succession: Succession | None,
        events: EventRecorder,
        metrics: Metrics,
        policies: Sequence[PlacementPolicy],
        submit: Callable[..., object],
        halt: threading.Event,
        lock: threading.RLock,
        capacity: MemberCapacity | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.capacity = capacity
        self.config = config
        self.hub = hub
        self.members = members
        self.pending = pending
        self.queue = queue
        self.writer = writer
        self.ledger = ledger
        self.succession = succession
        self.events = events
        self.metrics = metrics
        self.file_policies = tuple(policies)
        self._submit = submit
        self._halt = halt
        self._lock = lock
        self._clock = clock
        self._wake = threading.Event()
        self._fleet: Fleet | None = None
        self._free: dict[str, dict[str, int]] = {}
        self._last_gather = float("-inf")
        #: group -> (cluster, when) of placements dispatched whose hub record may not be
        #: written yet (the hub records are the lasting answer; see ``group_clusters``); only
        #: the cycle thread uses it.
        self._recent_groups: dict[str, tuple[str, float]] = {}
        #: moves placed workloads whose pods their member leaves unschedulable (after each
        #: gather; :mod:`placer.controller.stuck`), when set.
        self.stuck: StuckMover | None = None
        #: evicts placed work for pending work the hub's queues entitle, when set.
        self.preemption: Preemption | None = None
        #: placed elastic workloads at their running counts (queues' usage).
        self.counts = RunningCounts(hub, members)
        self._queue_metrics_at = float("-inf")
        #: grows resizable elastic workloads when room appears, after each gather
        #: (:mod:`placer.controller.growth`), when set.
        self.grower: Grower | None = None
        #: holds reservations for waiting gangs and applies backfill to every decision
        #: (:mod:`placer.controller.reserving`), when set.
        self.reserving: Reserving | None = None

    # -- the thread ------------------------------------------------------------------------------

    def run(self) -> None:
        """The cycle thread: a cycle when objects are ready, a gather every resync interval."""
        try:
            while not self._halt.is_set():
                now = self._clock()
                when = self.next_cycle(now)
                with self._lock:
                    probe_at = self._last_gather + self._probe_interval()
                wait = min(when, probe_at) - now
                if wait > 0:
                    self._wake.wait(timeout=min(wait, 1.0))
                    self._wake.clear()
                    continue
                if self._halt.is_set():
                    return
                if when <= now:
                    self.run_cycle()
                else:
                    self.gather()
        except Exception:
            log.exception("the placement cycle failed", extra={"event": "cycle-failed"})
            raise

    def _probe_interval(self) -> float:
        """Seconds between gathers while nothing is pending: the resync interval — but while
        victims' pods are awaited and the members are listed (``--capacity list``: no pod watch
        says when they go), :data:`VICTIMS_PROBE_SECONDS` at most."""
        resync = self.settings.resync_interval
        if self.capacity is None and self.preemption is not None:
            if self.preemption.watched_clusters():
                return min(resync, VICTIMS_PROBE_SECONDS)
        return resync

    def wake(self) -> None:
        """Look at the pending objects now."""
        self._wake.set()

    def gather_soon(self) -> None:
        """Gather now (a member may be back) rather than at the next resync."""
        with self._lock:
            self._last_gather = float("-inf")
        self._wake.set()

    def next_cycle(self, now: float) -> float:
        """When the next cycle should run (``inf``: nothing to place)."""
        with self._lock:
            return self.pending.next_cycle(now, self.settings.batch_window, self._busy)

    def _busy(self, ref: WorkloadRef) -> bool:
        """Not to be decided now: the loop works on it, or an eviction holds it (a preemptor
        whose victims' pods are still there, a victim whose preemptor is not placed yet)."""
        return self.queue.is_processing(ref) or (
            self.preemption is not None and self.preemption.holds(ref)
        )

    def preemption_over(self, ref: WorkloadRef) -> None:
        """``ref`` is gone: an eviction for it holds nothing any more."""
        if self.preemption is not None:
            self.preemption.placed(ref)
            self.wake()

    def victims_gone(self, cluster: str) -> None:
        """``cluster``'s pods changed (its pod watch, or a gather): a preemptor whose victims'
        pods are all gone now is decided at once (:meth:`~placer.controller.preemption.
        Preemption.pods_changed`)."""
        if self.preemption is None:
            return
        released = self.preemption.pods_changed(cluster, partial(self._pods_left, cluster))
        if not released:
            return
        with self._lock:
            now = self._clock()
            for ref in released:
                self.pending.changed(ref)
                self.pending.add(ref, now)
            self.pending.bump()
        self.wake()

    def _pods_left(self, cluster: str, pods: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of ``pods`` are still on ``cluster``: from its pod watch, else listed."""
        if self.capacity is not None:
            left = self.capacity.pods_left(cluster, pods)
            return set(pods) if left is None else left
        client = self.members.clients.get(cluster)
        if client is None:
            return set(pods)
        reads = ListedReads(client)
        found: set[tuple[str, str]] = set()
        try:
            for namespace in sorted({ns for ns, _ in pods}):
                for pod in reads.pods(namespace):
                    key = (namespace, name_of(pod))
                    if key in pods and (pod.get("status") or {}).get("phase") not in (
                        "Succeeded",
                        "Failed",
                    ):
                        found.add(key)
        except KubeError:
            return set(pods)
        return found

    @property
    def fleet(self) -> Fleet | None:
        """The fleet last gathered, in-flight placements charged (``None`` before a gather)."""
        with self._lock:
            return self._fleet

    # -- a cycle ---------------------------------------------------------------------------------

    def gather(self) -> Fleet:
        """The members' capacity (from the watches' caches, or listed: ``settings.capacity``),
        the ledger synced, health and the capacity epoch updated."""
        now = time.time()
        unreadable: dict[str, str] = {}
        if self.capacity is not None:
            gathered = self._from_caches(self.capacity, now, unreadable)
        else:
            gathered = self._listed(now, unreadable)
        for cluster in gathered.clusters:
            self._set_health(cluster.name, cluster.reachable, cluster.reason)
        fleet = self.members.exclude(gathered, unreadable)
        charged = self.ledger.charge(fleet, now=now)
        free = {c.name: self._room(c, fleet) for c in charged.clusters if c.reachable}
        with self._lock:
            if more_room(self._free, free):
                self.pending.bump()
            self._free = free
            self._fleet = charged
            self._last_gather = self._clock()
        if self.stuck is not None:
            self.stuck.check()
        if self.grower is not None:  # (never onto reserved nodes)
            fenced = self.reserving.fenced(charged) if self.reserving is not None else charged
            self.grower.check(fenced)
        if self.preemption is not None:
            for name in sorted(self.preemption.watched_clusters()):
                self.victims_gone(name)
        if self.reserving is not None:
            woken = self.reserving.review(charged)
            with self._lock:
                for ref in woken:  # decided again now, not after its backoff
                    self.pending.changed(ref)
                if self.reserving.loosened():  # reserved nodes open again
                    self.pending.bump()
        return charged

    def queue_metrics(self) -> None:
        """The queue gauges from the hub's queues, the placed work and the pending objects (the
        loop's housekeeping calls it; at most every :data:`QUEUE_METRICS_SECONDS`)."""
        now = self._clock()
        if now < self._queue_metrics_at:
            return
        self._queue_metrics_at = now + QUEUE_METRICS_SECONDS
        queues = self.hub.queues
        rows = (
            queue_report(self.hub, self.ledger, queues, self.pending.refs(), self.counts)
            if queues is not None
            else []
        )
        self.metrics.set_queues(rows)

    def _room(self, cluster: Cluster, uncharged: Fleet) -> dict[str, int]:
        """``cluster.free()``; for a cluster read from the watches, from the free room they
        keep, adjusted on the nodes the ledger charged (not summed over every node again)."""
        if self.capacity is None:
            return cluster.free()
        base = next((c for c in uncharged.clusters if c.name == cluster.name), None)
        room = self.capacity.room(base) if base is not None else None
        if room is None or base is None or len(base.nodes) != len(cluster.nodes):
            return cluster.free()
        for before, after in zip(base.nodes, cluster.nodes, strict=True):
            if before is not after:
                add_room(room, usable_room(before), -1)
                add_room(room, usable_room(after))
        return room

    def _sync_ledger(
        self,
        source: ClusterSource,
        now: float,
        unreadable: dict[str, str],
        reads: LedgerReads | None = None,
    ) -> None:
        """Sync one member's in-flight ledger (before its pods are read: ``gather_charged``);
        a ledger that cannot be read leaves the member out (``unreadable``)."""
        client = self.members.clients.get(source.name)
        if client is None:
            return
        try:
            entries = sync_cluster(client, now=now, succession=self.succession, reads=reads)
        except ClusterUnreachableError:
            raise
        except KubeError as err:
            problem = failure_reason(err)
            unreadable[source.name] = f"its in-flight ledger cannot be read: {problem}"
            return
        self.ledger.replace_cluster(source.name, entries)

    def _listed(self, now: float, unreadable: dict[str, str]) -> Fleet:
        """Every member listed (``placer.fleet.gather_fleet``), each within its timeout."""
        config = replace(  # (the fleet file's accelerator table counts the members' devices)
            self.config,
            clusters=tuple(
                replace(s, timeout=min(s.timeout, self.settings.gather_timeout))
                for s in self.config.clusters
            ),
        )
        return gather_fleet(
            config, before=partial(self._sync_ledger, now=now, unreadable=unreadable)
        )

    def _from_caches(
        self, capacity: MemberCapacity, now: float, unreadable: dict[str, str]
    ) -> Fleet:
        """Every member as its watches know it (:mod:`placer.controller.capacity`): the
        ledger synced from the caches, then the capacity read (no LIST in steady state)."""
        capacity.first_sync(self.settings.gather_timeout)
        captured_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        clusters = []
        for source in self.config.clusters:
            client = self.members.clients.get(source.name)
            with capacity.holding(source.name):  # (the sync and the read see the same pods)
                if client is not None and not capacity.problem(source.name):
                    reads = capacity.ledger_reads(
                        source.name,
                        client,
                        ledger=self.ledger,
                        workloads=self.members.informer,
                        now=now,
                    )
                    try:
                        self._sync_ledger(source, now, unreadable, reads)
                    except KubeError as err:
                        clusters.append(unavailable(source, failure_reason(err)))
                        continue
                clusters.append(capacity.cluster(source))
        return Fleet(tuple(clusters), captured_at, accelerators=dict(self.config.accelerators_data))

    def _set_health(self, cluster: str, reachable: bool, reason: str) -> None:
        """A member's health as gathered; one back makes every object worth a look."""
        if not self.members.set_health(cluster, reachable, reason):
            return
        if reachable:
            self.pending.bump()
            self.queue.add_all(self.hub.refs())
        else:
            self.queue.wake()

    def run_cycle(self) -> None:
        started = self._clock()
        with self._lock:
            ready, epoch = self.pending.take(self._clock(), self.settings.max_batch, self._busy)
            self.queue.begin(ready)
            objects = {ref: self.hub.get(ref) for ref in ready}
        if not ready:
            return
        handed: set[WorkloadRef] = set()
        try:
            handed = self.decide(ready, objects, epoch)
        finally:
            self._release([r for r in ready if r not in handed])
            self.metrics.cycles.inc()
            log.info(
                "cycle done in %.2fs",
                self._clock() - started,
                extra={"event": "cycle", "count": len(ready), "seconds": self._clock() - started},
            )

    def _release(self, refs: Sequence[WorkloadRef]) -> None:
        """The work on ``refs`` is over: the loop reconciles them again."""
        with self._lock:
            for ref in refs:
                self.queue.done(ref, again=True)

    def _then_release(self, ref: WorkloadRef, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as err:
            log.warning(
                "%s: recording the outcome failed: %s",
                ref,
                err,
                extra={"event": "record-failed", "workload": str(ref)},
            )
        finally:
            self._release([ref])

    def decide(
        self, refs: list[WorkloadRef], objects: Mapping[WorkloadRef, JSON | None], epoch: int
    ) -> set[WorkloadRef]:
        """Decide and dispatch ``refs``; returns those whose outcome is being recorded.

        Recording (hub writes) runs in the worker pool while the next cycle may already
        decide: the dispatched placements are in the ledger, the refs stay busy until recorded.
        """
        stopwatch = Stopwatch(digits=3)
        lap = stopwatch.lap
        fleet = self.gather()
        if self.preemption is not None:  # (the room evictions freed is their preemptors')
            fleet = self.preemption.reserve(fleet, refs)
        lap("gather")
        manifests: list[Manifest] = []
        for ref in refs:
            obj = objects.get(ref)
            if obj is None or is_deleting(obj):
                continue
            try:
                decomposition = self.hub.decompose(obj)
            except NoDefinitionError as err:
                self._invalid_object(ref, obj, "NoDefinition", self._no_definition_text(ref, err))
                continue
            except PlacerError as err:
                self._invalid_object(ref, obj, "InvalidWorkload", describe_error(err))
                continue
            manifest = Manifest(obj, decomposition, source="hub")
            # what its pods name travels with it from the hub (placer.dispatch.dependencies)
            carried = read_from(self.hub.client, manifest)
            manifests.append(replace(manifest, dependencies=carried) if carried else manifest)
        lap("decompose")
        if not manifests:
            return set()
        manifests = self._pin_groups(manifests, fleet)
        gathered = fleet
        if self.reserving is not None:  # reserved nodes only for backfill from here on
            manifests, fleet = self.reserving.view(manifests, fleet, self._invalid_object)
            if not manifests:
                return set()
        policies = (*self.file_policies, *self.hub.policies)
        spread = {m.ref for m in manifests if spreads(m.workload, policies)}
        queues = self.hub.queues
        held: list[Held] = []
        refused: dict[WorkloadRef, tuple[str, str]] = {}
        if queues is None:
            classes = self.hub.priority_classes
            decide = solve
            if spread:  # a copy per cluster (placer.solver.spread; OR-Tools, as solve)
                from placer.solver.spread import solve_spread as decide
            decision = decide(
                [with_class_priority(m.workload, classes) for m in manifests],
                fleet,
                policies=policies,
                solver=self.settings.solver,
                time_limit=self.settings.solve_time_limit,
            )
        else:
            plain = [m for m in manifests if m.ref not in spread]
            held = placed_work(
                self.hub, self.ledger, exclude=[m.ref for m in manifests], counts=self.counts
            )
            fair = solve_fair(
                [m.workload for m in plain],
                fleet,
                queues,
                running=[h.running() for h in held],
                policies=policies,
                solver=self.settings.solver,
                time_limit=self.settings.solve_time_limit,
            )
            decision = fair.decision
            for manifest, member in zip(plain, fair.memberships, strict=True):
                if member.refusal is not None:
                    refused[manifest.ref] = (
                        _refusal_reason(manifest.workload, queues),
                        member.refusal,
                    )
            if spread:  # not decided under queues: they wait, saying so
                decision = replace(
                    decision,
                    unplaced=(
                        *decision.unplaced,
                        *(
                            Unplaced(ref, dict.fromkeys(fleet.names, SPREAD_UNDER_QUEUES))
                            for ref in sorted(spread, key=str)
                        ),
                    ),
                )
                spread = set()
        lap("solve")
        preempting: dict[WorkloadRef, str] = {}
        if self.preemption is not None and queues is not None and self.settings.preemption:
            # the queues' evictions before the dispatch, so that the decision is closed in
            # priority order with their victims waiting (placer.controller.repair)
            preempting = self._reclaim(decision, manifests, refused, fleet, held, queues, policies)
            gone = self.preemption.victims(preempting)
            held = [h for h in held if h.ref not in gone]  # (evicted: pending again)
            lap("preempt")
            decision = self._close(decision, manifests, refused, preempting, fleet, held, queues)
            lap("repair")
        if self.preemption is not None and decision.placements:
            # parked copies of the workloads placed: resumed in place, or deleted first
            by_manifest = {m.ref: m for m in manifests if m.ref not in spread}
            decision, unparked = self.preemption.unpark(decision, by_manifest)
            manifests = [unparked.get(m.ref, m) for m in manifests]
        self.metrics.decision_seconds.observe(decision.summary.seconds)
        decision_id = new_decision_id()
        clients = {
            c.name: self.members.clients[c.name]
            for c in fleet.clusters
            if c.reachable and c.name in self.members.clients
        }
        guard = (
            queue_guard(
                queues, [h.running() for h in held], decision, [m.workload for m in manifests]
            )
            if queues is not None
            else None
        )
        outcomes: list[Outcome] = []
        unplaced: dict[WorkloadRef, dict[str, str]] = {}
        by_ref = {m.ref: m for m in manifests}
        if spread:
            spread_outcomes, _ = dispatch_spread(
                [m for m in manifests if m.ref in spread],
                decision,
                fleet,
                clients,
                self._options(policies, None),
                ledger=self.ledger,
                decision_id=decision_id,
            )
            outcomes += spread_outcomes.values()
            for u in decision.unplaced:
                if u.workload in spread:
                    unplaced[u.workload] = dict(u.reasons)
            for outcome in spread_outcomes.values():
                if outcome.copies and not outcome.placed:
                    unplaced[outcome.workload] = {
                        c.cluster: c.error for c in outcome.copies if c.cluster
                    }
            manifests = [m for m in manifests if m.ref not in spread]
            decision = Decision(
                tuple(p for p in decision.placements if p.workload not in spread),
                tuple(u for u in decision.unplaced if u.workload not in spread),
                decision.summary,
            )
        if manifests:
            whole, whole_reasons = self._dispatch(
                clients, policies, manifests, decision, fleet, decision_id, guard
            )
            outcomes += whole
            unplaced.update(whole_reasons)
        lap("dispatch")
        if self.reserving is not None:
            classes = self.hub.priority_classes
            self.reserving.after(
                outcomes,
                by_ref,
                [*refused, *(r for r, m in by_ref.items() if spreads(m.workload, policies))],
                gathered,
                policies,
                lambda w: with_class_priority(w, classes),
            )
            if self.reserving.loosened():  # reserved nodes open again
                self.pending.bump()
            lap("reserve")
        if self.preemption is not None:  # (after the reservations: those due evict)
            preempting.update(
                self._preempt(outcomes, by_ref, refused, fleet, held, queues, policies)
            )
            lap("preempt-reserved")
        placed = sum(1 for o in outcomes if o.placed)
        log.info(
            "decision %s: %d placed, %d not",
            decision_id,
            placed,
            len(outcomes) - placed,
            extra={
                "event": "decision",
                "decision": decision_id,
                "placed": placed,
                "unplaced": len(outcomes) - placed,
                "seconds": decision.summary.seconds,
            },
        )
        now = self._clock()
        for outcome in outcomes:
            group = by_ref[outcome.workload].workload.group
            if outcome.placed and outcome.cluster and group:
                self._recent_groups[group] = (outcome.cluster, now)
        handed: set[WorkloadRef] = set()
        for outcome in outcomes:
            manifest = by_ref[outcome.workload]
            for attempt in outcome.attempts:
                self.metrics.dispatch_errors.labels(
                    attempt.cluster or "?", attempt.reason or str(attempt.code or "Error")
                ).inc()
            work: Callable[[], None]
            tried = {a.cluster for a in outcome.attempts if a.cluster}
            if outcome.cluster:
                tried.add(outcome.cluster)
            tried |= {c.cluster for c in outcome.copies if c.cluster}
            if tried:  # where a copy may be, whatever the hub ends up recording
                with self._lock:
                    if self.hub.get(manifest.ref) is not None:
                        self.members.dispatched(uid_of(manifest.body), tried)
            if outcome.placed and outcome.cluster:
                for copy in outcome.copies or (outcome,):
                    self._remember_copy(copy, manifest)
                work = partial(self._record_placed, manifest, outcome, decision_id)
            else:
                reasons = unplaced.get(outcome.workload, {})
                why = refused.get(outcome.workload)
                if outcome.workload in preempting:
                    why = (PREEMPTING, preempting[outcome.workload])
                work = partial(self._record_unplaced, manifest, outcome, reasons, epoch, why)
            self._submit(self._then_release, outcome.workload, work)
            handed.add(outcome.workload)
        log.info(
            "decision %s dispatched",
            decision_id,
            extra={"event": "cycle-timings", "decision": decision_id, "timings": stopwatch.timings},
        )
        return handed

    def _reclaim(
        self,
        decision: Decision,
        manifests: Sequence[Manifest],
        refused: Mapping[WorkloadRef, tuple[str, str]],
        fleet: Fleet,
        held: Sequence[Held],
        queues: QueueSet,
        policies: Sequence[PlacementPolicy],
    ) -> dict[WorkloadRef, str]:
        """The queues' evictions for the workloads the decision left pending (not refused by
        their queues, not spread: those wait whatever is evicted), then
        (``settings.rebalance``) fair-share rebalancing moves — one plan, before the dispatch,
        on the fleet charged with what the decision placed (:mod:`placer.controller.
        preemption`); per preemptor whose victims were evicted, what it evicted in words."""
        assert self.preemption is not None
        by_ref = {m.ref: m for m in manifests}
        left = self._left_pending(decision, manifests, refused)
        if not left:
            return {}
        placed = [p for p in decision.placements if p.workload in by_ref]
        rebalance = self.settings.rebalance
        others = (  # (the work waiting outside this cycle: the queues' demand)
            [w for w, _ in waiting_work(self.hub, self.pending.refs()) if w.ref not in by_ref]
            if rebalance is not None
            else []
        )
        evicted = self.preemption.run(
            left,
            charge(fleet, placed),
            held,
            [Running(by_ref[p.workload].workload, p.cluster) for p in placed],
            queues,
            policies,
            time_limit=self.settings.solve_time_limit,
            prioritised=lambda w: with_class_priority(w, queues),
            rebalance=rebalance,
            pending=others,
        )
        if evicted:  # (as _preempt: pods that went while the copies were being suspended)
            for name in sorted(self.preemption.watched_clusters()):
                self.victims_gone(name)
        return evicted

    def _left_pending(
        self,
        decision: Decision,
        manifests: Sequence[Manifest],
        refused: Mapping[WorkloadRef, tuple[str, str]],
    ) -> list[Workload]:
        """The batch's workloads ``decision`` left pending that may take room: not refused by
        their queues, not spread (under queues those wait whatever the room)."""
        pending = {u.workload for u in decision.unplaced}
        policies = (*self.file_policies, *self.hub.policies)
        return [
            m.workload
            for m in manifests
            if m.ref in pending and m.ref not in refused and not spreads(m.workload, policies)
        ]

    def _close(
        self,
        decision: Decision,
        manifests: Sequence[Manifest],
        refused: Mapping[WorkloadRef, tuple[str, str]],
        preempting: Mapping[WorkloadRef, str],
        fleet: Fleet,
        held: Sequence[Held],
        queues: QueueSet,
    ) -> Decision:
        """The decision closed in priority order before it is dispatched
        (:mod:`placer.controller.repair`): waiting, the batch's workloads left pending but
        this cycle's preemptors, those refused and spread ones (they wait under queues), and
        the victims of the evictions under way still pending on the hub."""
        assert self.preemption is not None
        policies = (*self.file_policies, *self.hub.policies)
        batch = {m.ref: m.workload for m in manifests}
        waiting = [
            w for w in self._left_pending(decision, manifests, refused) if w.ref not in preempting
        ]
        gone = self.preemption.victims()
        for ref in sorted(gone - set(batch), key=str):
            obj = self.hub.get(ref)
            if obj is None or is_deleting(obj) or record_of(obj) is not None:
                continue  # gone, or placed again
            try:
                waiting.append(self.hub.decompose(obj).workload)
            except PlacerError:
                continue
        closed = close_decision(
            decision,
            fleet,
            batch,
            waiting,
            queues,
            running=[h.running() for h in held if h.ref not in gone],
            policies=policies,
        )
        for ref, why in closed.withheld.items():
            log.info(
                "%s: not dispatched: %s",
                ref,
                why,
                extra={"event": "priority-repair", "workload": str(ref)},
            )
        return closed.decision

    def _preempt(
        self,
        outcomes: Sequence[Outcome],
        manifests: Mapping[WorkloadRef, Manifest],
        refused: Mapping[WorkloadRef, tuple[str, str]],
        fleet: Fleet,
        held: Sequence[Held],
        queues: QueueSet | None,
        policies: Sequence[PlacementPolicy],
    ) -> dict[WorkloadRef, str]:
        """Evictions for the gangs of the cycle left pending after the dispatch whose
        reservation is due for eviction (:mod:`placer.controller.preemption`), on the fleet
        charged with what the cycle placed, among the work the queues' evictions before the
        dispatch (:meth:`_reclaim`) left; with Queues on the hub the queues' guarantee
        kept."""
        assert self.preemption is not None
        left = [
            manifests[o.workload]
            for o in outcomes
            if not o.placed and o.state not in ("failed", IN_FLIGHT) and o.workload not in refused
        ]
        forced = self.reserving.forcing(left) if self.reserving is not None else []
        if not left or not forced:
            return {}
        if queues is None:  # (the decision booked no placed work: no queues to book it to)
            held = placed_work(self.hub, self.ledger, exclude=list(manifests), counts=self.counts)
        placed = [o for o in outcomes if o.placed and o.cluster]
        charged = charge(fleet, [o.placement for o in placed if o.placement is not None])
        classes = queues if queues is not None else self.hub.priority_classes
        evicted = self.preemption.run(
            [m.workload for m in left],
            charged,
            held,
            [Running(manifests[o.workload].workload, o.cluster or "") for o in placed],
            queues,
            policies,
            time_limit=self.settings.solve_time_limit,
            forced=[manifests[ref].workload for ref in forced],
            queue_preemption=False,
            prioritised=lambda w: with_class_priority(w, classes),
            on_forced=self._forced,
        )
        # pods that went while their copies were being suspended, before the evictions were
        # recorded: their watch events released no one, and no later event may come
        if evicted:
            for name in sorted(self.preemption.watched_clusters()):
                self.victims_gone(name)
        return evicted

    def _forced(self, ref: WorkloadRef, eviction: Eviction) -> None:
        """Work was evicted for ``ref``'s reservation: it holds the nodes freed from now on."""
        if self.reserving is not None:
            nodes = {pod.node for pod in eviction.placement.pods}
            self.reserving.forced(ref, eviction.cluster, nodes)

    def _pin_groups(self, manifests: list[Manifest], fleet: Fleet) -> list[Manifest]:
        """Pin new members of a ``placer.dev/group`` to the cluster of members already placed.

        The hub records say where each group went (:func:`group_clusters`); placements
        dispatched in the last ``RECENT_GROUP_SECONDS`` whose record is still being written
        count too. A member that carries its own ``placer.dev/cluster`` pin keeps it.
        """
        reachable = [c.name for c in fleet.clusters if c.reachable]
        where = group_clusters(self.hub.objects(), reachable)
        now = self._clock()
        for group, (cluster, when) in list(self._recent_groups.items()):
            if now - when > RECENT_GROUP_SECONDS:
                del self._recent_groups[group]
            elif cluster in reachable:
                where.setdefault(group, cluster)
        pinned: list[Manifest] = []
        for manifest in manifests:
            workload = manifest.workload
            target = where.get(workload.group or "")
            if target and workload.pinned_cluster is None:
                workload = replace(workload, pinned_cluster=target)
                decomposition = replace(manifest.decomposition, workload=workload)
                manifest = replace(manifest, decomposition=decomposition)
            pinned.append(manifest)
        return pinned

    def _dispatch(
        self,
        clients: Mapping[str, KubeClient],
        policies: Sequence[PlacementPolicy],
        manifests: Sequence[Manifest],
        decision: Decision,
        fleet: Fleet,
        decision_id: str,
        guard: Guard | None = None,
    ) -> tuple[list[Outcome], dict[WorkloadRef, dict[str, str]]]:
        """Carry ``decision`` out in concurrent parts (:mod:`placer.controller.fanout`);
        ``guard``: the clusters re-decisions leave out (a decision under queues)."""
        parts = split_decision(decision, manifests, fleet, self.settings.dispatch_parts)
        if self.settings.create_namespaces and len(parts) > 1:
            ensure_namespaces(clients, decision.placements)
        redecisions = Redecisions(
            policies=policies,
            solver=self.settings.solver,
            time_limit=self.settings.solve_time_limit,
        )

        def run(index: int, part: Part) -> DispatchResult:
            options = self._options(
                policies, redecisions.for_part(index) if len(parts) > 1 else None, guard
            )
            dispatcher = Dispatcher(clients, options, ledger=self.ledger)
            return dispatcher.dispatch(
                list(part.manifests), part.decision, part.fleet, decision_id=decision_id
            )

        if len(parts) == 1:
            results = [run(0, parts[0])]
        else:
            with ThreadPoolExecutor(len(parts), thread_name_prefix="placer-part") as pool:
                results = list(pool.map(run, range(len(parts)), parts))
        outcomes = [o for r in results for o in r.outcomes]
        unplaced = {u.workload: dict(u.reasons) for r in results for u in r.decision.unplaced}
        return outcomes, unplaced

    def _options(
        self,
        policies: Sequence[PlacementPolicy],
        decide: Decide | None,
        guard: Guard | None = None,
    ) -> DispatchOptions:
        """How the controller dispatches: resumed, marked as this hub's copies, claims taken
        with the Lease's succession, this hub's own copies left to its informers; ``guard``:
        the clusters re-decisions leave out (a decision under queues)."""
        return DispatchOptions(
            policies=tuple(policies),
            create_namespaces=self.settings.create_namespaces,
            in_flight_ttl=self.settings.ledger_ttl,
            resume=True,
            transform=self._mark,
            solver=self.settings.solver,
            time_limit=self.settings.solve_time_limit,
            succession=self.succession,
            own_copy=self._own_copy,
            copy_selector=f"{LABEL_HUB}!={self.settings.hub}",
            decide=decide,
            guard=guard,
            schedulers=self.config.schedulers,
        )

    def _mark(self, body: JSON, manifest: Manifest) -> JSON:
        """Mark a copy as this hub's copy of the hub object (``Dispatcher`` transform)."""
        return mark_copy(body, self.settings.hub, uid_of(manifest.body), labels_of(manifest.body))

    def _own_copy(self, manifest: Manifest, existing: Existing) -> bool:
        """Whether a copy found on a member is this hub's copy of the hub object (the marks
        of :meth:`_mark`; ``Dispatcher`` own_copy): a copy placed by ``placer submit`` or by
        another hub is not adopted by a dispatch."""
        return is_own_copy(existing.object, self.settings.hub, uid_of(manifest.body))

    def _no_definition_text(self, ref: WorkloadRef, err: NoDefinitionError) -> str:
        gvk = GroupVersionKind.from_api_version(ref.api_version, ref.kind)
        problem = self.hub.definitions.uncovered.get(gvk)
        return problem or describe_error(err)

    def _remember_copy(self, outcome: Outcome, manifest: Manifest) -> None:
        """Put the applied copy in the member cache at once (its watch event follows)."""
        cluster = outcome.cluster or ""
        ref = outcome.workload
        if outcome.record is None:
            return
        # what the loop reads of a copy: identity, marks, record (the spec is not needed)
        stub: JSON = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "metadata": {
                "name": ref.name,
                "namespace": ref.namespace,
                "uid": outcome.uid,
                "labels": {**outcome.record.labels(), LABEL_HUB: self.settings.hub},
                "annotations": {
                    **outcome.record.annotations(),
                    ANNOTATION_HUB_UID: uid_of(manifest.body),
                },
            },
        }
        self.members.remember(cluster, ref, stub)

    # -- outcomes (worker threads) ---------------------------------------------------------------

    def _record_placed(self, manifest: Manifest, outcome: Outcome, decision_id: str) -> None:
        ref = manifest.ref
        cluster = outcome.cluster or ""
        record = outcome.record
        placed_at = record.placed_at if record else rfc3339()
        obj = dict(manifest.body)
        shares = outcome_shares(outcome, manifest.workload) if outcome.copies else None
        spread = spread_annotation(shares, manifest) if shares is not None else None
        replicas = (
            replicas_annotation(manifest.workload, placed_counts(outcome.placement.pods))
            if outcome.placement is not None and not outcome.copies
            else None
        )
        try:
            obj = self.writer.patch_meta(
                ref,
                obj,
                lambda o: record_patch(o, cluster, decision_id, placed_at, spread, replicas),
            )
        except NotFoundError:
            log.info("%s: deleted on the hub while it was dispatched", ref)
            self.queue.add(CopyRef.on(cluster, ref))
            return
        tried = "; ".join(f"{a.cluster}: {a.error}" for a in outcome.attempts)
        how = f"placed by decision {decision_id}"
        if tried:
            how += f" after failures elsewhere ({tried})"
        condition = placed_condition(
            True,
            "Placed",
            f"cluster {cluster}: {how}",
            time.time(),
            generation=generation_of(manifest.body),
        )
        obj = self.writer.patch_status(
            ref, obj, status_patch(obj, condition, placed_again(obj, cluster, time.time()))
        )
        parts = []
        for copy in outcome.copies or (outcome,):
            placement = copy.placement
            pods = placement.pods if placement else ()
            gpus = sum(p.requests.get("nvidia.com/gpu", 0) for p in pods)
            parts.append(f"cluster {copy.cluster}: {len(pods)} pods, {gpus} GPUs")
        self.events.record(obj, "Normal", "Placed", f"{'; '.join(parts)} ({how})")
        now = self._clock()
        with self._lock:
            first = self.hub.first_seen(ref)
            self.pending.placed(ref)
            if self.preemption is not None:
                self.preemption.placed(ref)
        self.metrics.placements.labels(cluster).inc()
        self.metrics.latency.observe(max(0.0, now - (now if first is None else first)))
        log.info(
            "%s placed on %s",
            ref,
            cluster,
            extra={
                "event": "placed",
                "workload": str(ref),
                "cluster": cluster,
                "decision": decision_id,
            },
        )

    def _record_unplaced(
        self,
        manifest: Manifest,
        outcome: Outcome,
        reasons: dict[str, str],
        epoch: int,
        why: tuple[str, str] | None = None,
    ) -> None:
        """``why``: the condition's reason and message when the queues say it (an unknown
        queue, an eviction for it under way) rather than the solver's reasons."""
        ref = manifest.ref
        failed = outcome.state == "failed"
        in_flight = outcome.state == IN_FLIGHT  # another placer process holds its claim
        if reasons and not in_flight:
            detail = "; ".join(f"{c}: {t}" for c, t in reasons.items())
            text = f"no cluster can run it now: {detail}"
        else:
            text = outcome.error or "no cluster can run it now"
        if failed and outcome.error and outcome.error not in text:
            text = f"{outcome.error}; {text}"
        reason = "InFlight" if in_flight else "DispatchFailed" if failed else "Unschedulable"
        category = reason if in_flight or failed else unschedulable_reason(reasons)
        preempting = why is not None and why[0] == PREEMPTING
        if why is not None and not (in_flight or failed):
            reason, text = why
            category = reason
        obj = dict(manifest.body)
        condition = placed_condition(
            False, reason, text, time.time(), generation=generation_of(obj)
        )
        with self._lock:
            current = self.hub.get(ref)
            if current is None:
                return  # deleted meanwhile
            if preempting:  # decided again once its victims' pods are gone, without backoff
                self.pending.changed(ref)
                self.pending.add(ref, self._clock())
            else:
                self.pending.failed(ref, self._clock(), epoch, room=not in_flight)
                if self.preemption is not None:
                    self.preemption.decided(ref)
        if not in_flight and not preempting:
            self.metrics.unschedulable.labels(category).inc()
        try:
            current = self.hub.get(ref) or obj
            self.writer.patch_status(ref, current, status_patch(current, condition))
        except NotFoundError:
            return
        if not preempting:  # (the eviction's own Event said it)
            self.events.record(obj, "Normal" if in_flight else "Warning", reason, text)
        log.info(
            "%s not placed: %s",
            ref,
            text,
            extra={"event": "unschedulable", "workload": str(ref), "reason": category},
        )

    def _invalid_object(self, ref: WorkloadRef, obj: JSON, reason: str, text: str) -> None:
        """A hub object that cannot be placed as written: condition, Event, no retry."""
        self.pending.invalid(ref, as_written(obj))
        self.metrics.invalid.labels(reason).inc()
        log.warning(
            "%s cannot be placed: %s",
            ref,
            text,
            extra={"event": "invalid-object", "workload": str(ref), "reason": reason},
        )
        condition = placed_condition(
            False, reason, text, time.time(), generation=generation_of(obj)
        )
        try:
            self.writer.patch_status(ref, obj, status_patch(obj, condition))
        except KubeError as err:
            log.info("%s: condition not written: %s", ref, err)
        self.events.record(obj, "Warning", reason, text)


def _refusal_reason(workload: Workload, queues: QueueSet) -> str:
    """The condition reason of a workload its queues refuse as written: ``UnknownQueue`` (its
    ``placer.dev/queue`` names no Queue on the hub) or ``UnknownPriorityClass``."""
    name = workload.labels.get(LABEL_QUEUE)
    return "UnknownQueue" if name is not None and name not in queues else "UnknownPriorityClass"


def with_class_priority(workload: Workload, classes: QueueSet) -> Workload:
    """``workload`` with the priority its ``priorityClassName`` has among the hub's
    PriorityClasses (or the global default class's), unless ``placer.dev/priority`` sets one:
    the priority a decision without queues honours too (:func:`placer.queues.membership`)."""
    if not classes.classes:
        return workload
    priority = membership(workload, classes).priority
    return workload if priority == workload.priority else replace(workload, priority=priority)
