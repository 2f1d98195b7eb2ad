"""The placement controller: watches the hub, decides in cycles, dispatches, mirrors, fails over.

:class:`Controller` composes explicit state objects, each with its own small API and tests:

* :class:`~placer.controller.hubcache.HubCache` — the hub's objects, their decompositions, the
  hub's definitions and policies, the hub's informers;
* :class:`~placer.controller.members.MembersView` — the members' clients, health and
  exclusions, this hub's copies there (informers, phases), where a copy may be unseen and
  which objects wait for which member;
* :class:`~placer.controller.workqueue.WorkQueue` — the loop's queue (client-go's rules: dedup,
  one worker per key, delayed adds, per-key backoff of failed actions);
* :class:`~placer.controller.pending.PendingQueue` — the objects waiting for a placement cycle,
  their unschedulable backoff and the capacity epoch;
* :class:`~placer.controller.capacity.MemberCapacity` — the members' capacity and in-flight
  ledgers, kept by watches (``settings.capacity == "watch"``, the default);

with the pure rules (:mod:`~placer.controller.reconcile`, :mod:`~placer.controller.records`),
the hub writes (:class:`~placer.controller.hubwrites.HubWriter`), the single-object actions
(:class:`~placer.controller.actions.Actions`), the loop
(:class:`~placer.controller.reconciler.Reconciler`) and the placement cycles
(:class:`~placer.controller.cycles.DecisionCycle`). It owns the threads, wires the informers'
callbacks to the state objects, reads the hub's definitions and policies, and serves the HTTP
documents.

**One lock.** The state objects share one lock (an ``RLock``), which each takes for its own
methods; the few steps that span several of them — forgetting a hub object everywhere, taking
a batch for a cycle, keeping state about an object only while it is still on the hub — hold it
across. Nothing blocks on I/O while holding it.

Threads:

* **informers** — one per catalog kind on the hub (every object, so that hub PlacementPolicies
  can opt objects in), one for hub definitions, one for hub policies, and one per member and
  kind in use for this hub's copies (label ``placer.dev/hub``), and five per member for its
  capacity (:mod:`~placer.controller.capacity`); their callbacks only update the caches and
  queue work;
* the **loop** (:class:`~placer.controller.reconciler.Reconciler`) — takes the queue's ready
  keys: reconciles each hub object on what the caches hold, puts objects to place in the
  pending queue and hands every other action to the worker pool (the object stays busy until
  that work ends), and judges queued member copies (a stale one is deleted);
* the **cycle** thread (:class:`~placer.controller.cycles.DecisionCycle`) — decides every
  ready pending object in one batch, dispatches, records the outcomes through the worker pool;
* **leader election** and the **HTTP server** (probes, metrics, read-only API).

A hub object that is gone leaves every queue and cache in one step (:meth:`Controller.forget`).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from placer.controller.actions import Actions
from placer.controller.capacity import MemberCapacity
from placer.controller.cycles import DecisionCycle
from placer.controller.events import EventRecorder
from placer.controller.growth import Grower
from placer.controller.hubcache import HubCache
from placer.controller.hubconfig import (
    DEFINITION_KINDS,
    POLICY_KIND,
    PRIORITY_CLASS_KIND,
    QUEUE_KIND,
    definitions_from_hub,
    policies_from_hub,
    queues_from_hub,
)
from placer.controller.hubwrites import HubWriter
from placer.controller.informer import Informer
from placer.controller.leader import LeaderElector
from placer.controller.members import MembersView
from placer.controller.metrics import Metrics
from placer.controller.pending import PendingQueue
from placer.controller.preemption import Preemption
from placer.controller.reconcile import Backoff
from placer.controller.reconciler import Reconciler
from placer.controller.records import (
    JSON,
    CopyRef,
    condition_of,
    hub_uid_of,
    key_of,
    record_of,
)
from placer.controller.reservationstore import ReservationStore
from placer.controller.reserving import Reserving
from placer.controller.server import UnavailableError
from placer.controller.settings import ControllerSettings
from placer.controller.stuck import StuckMover
from placer.controller.workqueue import WorkKey, WorkQueue
from placer.definitions import Catalog
from placer.dispatch import Ledger
from placer.dispatch.claims import Succession
from placer.dispatch.ledger.sync import LedgerReads, ListedReads
from placer.errors import PlacerError
from placer.fleet import FleetConfig
from placer.kube import ClientSettings, KubeClient, WatchSettings
from placer.model import WorkloadRef
from placer.objects import generation_of, labels_of, name_key, uid_of
from placer.policy import PlacementPolicy
from placer.snapshot import fleet_to_dict
from placer.timestamps import rfc3339

log = logging.getLogger(__name__)

__all__ = ["Controller"]

#: seconds before a hub object whose reconcile raised is looked at again.
RECONCILE_RETRY = 5.0
#: seconds between the loop's housekeeping (failover check, gauges) at most.
HOUSEKEEPING = 0.25
#: seconds before a copy is judged again while its kind is not listed on the hub yet.
JUDGE_LATER = 0.25


class Controller:
    """The placement controller (see the module docstring).

    Args:
        hub: a client for the hub cluster.
        fleet: the member clusters.
        settings: timings, sizes, names.
        catalog: definitions before the hub's own (default: the built-in catalog); counting
            accelerators with the fleet file's table when ``fleet`` has one.
        policies: PlacementPolicies from files; applied before the hub's.
        metrics: where to count (default: a fresh registry).
        clock: monotonic clock.
    """

    def __init__(
        self,
        hub: KubeClient,
        fleet: FleetConfig,
        settings: ControllerSettings,
        *,
        catalog: Catalog | None = None,
        policies: Sequence[PlacementPolicy] = (),
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hub = hub
        self.config = fleet
        self.settings = settings
        self.metrics = metrics or Metrics()
        self._clock = clock
        self.ledger = Ledger()
        #: elected through the hub's Lease: claims of the controllers before it protect nothing
        self.succession = (
            Succession(
                f"{settings.hub}/{settings.lease.namespace}/{settings.lease.name}",
                f"placer controller {settings.identity} ({secrets.token_hex(4)})",
            )
            if settings.leader_election
            else None
        )
        self.events = EventRecorder(hub, instance=settings.identity)
        self._lock = threading.RLock()
        self._halt = threading.Event()
        self._lost = threading.Event()
        self._started = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._elector: LeaderElector | None = None
        base = catalog if catalog is not None else Catalog.builtin()
        if fleet.accelerators_data:  # the fleet file's table, as `placer plan --fleet` counts
            base = base.with_accelerators(fleet.accelerators)
        self.hub_cache = HubCache(
            hub,
            base,
            ignored_namespaces=(*settings.ignored_namespaces, settings.lease.namespace),
            discovery_interval=settings.discovery_interval,
            clock=clock,
            lock=self._lock,
        )
        self.members = MembersView(
            fleet,
            settings.hub,
            self.metrics,
            on_copy=self._on_copy,
            on_state=self._on_member_state,
            discovery_interval=settings.discovery_interval,
            retry_interval=max(1.0, min(10.0, settings.grace_period / 4)),
            clock=clock,
            lock=self._lock,
        )
        self.queue: WorkQueue[WorkKey] = WorkQueue(
            clock=clock, rate_limit=Backoff(2.0, 60.0), lock=self._lock
        )
        self.pending = PendingQueue(
            Backoff(settings.backoff.initial, settings.backoff.maximum), lock=self._lock
        )
        self.writer = HubWriter(hub, self.hub_cache, on_gone=self.forget)
        #: the members' capacity kept by watches (``None``: each cycle lists the members).
        self.capacity = (
            MemberCapacity(
                fleet,
                fleet.accelerators,
                on_state=self._on_capacity_state,
                on_change=lambda cluster: self.cycle.victims_gone(cluster),
                discovery_interval=settings.discovery_interval,
                retry_interval=max(1.0, min(10.0, settings.grace_period / 4)),
            )
            if settings.capacity == "watch"
            else None
        )
        self.cycle = DecisionCycle(
            settings,
            fleet,
            hub=self.hub_cache,
            members=self.members,
            pending=self.pending,
            queue=self.queue,
            writer=self.writer,
            ledger=self.ledger,
            succession=self.succession,
            events=self.events,
            metrics=self.metrics,
            policies=policies,
            submit=self._submit,
            halt=self._halt,
            lock=self._lock,
            capacity=self.capacity,
            clock=clock,
        )
        self.actions = Actions(
            settings,
            writer=self.writer,
            hub=self.hub_cache,
            members=self.members,
            ledger=self.ledger,
            events=self.events,
            metrics=self.metrics,
            fleet=lambda: self.cycle.fleet,
        )
        self.cycle.stuck = StuckMover(
            hub=self.hub_cache,
            members=self.members,
            writer=self.writer,
            ledger=self.ledger,
            events=self.events,
            policies=policies,
            claim=self._claim_for_move,
            release=lambda ref: self.queue.done(ref, again=True),
            rescheduled=lambda cluster: self.metrics.rescheduled.labels(cluster).inc(),
            pending_pods=self._pending_pods,
        )
        self.cycle.preemption = Preemption(
            hub=self.hub_cache,
            members=self.members,
            writer=self.writer,
            ledger=self.ledger,
            events=self.events,
            reads=self._member_reads,
            evict_copy=self.actions.evict_copy,
            delete_copy=lambda ref, cluster: self.actions.delete_copy(
                ref, cluster, reason="replaced: placed again elsewhere"
            ),
            remember=self.members.remember,
            claim=self._claim_for_move,
            release=lambda ref: self.queue.done(ref, again=True),
            preempted=lambda reason: self.metrics.preemptions.labels(reason).inc(),
            clock=clock,
        )
        self.cycle.grower = Grower(
            hub=self.hub_cache,
            members=self.members,
            ledger=self.ledger,
            events=self.events,
            claim=self._claim_for_move,
            release=lambda ref: self.queue.done(ref, again=True),
            writer=self.writer,
        )
        if settings.reservations is not None:
            self.cycle.reserving = Reserving(
                settings.reservations,
                hub=self.hub_cache,
                store=ReservationStore(hub, settings.lease.namespace),
                writer=self.writer,
                events=self.events,
                metrics=self.metrics,
                members=self.members,
                ledger=self.ledger,
                reads=self._member_reads,
                lock=self._lock,
            )
        self.reconciler = Reconciler(
            settings,
            hub=self.hub_cache,
            members=self.members,
            queue=self.queue,
            pending=self.pending,
            cycle=self.cycle,
            actions=self.actions,
            writer=self.writer,
            metrics=self.metrics,
            forget=self.forget,
            submit=self._submit,
            halt=self._halt,
            lock=self._lock,
            clock=clock,
        )

    # -- running ---------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> int:
        """Campaign, then act while leading, until ``stop`` is set or leadership is lost.

        Returns 0 after ``stop``, 1 when leadership was lost (the process should exit and be
        restarted as a candidate, as client-go controllers do).
        """
        self._open_members()
        self._started.set()
        if self.settings.leader_election:
            self._elector = LeaderElector(
                self.hub,
                self.settings.lease,
                self.settings.identity,
                on_started=self.queue.wake,
                on_stopped=self._on_lost,
            )
            self._elector.start()
            while not stop.is_set() and not self._elector.wait_leading(0.1):
                pass
            if stop.is_set():
                self._elector.stop()
                self.members.close()
                return 0
        try:
            self._act(stop)
        finally:
            self._shutdown()
        return 1 if self._lost.is_set() and not stop.is_set() else 0

    @property
    def leading(self) -> bool:
        """Whether this replica acts now."""
        if self._elector is None:
            return self._started.is_set() and not self._halt.is_set()
        return self._elector.leading

    def _on_lost(self) -> None:
        self._lost.set()
        self._halt.set()
        self.cycle.wake()
        self.queue.wake()

    def _open_members(self) -> None:
        watch = WatchSettings(
            server_timeout=60, reconnect_backoff=0.5, max_reconnects=2, allow_bookmarks=True
        )
        self.members.open(
            ClientSettings(
                request_timeout=max(self.settings.gather_timeout, 5.0),
                connect_timeout=min(5.0, self.settings.gather_timeout),
                # watches of the kinds in use, dispatch parts, workers
                pool_size=self.settings.workers + self.settings.dispatch_parts + 16,
                user_agent="placer-controller",
                watch=watch,
            )
        )

    def _act(self, stop: threading.Event) -> None:
        log.info(
            "acting as the placement controller",
            extra={"event": "acting", "identity": self.settings.identity},
        )
        self.metrics.leader.set(1)
        self._pool = ThreadPoolExecutor(
            max_workers=self.settings.workers, thread_name_prefix="placer-work"
        )
        for api_version, kind in DEFINITION_KINDS:
            self.hub_cache.watch_config(api_version, kind, self._refresh_definitions)
        self.hub_cache.watch_config(*POLICY_KIND, self._refresh_policies)
        for queue_kind in (QUEUE_KIND, PRIORITY_CLASS_KIND):
            self.hub_cache.watch_config(*queue_kind, self._refresh_queues)
        self.hub_cache.watch_claims()
        if self.capacity is not None:
            self.capacity.start(self.members.clients)
        self.hub_cache.wait_config(timeout=10.0)
        self._refresh_definitions()
        self._refresh_policies()
        self._refresh_queues()
        threads = ((self.reconciler.run, "placer-loop"), (self.cycle.run, "placer-cycle"))
        for thread_target, name in threads:
            thread = threading.Thread(target=thread_target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        while not stop.is_set() and not self._halt.is_set():
            stop.wait(0.2)
        self._halt.set()

    def _shutdown(self) -> None:
        self._halt.set()
        self.cycle.wake()
        self.queue.wake()
        for thread in self._threads:
            thread.join(timeout=60)
        if self._pool is not None:
            # a graceful stop records what was dispatched; a lost leader must not write on
            self._pool.shutdown(wait=True, cancel_futures=self._lost.is_set())
        informers = [*self.hub_cache.all_informers(), *self.members.informers()]
        if self.capacity is not None:
            informers += self.capacity.informers()
        for informer in informers:
            informer.stop()
        for informer in informers:
            informer.join(timeout=5)
        if self._elector is not None:
            self._elector.stop(release=not self._lost.is_set())
        self.metrics.leader.set(0)
        self.members.close()
        log.info("stopped", extra={"event": "stopped", "identity": self.settings.identity})

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` in the worker pool (which exists while acting)."""
        assert self._pool is not None
        return self._pool.submit(fn, *args)

    # -- the HTTP endpoints ----------------------------------------------------------------------

    def healthy(self) -> tuple[bool, str]:
        dead = [t.name for t in self._threads if not t.is_alive() and not self._halt.is_set()]
        if dead:
            return False, f"threads stopped: {', '.join(dead)}"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if not self._started.is_set():
            return False, "starting"
        if not self.leading:
            holder = self._elector.holder() if self._elector else ""
            return True, f"standby (leader: {holder or 'unknown'})"
        waiting = self.hub_cache.unlisted()
        if waiting is None or waiting:
            return False, "listing the hub: " + (", ".join(waiting or ()) or "starting")
        return True, "leading"

    def fleet_document(self) -> dict[str, Any]:
        """The fleet as decided on (capacity gathered, in-flight placements charged)."""
        self._require_leader()
        fleet = self.cycle.fleet
        if fleet is None:
            raise UnavailableError("no capacity gathered yet")
        return fleet_to_dict(fleet)

    def placements_document(self) -> dict[str, Any]:
        """Every managed hub object with its record and ``Placed`` condition."""
        self._require_leader()
        with self._lock:
            objects = self.hub_cache.items()
            pending = self.pending.refs()
            waiting = {r for r in pending if self.pending.backing_off(r)}
        reserving = self.cycle.reserving
        reservations = reserving.document() if reserving is not None else []
        reserved = {(r["kind"], r["namespace"], r["name"]): r for r in reservations}
        items = []
        for ref, obj in sorted(objects, key=lambda item: str(item[0])):
            record = record_of(obj)
            if record is None and ref not in pending and not condition_of(obj):
                continue
            condition = condition_of(obj) or {}
            items.append(
                {
                    "apiVersion": ref.api_version,
                    "kind": ref.kind,
                    "namespace": ref.namespace,
                    "name": ref.name,
                    "queue": labels_of(obj).get("placer.dev/queue", ""),
                    "cluster": record.cluster if record else "",
                    # every cluster with a copy (several for a spread workload)
                    "clusters": list(record.clusters) if record else [],
                    "decision": record.decision if record else "",
                    "placedAt": rfc3339(record.placed_at) if record and record.placed_at else "",
                    "phase": record.phase if record else "",
                    "state": "placed"
                    if record
                    else ("waiting" if ref in waiting else "pending" if ref in pending else "-"),
                    "condition": {
                        k: condition.get(k)
                        for k in ("status", "reason", "message")
                        if k in condition
                    },
                    # the nodes held for it while it waits (docs/reservations.md)
                    "reservation": reserved.get((ref.kind, ref.namespace, ref.name)),
                }
            )
        return {"placements": items, "reservations": reservations}

    def _require_leader(self) -> None:
        if not self.leading:
            holder = self._elector.holder() if self._elector else ""
            raise UnavailableError(
                f"this replica stands by; ask the leader ({holder or 'unknown'})"
            )

    # -- what the informers say ------------------------------------------------------------------

    def _on_hub_object(self, informer: Informer, old: JSON | None, new: JSON | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        try:
            ref = key_of(obj)
        except PlacerError:
            return
        if new is None:
            self.forget(ref, uid_of(obj))
            return
        if old is not None and uid_of(old) != uid_of(new):
            self.forget(ref, uid_of(old))  # deleted and created again meanwhile
        with self._lock:
            self.hub_cache.put(ref, new)
            if old is None and not informer.synced:
                # listed when this leader started: an earlier one may have dispatched it
                self.members.inherit(uid_of(new))
            if old is not None and generation_of(old) != generation_of(new):
                self.pending.changed(ref)
            # copies can only exist of objects placed or to be placed
            start_members = record_of(new) is not None or self.hub_cache.opted_in(new, ref)
            self.queue.add(ref)
        if start_members:
            self._watch_copies(ref)

    def _on_copy(self, informer: Informer, old: JSON | None, new: JSON | None) -> None:
        copy = new if new is not None else old
        if copy is None:
            return
        with self._lock:
            ref = self.hub_cache.ref_of(hub_uid_of(copy))
            if ref is not None:
                self.queue.add(ref)
            elif new is not None:
                self.queue.add(
                    CopyRef.of(informer.cluster, informer.api_version, informer.kind, copy)
                )
            else:
                self.queue.wake()

    def _on_member_state(self, informer: Informer, reachable: bool, reason: str) -> None:
        """A member's watch of one kind failed (``reason``) or listed its copies (``""``).

        Only the gather says a member is reachable again (it lists what placement needs);
        a member that answers but refuses (401, 403) is not "unreachable" here, its listing
        problem is kept per kind (see the cycle's gather and ``reconcile``).
        """
        cluster, api_version, kind = informer.cluster, informer.api_version, informer.kind
        if not reachable:
            self.members.set_health(cluster, False, reason)
        with self._lock:
            changed = self.members.set_listing(cluster, api_version, kind, reason)
            if not reason and not self.members.health(cluster).reachable:
                self.cycle.gather_soon()  # look at it again now
            if changed or (not reason and informer.synced):
                # objects of this kind may wait for these copies, or wait no more
                self.queue.add_all(self.hub_cache.refs(api_version, kind))
            if not reason and informer.synced:
                # copies left there while it could not be listed may be stale now
                for copy in informer.objects():
                    if self.hub_cache.ref_of(hub_uid_of(copy)) is None:
                        self.queue.add(CopyRef.of(cluster, api_version, kind, copy))
            self.queue.wake()

    def _pending_pods(self, cluster: str) -> list[JSON] | None:
        """``cluster``'s Pending pods, from the capacity watches (``None``: not known, e.g.
        ``--capacity list``)."""
        return None if self.capacity is None else self.capacity.pending_pods(cluster)

    def _member_reads(self, cluster: str, client: KubeClient) -> LedgerReads:
        """Where a member's pods are read: the capacity watches' caches, else listing."""
        if self.capacity is None:
            return ListedReads(client)
        return self.capacity.ledger_reads(
            cluster, client, ledger=self.ledger, workloads=self.members.informer, now=time.time()
        )

    def _on_capacity_state(self, cluster: str, reachable: bool, reason: str) -> None:
        """A member's capacity watch failed (``reason``) or listed (``""``): a member that
        does not answer is unreachable now; the next gather says the rest (its capacity is
        not known while a watch fails, so it is left out with that reason)."""
        if reason and not reachable:
            with self._lock:
                changed = self.members.set_health(cluster, False, reason)
            if changed:
                self.queue.wake()
        if reason or not self.members.health(cluster).reachable:
            self.cycle.gather_soon()

    def _refresh_definitions(self) -> None:
        objects = self.hub_cache.config_objects(*DEFINITION_KINDS)
        if not self.hub_cache.config_changed("definitions", objects):
            return
        hub = definitions_from_hub(self.hub_cache.base_catalog, objects)
        with self._lock:
            self.hub_cache.set_definitions(hub)
            self.pending.definitions_changed()
            self.members.clear_phases()
            self.pending.bump()
            self.queue.add_all(self.hub_cache.refs())
        for obj in objects:
            _, name = name_key(obj)
            self._report_config(obj, hub.problems.get(name), "InvalidDefinition")
        kinds = {(d.target.api_version, d.target.kind) for d in hub.catalog.definitions if d.target}
        kinds |= {(g.api_version, g.kind) for g in hub.uncovered}
        for api_version, kind in sorted(kinds):
            if not self._halt.is_set():
                self.hub_cache.watch(api_version, kind, self._on_hub_object)

    def _refresh_policies(self) -> None:
        objects = self.hub_cache.config_objects(POLICY_KIND)
        if not self.hub_cache.config_changed("policies", objects):
            return
        hub = policies_from_hub(objects)
        with self._lock:
            self.hub_cache.set_policies(hub)
            self.pending.bump()
            self.queue.add_all(self.hub_cache.refs())
        for obj in objects:
            _, name = name_key(obj)
            self._report_config(obj, hub.problems.get(name), "InvalidPolicy")

    def _refresh_queues(self) -> None:
        """The hub's Queues and PriorityClasses changed (or were listed): decisions use them
        from the next cycle, and every object is looked at again (one waiting for an unknown
        queue may be placed now)."""
        queue_objects = self.hub_cache.config_objects(QUEUE_KIND)
        class_objects = self.hub_cache.config_objects(PRIORITY_CLASS_KIND)
        if not self.hub_cache.config_changed("queues", [*queue_objects, *class_objects]):
            return
        hub = queues_from_hub(queue_objects, class_objects)
        with self._lock:
            self.hub_cache.set_queues(hub)
            self.pending.bump()
            self.queue.add_all(self.hub_cache.refs())
        for obj in queue_objects:
            _, name = name_key(obj)
            self._report_config(obj, hub.problems.get(name), "InvalidQueue")

    def _report_config(self, obj: Mapping[str, Any], problem: str | None, reason: str) -> None:
        """Event (and ``Valid`` condition when the kind has a status) for a config object."""
        _, name = name_key(obj)
        if not self.hub_cache.report_changed(f"{obj.get('kind')}/{name}", problem or ""):
            return
        if self._pool is None:
            return
        self._pool.submit(self.actions.report_config, dict(obj), problem, reason)

    def _watch_copies(self, ref: WorkloadRef) -> None:
        """Watch this hub's copies of ``ref``'s kind on every member (copies can only exist
        of objects placed or to be placed)."""
        if not self._halt.is_set():
            self.members.watch_all(ref.api_version, ref.kind)

    # -- forgetting ------------------------------------------------------------------------------

    def _claim_for_move(self, ref: WorkloadRef) -> bool:
        """Hold ``ref`` in the work queue for a move (:mod:`placer.controller.stuck`), unless
        the loop or a cycle is working on it."""
        with self._lock:
            if self.queue.is_processing(ref):
                return False
            self.queue.begin([ref])
            return True

    def forget(self, ref: WorkloadRef, uid: str) -> None:
        """The hub object ``ref`` of ``uid`` is gone: it leaves every queue and cache at once
        (work under way on it ends by itself); its copies are judged as stale."""
        with self._lock:
            forgotten, obj = self.hub_cache.forget(ref, uid)
            if not forgotten:
                return  # a new object of the same name
            self.queue.add_all(self.members.forget(ref, uid))
            self.queue.remove(ref)
            self.pending.forget(ref)
            if self.cycle.reserving is not None and self.cycle.reserving.forget(ref, uid):
                self.cycle.gather_soon()  # its nodes open: written to the hub, a new look
            if obj is not None and record_of(obj) is not None:
                self.pending.bump()  # its capacity comes back
            self.queue.wake()
        self.cycle.preemption_over(ref)  # (a preemptor gone: its victims are held no longer)
        if uid:
            self.events.forget(uid)
