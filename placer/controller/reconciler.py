"""The controller's loop: reconcile hub objects, judge member copies, carry actions out.

:class:`Reconciler` runs the loop thread. It takes the ready keys of the
:class:`~placer.controller.workqueue.WorkQueue` (each is *busy* until done):

* a **hub object** — :func:`~placer.controller.reconcile.reconcile` on what the caches hold
  (the object, its copies and every member's health for its kind, where a copy may be
  unseen); an object to place goes to the :class:`~placer.controller.pending.PendingQueue`
  (decomposed meanwhile, in the worker pool) and is done; any other action (confirm, adopt,
  re-apply, mirror, fail over, wait, delete a copy, finalize) goes to the worker pool, where
  :class:`~placer.controller.actions.Actions` writes, and the object is done once that work
  ends — queued again after a success, retried after its backoff (2 s doubling to 60 s)
  after a failure, forgotten at once when the failure was that the hub object is gone;
* a **member copy** — deleted when stale: marked by this hub, and its hub object gone (judged
  once the hub's objects of its kind are listed; a copy of a live object is its object's
  reconcile's to judge).

A few times a second it also queues the objects recorded on members lost for longer than the
grace period, and sets the queue gauges.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from placer.controller.actions import Actions
from placer.controller.cycles import DecisionCycle
from placer.controller.hubcache import HubCache
from placer.controller.hubwrites import HubWriter
from placer.controller.members import MembersView
from placer.controller.metrics import Metrics
from placer.controller.pending import PendingQueue
from placer.controller.reconcile import (
    Action,
    Failover,
    Place,
    Wait,
    is_stale,
    reconcile,
)
from placer.controller.records import JSON, CopyRef, Record, as_written, hub_uid_of, record_of
from placer.controller.settings import ControllerSettings
from placer.controller.spread import aggregate_status
from placer.controller.workqueue import WorkKey, WorkQueue
from placer.definitions import phases_of
from placer.errors import KubeError, NotFoundError, PlacerError
from placer.model import WorkloadRef
from placer.objects import is_deleting, uid_of

log = logging.getLogger(__name__)

__all__ = ["HOUSEKEEPING", "JUDGE_LATER", "RECONCILE_RETRY", "Reconciler"]

#: seconds before a hub object whose reconcile raised is looked at again.
RECONCILE_RETRY = 5.0
#: seconds between the loop's housekeeping (failover check, gauges) at most.
HOUSEKEEPING = 0.25
#: seconds before a copy is judged again while its kind is not listed on the hub yet.
JUDGE_LATER = 0.25


class Reconciler:
    """The loop (see the module docstring).

    Args:
        settings: the controller's settings.
        hub: the hub cache.
        members: the members.
        queue: the loop's work queue.
        pending: the objects waiting for a placement cycle.
        cycle: the placement cycles (woken when objects are queued for one).
        actions: single-object writes.
        writer: hub writes (its client reads a hub object again after a 404).
        metrics: the controller's metrics.
        forget: ``forget(ref, uid)``: a hub object is gone, everywhere at once.
        submit: runs a function in the worker pool.
        halt: set when the controller stops.
        lock: the lock the state objects share.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        settings: ControllerSettings,
        *,
        hub: HubCache,
        members: MembersView,
        queue: WorkQueue[WorkKey],
        pending: PendingQueue,
        cycle: DecisionCycle,
        actions: Actions,
        writer: HubWriter,
        metrics: Metrics,
        forget: Callable[[WorkloadRef, str], None],
        submit: Callable[..., object],
        halt: threading.Event,
        lock: threading.RLock,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.hub = hub
        self.members = members
        self.queue = queue
        self.pending = pending
        self.cycle = cycle
        self.actions = actions
        self.writer = writer
        self.metrics = metrics
        self._forget = forget
        self._submit = submit
        self._halt = halt
        self._lock = lock
        self._clock = clock

    def run(self) -> None:
        """The loop thread: take ready keys, reconcile or judge them, housekeeping."""
        housekeeping = 0.0
        try:
            while not self._halt.is_set():
                keys = self.queue.get(timeout=self._tick())
                if self._halt.is_set():
                    return
                refs = sorted((k for k in keys if isinstance(k, WorkloadRef)), key=str)
                for ref in refs:
                    self._reconcile_one(ref)
                for copy in (k for k in keys if isinstance(k, CopyRef)):
                    try:
                        self._judge(copy)
                    finally:
                        self.queue.done(copy)
                now = self._clock()
                if now >= housekeeping:  # at most a few times a second, not per event
                    housekeeping = now + HOUSEKEEPING
                    self._check_failover()
                    sizes = self.pending.sizes()
                    self.metrics.queue_depth.set(sizes["pending"])
                    self.metrics.waiting.set(sizes["backoff"])
                    self.metrics.managed.set(self.hub.placed_count())
                    for cluster, count in self.members.blocked_counts().items():
                        self.metrics.waiting_for.labels(cluster).set(count)
                    self.cycle.queue_metrics()
        except Exception:
            log.exception("the controller loop failed", extra={"event": "loop-failed"})
            raise

    def _tick(self) -> float:
        return min(1.0, self.settings.grace_period / 4, self.settings.resync_interval)

    def _check_failover(self) -> None:
        """Queue objects on members lost for longer than the grace period."""
        lost = self.members.lost(self._clock(), self.settings.grace_period)
        if not lost:
            return
        with self._lock:
            for ref, obj in self.hub.items():
                if self.queue.is_processing(ref) or self.queue.is_delayed(ref):
                    continue  # (a retry waits for its time)
                record = record_of(obj)
                if record is not None and set(record.clusters) & set(lost):
                    self.queue.add(ref)

    def _reconcile_one(self, ref: WorkloadRef) -> None:
        """Reconcile ``ref`` (taken from the queue): its work goes to the pool, or it is done."""
        try:
            planned = self._reconcile(ref)
        except Exception:  # one object's trouble must not stop the others
            log.exception(
                "%s: reconcile failed",
                ref,
                extra={"event": "reconcile-failed", "workload": str(ref)},
            )
            with self._lock:
                self.queue.add_after(ref, RECONCILE_RETRY)
                self.queue.done(ref)
            return
        if planned is None:
            self.queue.done(ref)
            return
        obj, actions, copies = planned
        self._settle(ref, obj, actions, copies)

    def _reconcile(self, ref: WorkloadRef) -> tuple[JSON, list[Action], dict[str, JSON]] | None:
        """The actions for ``ref`` on what the caches hold (``None``: nothing to look at)."""
        self.metrics.reconciles.inc()
        obj = self.hub.get(ref)
        if obj is None or not self.hub.synced(ref.api_version, ref.kind):
            return None
        record = record_of(obj)
        opted_in = self.hub.opted_in(obj, ref)
        if record is not None or opted_in or is_deleting(obj):
            self._watch_copies(ref)  # (a policy may have opted the kind in just now)
        uid = uid_of(obj)
        with self._lock:
            copies, health = self.members.view(ref, uid)
            suspects = self.members.suspects(uid)
            if record is None and all(h.synced and not h.problem for h in health.values()):
                self.members.seen_everywhere(uid)  # every member listed: no copy unseen
        phases = {}
        aggregate = self._aggregate(obj, record, copies) if record is not None else None
        if record is not None and record.cluster in copies:
            phases[record.cluster] = self.members.phase_of(
                record.cluster, copies[record.cluster], self.hub.catalog
            )
        actions = reconcile(
            obj,
            opted_in=opted_in,
            copies=copies,
            health=health,
            members=self.members.names,
            now=self._clock(),
            grace_period=self.settings.grace_period,
            copy_phase=phases,
            suspects=suspects,
            aggregate=aggregate,
        )
        return obj, self._new_waits(ref, actions), copies

    def _aggregate(
        self, obj: JSON, record: Record, copies: Mapping[str, JSON]
    ) -> tuple[JSON, str] | None:
        """A spread workload's copies' aggregated status and its phase through the
        definition (:mod:`placer.controller.spread`); ``None`` unless every copy is seen."""
        if not record.copies or any(c not in copies for c in record.copies):
            return None
        statuses = []
        for cluster in record.copies:
            status = copies[cluster].get("status")
            statuses.append((cluster, status if isinstance(status, Mapping) else {}))
        status = aggregate_status(statuses)
        try:
            phase = ",".join(phases_of({**obj, "status": status}, self.hub.catalog))
        except PlacerError:
            phase = ""
        return status, "" if phase == "Undefined" else phase

    def _settle(
        self, ref: WorkloadRef, obj: JSON, actions: list[Action], copies: dict[str, JSON]
    ) -> None:
        """Queue ``ref`` for a cycle or not, and hand its other actions to the pool (it stays
        busy until they end) or be done with it."""
        work: list[Action] = [a for a in actions if not isinstance(a, Place)]
        places = [a for a in actions if isinstance(a, Place)]
        warm = False
        with self._lock:
            if places:
                if self.pending.offer(ref, as_written(obj), self._clock()):
                    warm = True
                    if places[0].reason:
                        log.info(
                            "%s: %s",
                            ref,
                            places[0].reason,
                            extra={"event": "requeued", "workload": str(ref)},
                        )
                    self.cycle.wake()
            elif ref in self.pending:
                self.pending.discard(ref)
            if not work:
                self.queue.done(ref)
        try:
            if warm:
                self._submit(self._warm, obj)  # decompose during the batch window
            if work:
                self._submit(self._execute, ref, obj, work, copies)
        except RuntimeError:  # the pool is shut down: the controller stops
            if work:
                self.queue.done(ref)

    def _new_waits(self, ref: WorkloadRef, actions: list[Action]) -> list[Action]:
        """Keep a :class:`Wait` only when the object does not say so already; an object that
        waits no more is forgotten as blocked."""
        waits = [a for a in actions if isinstance(a, Wait)]
        if not waits:
            self.members.unblock(ref)
            return actions
        if self.members.waits_for(ref) == tuple(c for c, _ in waits[0].blockers):
            return [a for a in actions if not isinstance(a, Wait)]
        return actions

    def _watch_copies(self, ref: WorkloadRef) -> None:
        if not self._halt.is_set():
            self.members.watch_all(ref.api_version, ref.kind)

    def _warm(self, obj: Mapping[str, Any]) -> None:
        """Decompose ahead of the cycle (errors are the cycle's to report)."""
        try:
            self.hub.decompose(obj)
        except PlacerError:
            pass

    def _judge(self, copy: CopyRef) -> None:
        """Delete a stale copy whose hub object is gone (or records another cluster)."""
        informer = self.members.informer(copy.cluster, copy.api_version, copy.kind)
        if informer is None or not self.hub.watching(copy.api_version, copy.kind):
            return
        if not self.hub.synced(copy.api_version, copy.kind):
            self.queue.add_after(copy, JUDGE_LATER)  # judged once the hub's objects are listed
            return
        found = informer.get(copy.namespace, copy.name)
        if found is None:
            return
        ref = self.hub.ref_of(hub_uid_of(found))
        if ref is not None:
            self.queue.add(ref)  # its reconcile decides (busy objects included)
            return
        if not is_stale(found, copy.cluster, {}):
            return
        self._submit(self.actions.delete_orphan, copy.workload, copy.cluster)

    # -- single-object work (worker threads) -----------------------------------------------------

    def _execute(
        self, ref: WorkloadRef, obj: JSON, actions: list[Action], copies: dict[str, JSON]
    ) -> None:
        requeue = False
        failed = False
        try:
            for action in actions:
                if self._halt.is_set():
                    return
                obj = self.actions.perform(ref, obj, action, copies)
                if isinstance(action, Failover):
                    self.pending.bump()
                    requeue = True
                elif isinstance(action, Wait):
                    with self._lock:
                        if self.hub.get(ref) is not None:
                            self.members.block(ref, tuple(c for c, _ in action.blockers))
        except NotFoundError as err:
            if self._hub_object_gone(ref, obj):
                return  # a quiet no-op: the object left every queue and cache
            failed = True  # a 404 from a member (its namespace or kind is missing)
            self._retry_later(ref, err)
        except KubeError as err:
            failed = True
            self._retry_later(ref, err)
        except Exception:
            failed = True
            log.exception("%s: action failed", ref, extra={"event": "action-failed"})
            self._retry_later(ref, None)
        finally:
            with self._lock:
                if not failed:
                    self.queue.forget(ref)
                if self.hub.get(ref) is not None:
                    if requeue:
                        self.pending.add(ref, self._clock())
                        self.cycle.wake()
                    if not failed:
                        self.queue.add(ref)
                self.queue.done(ref)

    def _hub_object_gone(self, ref: WorkloadRef, obj: JSON) -> bool:
        """After a 404: whether the hub object is gone (then it is forgotten at once)."""
        try:
            current = self.writer.client.get(
                ref.api_version, ref.kind, ref.name, namespace=ref.namespace
            )
        except NotFoundError:
            current = None
        except KubeError:
            return False
        if current is not None and uid_of(current) == uid_of(obj):
            return False
        self._forget(ref, uid_of(obj))
        return True

    def _retry_later(self, ref: WorkloadRef, err: KubeError | None) -> None:
        """Reconcile ``ref`` again after a growing delay (2 s, doubling, at most a minute)."""
        with self._lock:
            when = self.queue.add_rate_limited(ref)
            if self.hub.get(ref) is None:
                self.queue.remove(ref)  # gone meanwhile: nothing is kept about it
        if err is not None:
            log.warning(
                "%s: %s (retried in %.0fs)",
                ref,
                err,
                when - self._clock(),
                extra={"event": "action-failed", "workload": str(ref)},
            )
