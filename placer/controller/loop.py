"""The placement controller: watches the hub, decides in cycles, dispatches, mirrors, fails over.

:class:`Controller` composes the pure parts (:mod:`~placer.controller.reconcile`,
:mod:`~placer.controller.records`, the solver) with the I/O ones (informers over
:mod:`placer.kube`, :class:`placer.dispatch.Dispatcher`, the hub writes). Threads:

* **informers** — one per catalog kind on the hub (every object, so that hub PlacementPolicies
  can opt objects in), one for hub definitions, one for hub policies, and one per member and
  kind in use for this hub's copies (label ``placer.dev/hub``); their callbacks only update
  caches and mark hub objects *dirty*;
* the **loop** — takes dirty objects, runs :func:`~placer.controller.reconcile.reconcile` on
  what the caches hold, queues objects to place, and hands every other action (confirm, adopt,
  re-apply, mirror, fail over, delete a copy, finalize, delete a stale copy) to the worker
  pool; an object with work in flight is *busy* and is not reconciled until that work ends;
* the **cycle** thread — after the batch window, decides every ready pending object in one
  batch: gathers the fleet and syncs the in-flight ledger with the members, charges the
  ledger, decomposes, solves, dispatches through :class:`placer.dispatch.Dispatcher` (resumed
  when the definition can suspend, in the same namespace, marked with this hub's label and the
  hub object's uid), then records each outcome on the hub; while nothing is pending it gathers
  every ``resync_interval`` to follow the members' health and capacity;
* **leader election** and the **HTTP server** (probes, metrics, read-only API).

Unschedulable objects stay queued with a :class:`~placer.controller.reconcile.Backoff`: tried
again when capacity changed since their attempt (the *capacity epoch* moves when a gather shows
more free room or a member back, when a placed object goes away, when policies or definitions
change) and their backoff has passed, or after the longest backoff anyway.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from placer.controller.actions import ActionsMixin
from placer.controller.base import (
    JSON,
    as_written,
    generation_of,
    ref_text,
    version_of,
)
from placer.controller.cycles import CyclesMixin
from placer.controller.hubconfig import (
    DEFINITION_KINDS,
    POLICY_KIND,
    definitions_from_hub,
    policies_from_hub,
    selected,
)
from placer.controller.informer import Informer
from placer.controller.leader import LeaderElector
from placer.controller.reconcile import (
    Action,
    Health,
    Place,
    Wait,
    reconcile,
)
from placer.controller.records import (
    LABEL_HUB,
    format_time,
    hub_uid_of,
    is_deleting,
    is_opted_in,
    key_of,
    record_of,
    uid_of,
)
from placer.controller.server import UnavailableError
from placer.errors import (
    PlacerError,
)
from placer.kube import ClientSettings, WatchSettings, open_client
from placer.model import WorkloadRef
from placer.snapshot import fleet_to_dict

log = logging.getLogger(__name__)

__all__ = ["Controller"]


class Controller(ActionsMixin, CyclesMixin):
    """The placement controller (see the module docstring).

    Args:
        hub: a client for the hub cluster.
        fleet: the member clusters.
        settings: timings, sizes, names.
        catalog: definitions before the hub's own (default: the built-in catalog).
        policies: PlacementPolicies from files; applied before the hub's.
        metrics: where to count (default: a fresh registry).
        clock: monotonic clock.
    """

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
                on_started=self._wake_all,
                on_stopped=self._on_lost,
            )
            self._elector.start()
            while not stop.is_set() and not self._elector.wait_leading(0.1):
                pass
            if stop.is_set():
                self._elector.stop()
                self._close_members()
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
        self._cycle_wake.set()
        self._wake_all()

    def _open_members(self) -> None:
        watch = WatchSettings(
            server_timeout=60, reconnect_backoff=0.5, max_reconnects=2, allow_bookmarks=True
        )
        client_settings = ClientSettings(
            request_timeout=max(self.settings.gather_timeout, 5.0),
            connect_timeout=min(5.0, self.settings.gather_timeout),
            # watches of the kinds in use, dispatch parts, workers
            pool_size=self.settings.workers + self.settings.dispatch_parts + 16,
            user_agent="placer-controller",
            watch=watch,
        )
        now = self._clock()
        for source in self.config.clusters:
            if source.problem or source.kubeconfig is None:
                self._health[source.name] = Health(False, now, False)
                log.warning(
                    "member %s cannot be used: %s",
                    source.name,
                    source.problem or "no kubeconfig",
                    extra={"event": "member-problem", "cluster": source.name},
                )
                continue
            try:
                self.clients[source.name] = open_client(
                    source.kubeconfig, source.context, name=source.name, settings=client_settings
                )
                self._health[source.name] = Health(True, now, False)
            except PlacerError as err:
                self._health[source.name] = Health(False, now, False)
                log.warning(
                    "member %s cannot be used: %s",
                    source.name,
                    err,
                    extra={"event": "member-problem", "cluster": source.name},
                )
            self.metrics.reachable.labels(source.name).set(
                1 if self._health[source.name].reachable else 0
            )

    def _close_members(self) -> None:
        for client in self.clients.values():
            client.close()

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
            self._config_informer(api_version, kind, self._on_definition)
        self._config_informer(*POLICY_KIND, self._on_policy)
        for informer in self._config_informers.values():
            informer.wait_synced(timeout=10.0)
        self._refresh_definitions()
        self._refresh_policies()
        for thread_target, name in ((self._loop, "placer-loop"), (self._cycles, "placer-cycle")):
            thread = threading.Thread(target=thread_target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        while not stop.is_set() and not self._halt.is_set():
            stop.wait(0.2)
        self._halt.set()

    def _shutdown(self) -> None:
        self._halt.set()
        self._cycle_wake.set()
        self._wake_all()
        for thread in self._threads:
            thread.join(timeout=60)
        if self._pool is not None:
            # a graceful stop records what was dispatched; a lost leader must not write on
            self._pool.shutdown(wait=True, cancel_futures=self._lost.is_set())
        informers = [
            *self._config_informers.values(),
            *self._hub_informers.values(),
            *self._member_informers.values(),
        ]
        for informer in informers:
            informer.stop()
        for informer in informers:
            informer.join(timeout=5)
        if self._elector is not None:
            self._elector.stop(release=not self._lost.is_set())
        self.metrics.leader.set(0)
        self._close_members()
        log.info("stopped", extra={"event": "stopped", "identity": self.settings.identity})

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
        with self._lock:
            informers = [*self._config_informers.values(), *self._hub_informers.values()]
        waiting = [f"{i.kind}" for i in informers if not i.synced]
        if waiting or not informers:
            return False, "listing the hub: " + (", ".join(waiting) or "starting")
        return True, "leading"

    def fleet_document(self) -> dict[str, Any]:
        """The fleet as decided on (capacity gathered, in-flight placements charged)."""
        self._require_leader()
        with self._lock:
            fleet = self._fleet
        if fleet is None:
            raise UnavailableError("no capacity gathered yet")
        return fleet_to_dict(fleet)

    def placements_document(self) -> dict[str, Any]:
        """Every managed hub object with its record and ``Placed`` condition."""
        self._require_leader()
        with self._lock:
            objects = list(self._objects.items())
            pending = set(self._pending)
            waiting = {r for r in pending if r in self._backoff}
        items = []
        for ref, obj in sorted(objects, key=lambda item: ref_text(item[0])):
            record = record_of(obj)
            if record is None and ref not in pending and not self._condition(obj):
                continue
            condition = self._condition(obj) or {}
            labels = (obj.get("metadata") or {}).get("labels") or {}
            items.append(
                {
                    "apiVersion": ref.api_version,
                    "kind": ref.kind,
                    "namespace": ref.namespace,
                    "name": ref.name,
                    "queue": labels.get("placer.dev/queue", ""),
                    "cluster": record.cluster if record else "",
                    "decision": record.decision if record else "",
                    "placedAt": format_time(record.placed_at)
                    if record and record.placed_at
                    else "",
                    "phase": record.phase if record else "",
                    "state": "placed"
                    if record
                    else ("waiting" if ref in waiting else "pending" if ref in pending else "-"),
                    "condition": {
                        k: condition.get(k)
                        for k in ("status", "reason", "message")
                        if k in condition
                    },
                }
            )
        return {"placements": items}

    def _require_leader(self) -> None:
        if not self.leading:
            holder = self._elector.holder() if self._elector else ""
            raise UnavailableError(
                f"this replica stands by; ask the leader ({holder or 'unknown'})"
            )

    def _config_informer(self, api_version: str, kind: str, callback: Callable[[], None]) -> None:
        def on_change(_informer: Informer, _old: JSON | None, _new: JSON | None) -> None:
            if _informer.synced:
                callback()

        informer = Informer(
            self.hub,
            api_version,
            kind,
            on_change=on_change,
            on_state=lambda inf, ok, _reason: callback() if ok and inf.synced else None,
            discovery_interval=self.settings.discovery_interval,
        )
        self._config_informers[(api_version, kind)] = informer
        informer.start()

    def _hub_informer(self, api_version: str, kind: str) -> None:
        key = (api_version, kind)
        if key in self._hub_informers or self._halt.is_set():
            return
        informer = Informer(
            self.hub,
            api_version,
            kind,
            on_change=self._on_hub_object,
            discovery_interval=self.settings.discovery_interval,
        )
        self._hub_informers[key] = informer
        informer.start()

    def _member_informer(self, cluster: str, api_version: str, kind: str) -> Informer | None:
        key = (cluster, api_version, kind)
        with self._lock:
            existing = self._member_informers.get(key)
            if existing is not None or self._halt.is_set():
                return existing
            client = self.clients.get(cluster)
            if client is None:
                return None
            informer = Informer(
                client,
                api_version,
                kind,
                on_change=self._on_copy,
                on_state=self._on_member_state,
                label_selector=f"{LABEL_HUB}={self.settings.hub}",
                watch=client.settings.watch,
                discovery_interval=self.settings.discovery_interval,
                retry_interval=max(1.0, min(10.0, self.settings.grace_period / 4)),
            )
            self._member_informers[key] = informer
        informer.start()
        return informer

    def _on_hub_object(self, _informer: Informer, old: JSON | None, new: JSON | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        try:
            ref = key_of(obj)
        except PlacerError:
            return
        if new is None:
            self._forget_object(ref, uid_of(obj))
            return
        if old is not None and uid_of(old) != uid_of(new):
            self._forget_object(ref, uid_of(old))  # deleted and created again meanwhile
        with self._wake:
            self._objects[ref] = new
            self._by_uid[uid_of(new)] = ref
            if old is None and not _informer.synced:
                # listed when this leader started: an earlier one may have dispatched it
                self._inherited.add(uid_of(new))
            self._first_seen.setdefault(ref, self._clock())
            if old is not None and generation_of(old) != generation_of(new):
                self._backoff.forget(ref)
            # copies can only exist of objects placed or to be placed
            start_members = record_of(new) is not None or self._opted_in(new, ref)
            self._dirty.add(ref)
            self._wake.notify_all()
        if start_members:
            for cluster in self.members:
                self._member_informer(cluster, ref.api_version, ref.kind)

    def _on_copy(self, informer: Informer, old: JSON | None, new: JSON | None) -> None:
        copy = new if new is not None else old
        if copy is None:
            return
        uid = hub_uid_of(copy)
        meta = copy.get("metadata") or {}
        with self._wake:
            ref = self._by_uid.get(uid)
            if ref is not None:
                self._dirty.add(ref)
            elif new is not None:
                self._gc.add(
                    (
                        informer.cluster,
                        informer.api_version,
                        informer.kind,
                        str(meta.get("namespace") or ""),
                        str(meta.get("name") or ""),
                    )
                )
            self._wake.notify_all()

    def _on_member_state(self, informer: Informer, reachable: bool, reason: str) -> None:
        """A member's watch of one kind failed (``reason``) or listed its copies (``""``).

        Only the gather says a member is reachable again (it lists what placement needs);
        a member that answers but refuses (401, 403) is not "unreachable" here, its listing
        problem is kept per kind (see ``_gather`` and ``reconcile``).
        """
        key = (informer.cluster, informer.api_version, informer.kind)
        if not reachable:
            self._set_health(informer.cluster, False, reason)
        with self._wake:
            before = self._listing.get(key)
            if reason:
                if before is None:
                    self._listing[key] = (reason, self._clock())
                else:
                    self._listing[key] = (reason, before[1])
            else:
                self._listing.pop(key, None)
                if not self._health.get(informer.cluster, Health()).reachable:
                    self._last_gather = float("-inf")  # look at it again now
                    self._cycle_wake.set()
            changed = (before is None) != (not reason)
            if changed or (not reason and informer.synced):
                # objects of this kind may wait for these copies, or wait no more
                self._dirty.update(
                    r
                    for r in self._objects
                    if r.api_version == informer.api_version and r.kind == informer.kind
                )
            if not reason and informer.synced:
                # copies left there while it could not be listed may be stale now
                for copy in informer.objects():
                    meta = copy.get("metadata") or {}
                    if hub_uid_of(copy) not in self._by_uid:
                        self._gc.add(
                            (
                                informer.cluster,
                                informer.api_version,
                                informer.kind,
                                str(meta.get("namespace") or ""),
                                str(meta.get("name") or ""),
                            )
                        )
            self._wake.notify_all()

    def _on_definition(self) -> None:
        self._refresh_definitions()

    def _on_policy(self) -> None:
        self._refresh_policies()

    def _refresh_definitions(self) -> None:
        objects: list[JSON] = []
        for api_version, kind in DEFINITION_KINDS:
            informer = self._config_informers.get((api_version, kind))
            if informer is not None:
                objects.extend(informer.objects())
        if not self._config_changed("definitions", objects):
            return
        hub = definitions_from_hub(self.base_catalog, objects)
        with self._wake:
            self._definitions = hub
            self._invalid.clear()
            self._decomposed.clear()
            self._phases.clear()
            self._epoch += 1
            self._dirty.update(self._objects)
            self._wake.notify_all()
        for obj in objects:
            name = str((obj.get("metadata") or {}).get("name") or "")
            self._report_config(obj, hub.problems.get(name), "InvalidDefinition")
        kinds = {(d.target.api_version, d.target.kind) for d in hub.catalog.definitions if d.target}
        kinds |= {(g.api_version, g.kind) for g in hub.uncovered}
        for api_version, kind in sorted(kinds):
            self._hub_informer(api_version, kind)

    def _refresh_policies(self) -> None:
        informer = self._config_informers.get(POLICY_KIND)
        objects = informer.objects() if informer is not None else []
        if not self._config_changed("policies", objects):
            return
        hub = policies_from_hub(objects)
        with self._wake:
            self._policies = hub
            self._epoch += 1
            self._dirty.update(self._objects)
            self._wake.notify_all()
        for obj in objects:
            name = str((obj.get("metadata") or {}).get("name") or "")
            self._report_config(obj, hub.problems.get(name), "InvalidPolicy")

    def _config_changed(self, what: str, objects: Sequence[Mapping[str, Any]]) -> bool:
        """Whether the hub's definitions (or policies) differ from the last ones read."""
        versions = tuple(sorted((str(o.get("kind")), uid_of(o), version_of(o)) for o in objects))
        with self._lock:
            if self._config_versions.get(what) == versions:
                return False
            self._config_versions[what] = versions
            return True

    def _report_config(self, obj: Mapping[str, Any], problem: str | None, reason: str) -> None:
        """Event (and ``Valid`` condition when the kind has a status) for a config object."""
        key = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
        state = problem or ""
        with self._lock:
            if self._reported.get(key) == state:
                return
            self._reported[key] = state
        if self._pool is None:
            return
        self._pool.submit(self._write_config_report, dict(obj), problem, reason)

    def _loop(self) -> None:
        housekeeping = 0.0
        try:
            while not self._halt.is_set():
                with self._wake:
                    # NB: dirty objects that are busy wait for their work to end (which
                    # notifies): waiting only on "anything dirty" would spin meanwhile
                    if not self._gc and self._dirty <= self._busy:
                        self._wake.wait(timeout=self._tick())
                    now = self._clock()
                    due = [r for r, t in self._retry.items() if t <= now]
                    for ref in due:
                        del self._retry[ref]
                    self._dirty.update(due)
                    ready = self._dirty - self._busy
                    self._dirty -= ready
                    gc, self._gc = self._gc, set()
                if self._halt.is_set():
                    return
                for ref in sorted(ready, key=ref_text):
                    try:
                        self._reconcile(ref)
                    except Exception:  # one object's trouble must not stop the others
                        log.exception(
                            "%s: reconcile failed",
                            ref_text(ref),
                            extra={"event": "reconcile-failed", "workload": ref_text(ref)},
                        )
                        with self._lock:
                            self._retry[ref] = self._clock() + 5.0
                self._collect(gc)
                now = self._clock()
                if now >= housekeeping:  # at most a few times a second, not per event
                    housekeeping = now + 0.25
                    with self._lock:
                        self._gc |= self._gc_later
                        self._gc_later.clear()
                    self._check_failover()
                    self.metrics.queue_depth.set(len(self._pending))
                    self.metrics.waiting.set(self._backoff.waiting())
                    self._count_blocked()
        except Exception:
            log.exception("the controller loop failed", extra={"event": "loop-failed"})
            raise

    def _count_blocked(self) -> None:
        """``placer_waiting_for_cluster``: hub objects each member blocks."""
        with self._lock:
            counts = dict.fromkeys(self.members, 0)
            for _, clusters in self._blocked.values():
                for cluster in clusters:
                    counts[cluster] = counts.get(cluster, 0) + 1
        for cluster, count in counts.items():
            self.metrics.waiting_for.labels(cluster).set(count)

    def _tick(self) -> float:
        tick = min(1.0, self.settings.grace_period / 4, self.settings.resync_interval)
        if self._retry:
            tick = min(tick, max(0.01, min(self._retry.values()) - self._clock()))
        return max(0.01, tick)

    def _check_failover(self) -> None:
        """Mark objects on members lost for longer than the grace period dirty."""
        now = self._clock()
        with self._lock:
            lost = {
                c
                for c, h in self._health.items()
                if not h.reachable and now - h.since >= self.settings.grace_period
            }
            if not lost:
                return
            for ref, obj in self._objects.items():
                if ref in self._busy or ref in self._retry:  # (a retry waits for its time)
                    continue
                record = record_of(obj)
                if record is not None and record.cluster in lost:
                    self._dirty.add(ref)

    def _member_view(self, ref: WorkloadRef) -> tuple[dict[str, JSON], dict[str, Health]]:
        """The object's copies (by uid) and every member's health for the object's kind."""
        copies: dict[str, JSON] = {}
        health: dict[str, Health] = {}
        for cluster in self.members:
            state = self._health.get(cluster, Health(False, 0.0, False))
            informer = self._member_informers.get((cluster, ref.api_version, ref.kind))
            synced = informer is not None and informer.synced
            listing = self._listing.get((cluster, ref.api_version, ref.kind))
            if not state.reachable:
                problem = (state.problem or "unreachable", state.since)
            else:
                problem = listing or ("", 0.0)
            health[cluster] = replace(
                state, synced=synced, problem=problem[0], problem_since=problem[1]
            )
            if informer is not None and synced:
                copy = informer.get(ref.namespace, ref.name)
                if copy is not None:
                    copies[cluster] = copy
        return copies, health

    def _reconcile(self, ref: WorkloadRef) -> None:
        self.metrics.reconciles.inc()
        with self._lock:
            obj = self._objects.get(ref)
            if obj is None or ref in self._busy:
                return
            informer = self._hub_informers.get((ref.api_version, ref.kind))
            if informer is None or not informer.synced:
                return
        record = record_of(obj)
        opted_in = self._opted_in(obj, ref)
        if record is not None or opted_in or is_deleting(obj):
            for cluster in self.members:  # (a policy may have opted the kind in just now)
                self._member_informer(cluster, ref.api_version, ref.kind)
        with self._lock:
            uid = uid_of(obj)
            copies, health = self._member_view(ref)
            copies = {c: o for c, o in copies.items() if hub_uid_of(o) == uid}
            suspects = None if uid in self._inherited else set(self._touched.get(uid, ()))
            if record is None and all(h.synced and not h.problem for h in health.values()):
                self._inherited.discard(uid)  # every member listed: no copy unseen anywhere
        phases = {}
        if record is not None and record.cluster in copies:
            phases[record.cluster] = self._phase_of(record.cluster, copies[record.cluster])
        actions = reconcile(
            obj,
            opted_in=opted_in,
            copies=copies,
            health=health,
            members=self.members,
            now=self._clock(),
            grace_period=self.settings.grace_period,
            copy_phase=phases,
            suspects=suspects,
        )
        actions = self._new_waits(ref, actions)
        work: list[Action] = [a for a in actions if not isinstance(a, Place)]
        places = [a for a in actions if isinstance(a, Place)]
        with self._wake:
            if places and ref not in self._pending:
                if self._invalid.get(ref) != as_written(obj):
                    self._pending[ref] = self._clock()
                    if self._pool is not None:  # decompose during the batch window
                        self._pool.submit(self._warm, obj)
                    if places[0].reason:
                        log.info(
                            "%s: %s",
                            ref_text(ref),
                            places[0].reason,
                            extra={"event": "requeued", "workload": ref_text(ref)},
                        )
                    self._cycle_wake.set()
            elif not places and ref in self._pending:
                self._pending.pop(ref, None)
            if work:
                self._busy.add(ref)
        if work and self._pool is not None:
            self._pool.submit(self._execute, ref, obj, work, copies)

    def _new_waits(self, ref: WorkloadRef, actions: list[Action]) -> list[Action]:
        """Keep a :class:`Wait` only when the object does not say so already; an object that
        waits no more is forgotten as blocked."""
        waits = [a for a in actions if isinstance(a, Wait)]
        with self._lock:
            if not waits:
                self._blocked.pop(ref, None)
                return actions
            blockers = waits[0].blockers
            if self._blocked.get(ref, ("", ()))[1] == tuple(c for c, _ in blockers):
                return [a for a in actions if not isinstance(a, Wait)]
            return actions

    def _opted_in(self, obj: Mapping[str, Any], ref: WorkloadRef) -> bool:
        ignored = {*self.settings.ignored_namespaces, self.settings.lease.namespace}
        if ref.namespace in ignored:
            return False
        if is_opted_in(obj):
            return True
        return selected(obj, ref, self._policies.policies) is not None
