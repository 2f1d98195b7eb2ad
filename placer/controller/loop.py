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
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

from placer.controller.events import EventRecorder
from placer.controller.fanout import Part, ensure_namespaces, split_decision
from placer.controller.hubconfig import (
    DEFINITION_KINDS,
    POLICY_KIND,
    HubDefinitions,
    HubPolicies,
    definitions_from_hub,
    describe,
    policies_from_hub,
    selected,
)
from placer.controller.informer import Informer
from placer.controller.leader import LeaderElector
from placer.controller.metrics import Metrics, unschedulable_reason
from placer.controller.reconcile import (
    Action,
    Adopt,
    Backoff,
    Confirm,
    DeleteCopy,
    Failover,
    Finalize,
    Health,
    Mirror,
    Place,
    Reapply,
    is_stale,
    reconcile,
)
from placer.controller.records import (
    ANNOTATION_HUB_UID,
    ANNOTATION_PHASE,
    LABEL_HUB,
    clear_record_patch,
    condition_of,
    describe_error,
    finalizer_patch,
    format_time,
    hub_uid_of,
    is_deleting,
    is_opted_in,
    key_of,
    phase_patch,
    placed_condition,
    record_of,
    record_patch,
    status_patch,
    uid_of,
)
from placer.controller.server import UnavailableError
from placer.controller.settings import ControllerSettings
from placer.definitions import (
    Catalog,
    Decomposition,
    GroupVersionKind,
    can_suspend,
    decompose,
    phases_of,
    resume,
)
from placer.dispatch import (
    Dispatcher,
    DispatchResult,
    Ledger,
    Manifest,
    Outcome,
    PlacementRecord,
    dispatch_manifest,
    new_decision_id,
    sync_cluster,
)
from placer.dispatch.ledger import delete_entry
from placer.errors import (
    ConflictError,
    KubeError,
    NoDefinitionError,
    NotFoundError,
    PlacerError,
)
from placer.fleet import FleetConfig, gather_fleet
from placer.kube import ClientSettings, KubeClient, WatchSettings, open_client
from placer.model import Decision, Fleet, WorkloadRef
from placer.policy import PlacementPolicy
from placer.snapshot import fleet_to_dict
from placer.solver import solve

__all__ = ["Controller"]

log = logging.getLogger(__name__)

JSON = dict[str, Any]
KindKey = tuple[str, str]
_DECOMPOSITIONS = 20_000


def _ref_text(ref: WorkloadRef) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


class Controller:
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
        self.base_catalog = catalog if catalog is not None else Catalog.builtin()
        self.file_policies = tuple(policies)
        self.metrics = metrics or Metrics()
        self._clock = clock
        self.members: tuple[str, ...] = fleet.names
        self.clients: dict[str, KubeClient] = {}
        self.ledger = Ledger()
        self.events = EventRecorder(hub, instance=settings.identity)
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._cycle_wake = threading.Event()
        self._halt = threading.Event()
        self._lost = threading.Event()
        self._started = threading.Event()
        # hub state
        self._definitions = HubDefinitions(self.base_catalog)
        self._policies = HubPolicies()
        self._reported: dict[str, str] = {}
        self._config_versions: dict[str, tuple[tuple[str, str, str], ...]] = {}
        self._hub_informers: dict[KindKey, Informer] = {}
        self._config_informers: dict[KindKey, Informer] = {}
        self._objects: dict[WorkloadRef, JSON] = {}
        self._by_uid: dict[str, WorkloadRef] = {}
        self._first_seen: dict[WorkloadRef, float] = {}
        self._invalid: dict[WorkloadRef, str] = {}
        # members
        self._member_informers: dict[tuple[str, str, str], Informer] = {}
        self._health: dict[str, Health] = {}
        # work
        self._dirty: set[WorkloadRef] = set()
        self._busy: set[WorkloadRef] = set()
        self._pending: dict[WorkloadRef, float] = {}
        self._retry: dict[WorkloadRef, float] = {}
        self._gc: set[tuple[str, str, str, str, str]] = set()
        self._backoff = Backoff(settings.backoff.initial, settings.backoff.maximum)
        self._epoch = 0
        self._fleet: Fleet | None = None
        self._free: dict[str, dict[str, int]] = {}
        self._last_gather = float("-inf")
        self._decomposed: OrderedDict[tuple[str, str], Decomposition] = OrderedDict()
        self._phases: dict[tuple[str, str, str, str], str] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._elector: LeaderElector | None = None
        self._cycle_running = False

    # ========================================================================================
    # lifecycle

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

    def _wake_all(self) -> None:
        with self._wake:
            self._wake.notify_all()

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
            pool_size=self.settings.workers + 4,
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

    # ========================================================================================
    # probes and the read-only API

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
        for ref, obj in sorted(objects, key=lambda item: _ref_text(item[0])):
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

    @staticmethod
    def _condition(obj: Mapping[str, Any]) -> dict[str, Any] | None:
        return condition_of(obj)

    def _require_leader(self) -> None:
        if not self.leading:
            holder = self._elector.holder() if self._elector else ""
            raise UnavailableError(
                f"this replica stands by; ask the leader ({holder or 'unknown'})"
            )

    # ========================================================================================
    # informers and their callbacks (informer threads: update caches, mark dirty, nothing else)

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
        start_members = False
        with self._wake:
            if new is None:
                gone = self._objects.pop(ref, None)
                self._by_uid.pop(uid_of(obj), None)
                self._pending.pop(ref, None)
                self._first_seen.pop(ref, None)
                self._invalid.pop(ref, None)
                self._backoff.forget(ref)
                self.events.forget(uid_of(obj))
                if gone is not None and record_of(gone) is not None:
                    self._epoch += 1  # its capacity comes back
            else:
                self._objects[ref] = new
                self._by_uid[uid_of(new)] = ref
                self._first_seen.setdefault(ref, self._clock())
                if old is not None and _generation(old) != _generation(new):
                    self._backoff.forget(ref)
                start_members = True
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
        self._set_health(informer.cluster, reachable, reason)
        if reachable and informer.synced:
            # copies of this kind are known there now: objects waiting for that may go on
            with self._wake:
                self._dirty.update(
                    r
                    for r in self._objects
                    if r.api_version == informer.api_version and r.kind == informer.kind
                )
                self._wake.notify_all()

    def _set_health(self, cluster: str, reachable: bool, reason: str = "") -> None:
        with self._wake:
            current = self._health.get(cluster, Health())
            if current.reachable == reachable:
                return
            self._health[cluster] = Health(reachable, self._clock(), current.synced)
            if reachable:
                self._epoch += 1
                self._dirty.update(self._objects)
            self._wake.notify_all()
        self.metrics.reachable.labels(cluster).set(1 if reachable else 0)
        log.log(
            logging.INFO if reachable else logging.WARNING,
            "member %s is %s%s",
            cluster,
            "reachable" if reachable else "unreachable",
            f": {reason}" if reason else "",
            extra={"event": "member-health", "cluster": cluster},
        )

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
        versions = tuple(sorted((str(o.get("kind")), uid_of(o), _version(o)) for o in objects))
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

    def _write_config_report(self, obj: JSON, problem: str | None, reason: str) -> None:
        if problem:
            log.warning(
                "%s is ignored: %s",
                describe(obj),
                problem,
                extra={"event": "invalid-config", "reason": reason},
            )
            self.events.record(obj, "Warning", reason, problem)
            self.metrics.invalid.labels(reason).inc()
        condition = {
            "type": "Valid",
            "status": "False" if problem else "True",
            "reason": reason if problem else "Valid",
            "message": (problem or "in use")[:1024],
            "lastTransitionTime": format_time(time.time()),
        }
        api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
        name = str((obj.get("metadata") or {}).get("name"))
        try:
            ref = self.hub.resource(api_version, kind)
            if "status" not in ref.subresources:
                return
            self.hub.patch_status(api_version, kind, name, {"status": {"conditions": [condition]}})
        except KubeError as err:
            log.info("could not set the condition of %s: %s", describe(obj), err)

    # ========================================================================================
    # the loop

    def _loop(self) -> None:
        try:
            while not self._halt.is_set():
                with self._wake:
                    if not self._dirty:
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
                for ref in sorted(ready, key=_ref_text):
                    self._reconcile(ref)
                self._check_failover()
                self._collect(gc)
                self.metrics.queue_depth.set(len(self._pending))
                self.metrics.waiting.set(self._backoff.waiting())
        except Exception:
            log.exception("the controller loop failed", extra={"event": "loop-failed"})
            raise

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
                record = record_of(obj)
                if record is not None and record.cluster in lost and ref not in self._busy:
                    self._dirty.add(ref)

    def _member_view(self, ref: WorkloadRef) -> tuple[dict[str, JSON], dict[str, Health]]:
        """The object's copies (by uid) and every member's health for the object's kind."""
        copies: dict[str, JSON] = {}
        health: dict[str, Health] = {}
        for cluster in self.members:
            state = self._health.get(cluster, Health(False, 0.0, False))
            informer = self._member_informers.get((cluster, ref.api_version, ref.kind))
            synced = informer is not None and informer.synced
            health[cluster] = replace(state, synced=synced)
            if informer is not None and synced:
                copy = informer.get(ref.namespace, ref.name)
                if copy is not None:
                    copies[cluster] = copy
        return copies, health

    def _reconcile(self, ref: WorkloadRef) -> None:
        with self._lock:
            obj = self._objects.get(ref)
            if obj is None or ref in self._busy:
                return
            informer = self._hub_informers.get((ref.api_version, ref.kind))
            if informer is None or not informer.synced:
                return
            uid = uid_of(obj)
            copies, health = self._member_view(ref)
            copies = {c: o for c, o in copies.items() if hub_uid_of(o) == uid}
        record = record_of(obj)
        phases = {}
        if record is not None and record.cluster in copies:
            phases[record.cluster] = self._phase_of(record.cluster, copies[record.cluster])
        actions = reconcile(
            obj,
            opted_in=self._opted_in(obj, ref),
            copies=copies,
            health=health,
            members=self.members,
            now=self._clock(),
            grace_period=self.settings.grace_period,
            copy_phase=phases,
        )
        work: list[Action] = [a for a in actions if not isinstance(a, Place)]
        places = [a for a in actions if isinstance(a, Place)]
        with self._wake:
            if places and ref not in self._pending:
                if self._invalid.get(ref) != _as_written(obj):
                    self._pending[ref] = self._clock()
                    if self._pool is not None:  # decompose during the batch window
                        self._pool.submit(self._warm, obj)
                    if places[0].reason:
                        log.info(
                            "%s: %s",
                            _ref_text(ref),
                            places[0].reason,
                            extra={"event": "requeued", "workload": _ref_text(ref)},
                        )
                    self._cycle_wake.set()
            elif not places and ref in self._pending:
                self._pending.pop(ref, None)
            if work:
                self._busy.add(ref)
        if work and self._pool is not None:
            self._pool.submit(self._execute, ref, obj, work, copies)

    def _opted_in(self, obj: Mapping[str, Any], ref: WorkloadRef) -> bool:
        ignored = {*self.settings.ignored_namespaces, self.settings.lease.namespace}
        if ref.namespace in ignored:
            return False
        if is_opted_in(obj):
            return True
        return selected(obj, ref, self._policies.policies) is not None

    def _phase_of(self, cluster: str, copy: Mapping[str, Any]) -> str:
        meta = copy.get("metadata") or {}
        key = (cluster, str(meta.get("namespace")), str(meta.get("name")), _version(copy))
        cached = self._phases.get(key)
        if cached is not None:
            return cached
        try:
            phase = ",".join(phases_of(copy, self._definitions.catalog))
        except PlacerError:
            phase = ""
        if phase == "Undefined":
            phase = ""
        if len(self._phases) > 50_000:
            self._phases.clear()
        self._phases[key] = phase
        return phase

    # ========================================================================================
    # executing actions (worker threads)

    def _execute(
        self, ref: WorkloadRef, obj: JSON, actions: list[Action], copies: dict[str, JSON]
    ) -> None:
        requeue = False
        try:
            for action in actions:
                if self._halt.is_set():
                    return
                if isinstance(action, DeleteCopy):
                    self._delete_copy(ref, action.cluster, reason="stale")
                elif isinstance(action, Finalize):
                    self._finalize(ref, obj)
                elif isinstance(action, Confirm):
                    obj = self._confirm(ref, obj, action.cluster, "Placed")
                elif isinstance(action, Adopt):
                    obj = self._adopt(ref, obj, action.cluster, copies[action.cluster])
                elif isinstance(action, Mirror):
                    obj = self._mirror(ref, obj, action.cluster, copies[action.cluster])
                elif isinstance(action, Reapply):
                    obj = self._reapply(ref, obj, action.cluster, copies[action.cluster])
                elif isinstance(action, Failover):
                    self._failover(ref, obj, action)
                    requeue = True
        except NotFoundError:
            pass  # the hub object went away meanwhile: its informer says so
        except KubeError as err:
            log.warning(
                "%s: %s",
                _ref_text(ref),
                err,
                extra={"event": "action-failed", "workload": _ref_text(ref)},
            )
            with self._lock:
                self._retry[ref] = self._clock() + 2.0
        except Exception:
            log.exception("%s: action failed", _ref_text(ref), extra={"event": "action-failed"})
            with self._lock:
                self._retry[ref] = self._clock() + 5.0
        finally:
            with self._wake:
                self._busy.discard(ref)
                if requeue:
                    self._pending.setdefault(ref, self._clock())
                    self._cycle_wake.set()
                self._dirty.add(ref)
                self._wake.notify_all()

    def _patch_meta(
        self, ref: WorkloadRef, obj: JSON, build: Callable[[JSON], JSON | None]
    ) -> JSON:
        """Merge-patch metadata built from the object; on 409 read it again and rebuild."""
        for attempt in range(5):
            patch = build(obj)
            if patch is None:
                return obj
            try:
                result = self.hub.patch(
                    ref.api_version, ref.kind, ref.name, patch, namespace=ref.namespace
                )
            except ConflictError:
                if attempt == 4:
                    raise
                obj = self.hub.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
                continue
            self._remember_hub(ref, result)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _patch_status(self, ref: WorkloadRef, obj: JSON, patch: JSON | None) -> JSON:
        if patch is None:
            return obj
        resource = self.hub.resource(ref.api_version, ref.kind)
        subresource = "status" if "status" in resource.subresources else ""
        result = self.hub.patch(
            ref.api_version,
            ref.kind,
            ref.name,
            patch,
            namespace=ref.namespace,
            subresource=subresource,
        )
        self._remember_hub(ref, result)
        return result

    def _remember_hub(self, ref: WorkloadRef, obj: JSON) -> None:
        informer = self._hub_informers.get((ref.api_version, ref.kind))
        if informer is not None:
            informer.remember(obj)
        with self._lock:
            current = self._objects.get(ref)
            if current is None or _rv(current) <= _rv(obj):
                self._objects[ref] = obj

    def _confirm(self, ref: WorkloadRef, obj: JSON, cluster: str, how: str) -> JSON:
        record = record_of(obj)
        decision = record.decision if record else ""
        condition = placed_condition(
            True,
            "Placed",
            f"cluster {cluster}: {how} by decision {decision or '-'}",
            time.time(),
            generation=_generation(obj),
        )
        return self._patch_status(ref, obj, status_patch(obj, condition))

    def _adopt(self, ref: WorkloadRef, obj: JSON, cluster: str, copy: JSON) -> JSON:
        record = PlacementRecord.from_object(copy)
        decision = record.decision if record and record.decision else "adopted"
        placed_at = record.placed_at if record and record.placed_at else format_time(time.time())
        obj = self._patch_meta(ref, obj, lambda o: record_patch(o, cluster, decision, placed_at))
        obj = self._confirm(ref, obj, cluster, "adopted (its copy was already there)")
        self.events.record(
            obj,
            "Normal",
            "Adopted",
            f"cluster {cluster}: its copy was already there (decision {decision}); kept it",
        )
        log.info(
            "%s: adopted its copy on %s",
            _ref_text(ref),
            cluster,
            extra={"event": "adopted", "workload": _ref_text(ref), "cluster": cluster},
        )
        return obj

    def _mirror(self, ref: WorkloadRef, obj: JSON, cluster: str, copy: JSON) -> JSON:
        phase = self._phase_of(cluster, copy)
        record = record_of(obj)
        if record is not None and record.phase != phase:
            result = self.hub.patch(
                ref.api_version, ref.kind, ref.name, phase_patch(phase), namespace=ref.namespace
            )
            self._remember_hub(ref, result)
            obj = result
        condition = self._condition(obj) or placed_condition(
            True, "Placed", f"cluster {cluster}", time.time(), generation=_generation(obj)
        )
        member_status = copy.get("status")
        mirrored = dict(member_status) if isinstance(member_status, Mapping) else {}
        return self._patch_status(ref, obj, status_patch(obj, condition, mirrored))

    def _reapply(self, ref: WorkloadRef, obj: JSON, cluster: str, copy: JSON) -> JSON:
        """Apply the changed hub object onto its copy (same cluster, same record)."""
        decomposition = self._decompose(obj)
        record = PlacementRecord.from_object(copy) or PlacementRecord(
            cluster, (record_of(obj) or _NO_RECORD).decision, format_time(time.time())
        )
        body = dispatch_manifest(obj, ref, record)
        if can_suspend(decomposition.definition):
            body = resume(body, decomposition.definition)
        body = self._mark(body, Manifest(obj, decomposition, source="hub"))
        client = self.clients[cluster]
        applied = client.apply(body, field_manager="placer", force=False)
        informer = self._member_informers.get((cluster, ref.api_version, ref.kind))
        if informer is not None:
            informer.remember(applied)
        log.info(
            "%s: re-applied to %s (generation %s)",
            _ref_text(ref),
            cluster,
            _generation(obj),
            extra={"event": "reapplied", "workload": _ref_text(ref), "cluster": cluster},
        )
        return self._confirm(ref, obj, cluster, "re-applied")

    def _failover(self, ref: WorkloadRef, obj: JSON, action: Failover) -> None:
        self.ledger.discard(action.cluster, ref)
        obj = self._patch_meta(ref, obj, clear_record_patch)
        message = f"{action.reason}; placing it on another cluster"
        condition = placed_condition(
            False, "ClusterLost", message, time.time(), generation=_generation(obj)
        )
        obj = self._patch_status(ref, obj, status_patch(obj, condition))
        self.events.record(obj, "Warning", "ClusterLost", message)
        self.metrics.failovers.labels(action.cluster).inc()
        with self._lock:
            self._epoch += 1
        log.warning(
            "%s: %s",
            _ref_text(ref),
            message,
            extra={"event": "failover", "workload": _ref_text(ref), "cluster": action.cluster},
        )

    def _finalize(self, ref: WorkloadRef, obj: JSON) -> None:
        self._patch_meta(ref, obj, finalizer_patch)
        log.info(
            "%s: deleted on the hub; copies removed",
            _ref_text(ref),
            extra={"event": "finalized", "workload": _ref_text(ref)},
        )

    def _delete_copy(self, ref: WorkloadRef, cluster: str, *, reason: str) -> None:
        client = self.clients.get(cluster)
        if client is None:
            return
        client.delete(ref.api_version, ref.kind, ref.name, namespace=ref.namespace, missing_ok=True)
        informer = self._member_informers.get((cluster, ref.api_version, ref.kind))
        if informer is not None:
            informer.forget(ref.namespace, ref.name)
        self.ledger.discard(cluster, ref)
        try:
            delete_entry(client, ref)
        except KubeError as err:
            log.info("cluster %s: ledger entry of %s not removed: %s", cluster, ref, err)
        if reason == "stale":
            self.metrics.stale_deleted.labels(cluster).inc()
        log.info(
            "%s: copy on %s deleted (%s)",
            _ref_text(ref),
            cluster,
            reason,
            extra={"event": "copy-deleted", "workload": _ref_text(ref), "cluster": cluster},
        )

    def _collect(self, candidates: set[tuple[str, str, str, str, str]]) -> None:
        """Delete stale copies whose hub object is gone (or records another cluster)."""
        for cluster, api_version, kind, namespace, name in candidates:
            hub_informer = self._hub_informers.get((api_version, kind))
            informer = self._member_informers.get((cluster, api_version, kind))
            if hub_informer is None or informer is None:
                continue
            if not hub_informer.synced:
                with self._lock:
                    self._gc.add((cluster, api_version, kind, namespace, name))
                continue
            copy = informer.get(namespace, name)
            if copy is None:
                continue
            uid = hub_uid_of(copy)
            with self._lock:
                ref = self._by_uid.get(uid)
                if ref is not None:
                    self._dirty.add(ref)  # its reconcile decides (busy objects included)
                    continue
                objects: dict[str, JSON] = {}
            if not is_stale(copy, cluster, objects) or self._pool is None:
                continue
            stale_ref = WorkloadRef(api_version, kind, namespace, name)
            self._pool.submit(self._delete_orphan, stale_ref, cluster)

    def _delete_orphan(self, ref: WorkloadRef, cluster: str) -> None:
        try:
            self._delete_copy(ref, cluster, reason="stale: its hub object is gone")
            self.metrics.stale_deleted.labels(cluster).inc()
        except KubeError as err:
            log.warning("cluster %s: stale copy %s not deleted: %s", cluster, ref, err)

    # ========================================================================================
    # placement cycles (the cycle thread)

    def _cycles(self) -> None:
        try:
            while not self._halt.is_set():
                now = self._clock()
                when = self._next_cycle(now)
                probe_at = self._last_gather + self.settings.resync_interval
                wait = min(when, probe_at) - now
                if wait > 0:
                    self._cycle_wake.wait(timeout=min(wait, 1.0))
                    self._cycle_wake.clear()
                    continue
                if self._halt.is_set():
                    return
                if when <= now:
                    self._run_cycle()
                else:
                    self._gather()
        except Exception:
            log.exception("the placement cycle failed", extra={"event": "cycle-failed"})
            raise

    def _next_cycle(self, now: float) -> float:
        """When the next cycle should run (``inf``: nothing to place)."""
        with self._lock:
            if not self._pending:
                return float("inf")
            earliest = float("inf")
            oldest_ready = float("inf")
            for ref, queued in self._pending.items():
                if ref in self._busy:
                    continue
                if self._backoff.ready(ref, now, self._epoch):
                    oldest_ready = min(oldest_ready, queued)
                else:
                    later = self._backoff.next_time(ref, self._epoch)
                    if later is not None:
                        earliest = min(earliest, later)
            if oldest_ready < float("inf"):
                return min(earliest, oldest_ready + self.settings.batch_window)
            return earliest

    def _gather(self) -> Fleet:
        """Gather the fleet, sync the ledger, update health and the capacity epoch."""
        config = FleetConfig(
            tuple(
                replace(s, timeout=min(s.timeout, self.settings.gather_timeout))
                for s in self.config.clusters
            ),
            self.config.source,
        )
        fleet = gather_fleet(config)
        now = time.time()

        def sync(name: str) -> None:
            client = self.clients.get(name)
            if client is None:
                return
            try:
                self.ledger.replace_cluster(name, sync_cluster(client, now=now))
            except KubeError as err:
                log.info("cluster %s: in-flight ledger not synced: %s", name, err)

        reachable = [c.name for c in fleet.clusters if c.reachable]
        if reachable:
            with ThreadPoolExecutor(max_workers=min(16, len(reachable))) as pool:
                list(pool.map(sync, reachable))
        charged = self.ledger.charge(fleet, now=now)
        for cluster in fleet.clusters:
            self._set_health(cluster.name, cluster.reachable, cluster.reason)
        free = {c.name: c.free() for c in charged.clusters if c.reachable}
        with self._wake:
            if _more_room(self._free, free):
                self._epoch += 1
            self._free = free
            self._fleet = charged
            self._last_gather = self._clock()
        return charged

    def _run_cycle(self) -> None:
        started = self._clock()
        with self._wake:
            now = self._clock()
            ready = [
                ref
                for ref in self._pending
                if ref not in self._busy and self._backoff.ready(ref, now, self._epoch)
            ]
            ready.sort(key=lambda r: (self._pending[r], _ref_text(r)))
            ready = ready[: self.settings.max_batch]
            objects = {ref: self._objects.get(ref) for ref in ready}
            for ref in ready:
                self._pending.pop(ref, None)
                self._busy.add(ref)
            epoch = self._epoch
        if not ready:
            return
        handed: set[WorkloadRef] = set()
        try:
            handed = self._decide(ready, objects, epoch)
        finally:
            self._release([r for r in ready if r not in handed])
            self.metrics.cycles.inc()
            log.info(
                "cycle done in %.2fs",
                self._clock() - started,
                extra={"event": "cycle", "count": len(ready), "seconds": self._clock() - started},
            )

    def _release(self, refs: Sequence[WorkloadRef]) -> None:
        """The work on ``refs`` is over: reconcile them again."""
        with self._wake:
            for ref in refs:
                self._busy.discard(ref)
            self._dirty.update(refs)
            self._wake.notify_all()

    def _then_release(self, ref: WorkloadRef, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as err:
            log.warning(
                "%s: recording the outcome failed: %s",
                _ref_text(ref),
                err,
                extra={"event": "record-failed", "workload": _ref_text(ref)},
            )
        finally:
            self._release([ref])

    def _decide(
        self, refs: list[WorkloadRef], objects: Mapping[WorkloadRef, JSON | None], epoch: int
    ) -> set[WorkloadRef]:
        """Decide and dispatch ``refs``; returns those whose outcome is being recorded.

        Recording (hub writes) runs in the worker pool while the next cycle may already
        decide: the dispatched placements are in the ledger, the refs stay busy until recorded.
        """
        timings: dict[str, float] = {}
        mark = time.perf_counter()

        def lap(step: str) -> None:
            nonlocal mark
            now = time.perf_counter()
            timings[step] = round(now - mark, 3)
            mark = now

        fleet = self._gather()
        lap("gather")
        manifests: list[Manifest] = []
        for ref in refs:
            obj = objects.get(ref)
            if obj is None or is_deleting(obj):
                continue
            try:
                decomposition = self._decompose(obj)
            except NoDefinitionError as err:
                self._invalid_object(ref, obj, "NoDefinition", self._no_definition_text(ref, err))
                continue
            except PlacerError as err:
                self._invalid_object(ref, obj, "InvalidWorkload", describe_error(err))
                continue
            manifests.append(Manifest(obj, decomposition, source="hub"))
        lap("decompose")
        if not manifests:
            return set()
        policies = (*self.file_policies, *self._policies.policies)
        decision = solve(
            [m.workload for m in manifests],
            fleet,
            policies=policies,
            solver=self.settings.solver,
            time_limit=self.settings.solve_time_limit,
        )
        lap("solve")
        self.metrics.decision_seconds.observe(decision.summary.seconds)
        decision_id = new_decision_id()
        clients = {
            c.name: self.clients[c.name]
            for c in fleet.clusters
            if c.reachable and c.name in self.clients
        }
        outcomes, unplaced = self._dispatch(
            clients, policies, manifests, decision, fleet, decision_id
        )
        lap("dispatch")
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
        by_ref = {m.ref: m for m in manifests}
        assert self._pool is not None
        handed: set[WorkloadRef] = set()
        for outcome in outcomes:
            manifest = by_ref[outcome.workload]
            for attempt in outcome.attempts:
                self.metrics.dispatch_errors.labels(
                    attempt.cluster or "?", attempt.reason or str(attempt.code or "Error")
                ).inc()
            work: Callable[[], None]
            if outcome.placed and outcome.cluster:
                self._remember_copy(outcome, manifest)
                work = partial(self._record_placed, manifest, outcome, decision_id)
            else:
                reasons = unplaced.get(outcome.workload, {})
                work = partial(self._record_unplaced, manifest, outcome, reasons, epoch)
            self._pool.submit(self._then_release, outcome.workload, work)
            handed.add(outcome.workload)
        log.info(
            "decision %s dispatched",
            decision_id,
            extra={"event": "cycle-timings", "decision": decision_id, "timings": timings},
        )
        return handed

    def _dispatch(
        self,
        clients: Mapping[str, KubeClient],
        policies: Sequence[PlacementPolicy],
        manifests: Sequence[Manifest],
        decision: Decision,
        fleet: Fleet,
        decision_id: str,
    ) -> tuple[list[Outcome], dict[WorkloadRef, dict[str, str]]]:
        """Carry ``decision`` out in concurrent parts (:mod:`placer.controller.fanout`)."""
        parts = split_decision(decision, manifests, fleet, self.settings.dispatch_parts)
        if self.settings.create_namespaces and len(parts) > 1:
            ensure_namespaces(clients, decision.placements)

        def run(part: Part) -> DispatchResult:
            dispatcher = Dispatcher(
                clients,
                policies=policies,
                create_namespaces=self.settings.create_namespaces,
                ledger=self.ledger,
                in_flight_ttl=self.settings.ledger_ttl,
                resume=True,
                transform=self._mark,
                solver=self.settings.solver,
                time_limit=self.settings.solve_time_limit,
            )
            return dispatcher.dispatch(
                list(part.manifests), part.decision, part.fleet, decision_id=decision_id
            )

        if len(parts) == 1:
            results = [run(parts[0])]
        else:
            with ThreadPoolExecutor(len(parts), thread_name_prefix="placer-part") as pool:
                results = list(pool.map(run, parts))
        outcomes = [o for r in results for o in r.outcomes]
        unplaced = {u.workload: dict(u.reasons) for r in results for u in r.decision.unplaced}
        return outcomes, unplaced

    def _warm(self, obj: Mapping[str, Any]) -> None:
        """Decompose ahead of the cycle (errors are the cycle's to report)."""
        try:
            self._decompose(obj)
        except PlacerError:
            pass

    def _decompose(self, obj: Mapping[str, Any]) -> Decomposition:
        key = (uid_of(obj), _version(obj))
        with self._lock:
            cached = self._decomposed.get(key)
            catalog = self._definitions.catalog
        if cached is not None:
            return cached
        decomposition = decompose(obj, catalog, source="hub")
        with self._lock:
            self._decomposed[key] = decomposition
            while len(self._decomposed) > _DECOMPOSITIONS:
                self._decomposed.popitem(last=False)
        return decomposition

    def _no_definition_text(self, ref: WorkloadRef, err: NoDefinitionError) -> str:
        gvk = GroupVersionKind.from_api_version(ref.api_version, ref.kind)
        problem = self._definitions.uncovered.get(gvk)
        return problem or describe_error(err)

    def _mark(self, body: dict[str, Any], manifest: Manifest) -> dict[str, Any]:
        """Mark a copy as this hub's copy of the hub object (``Dispatcher`` transform)."""
        meta = dict(body.get("metadata") or {})
        labels = dict(meta.get("labels") or {})
        annotations = dict(meta.get("annotations") or {})
        labels[LABEL_HUB] = self.settings.hub
        annotations[ANNOTATION_HUB_UID] = uid_of(manifest.body)
        annotations.pop(ANNOTATION_PHASE, None)
        meta["labels"] = labels
        meta["annotations"] = annotations
        return {**body, "metadata": meta}

    def _remember_copy(self, outcome: Outcome, manifest: Manifest) -> None:
        """Put the applied copy in the member cache at once (its watch event follows)."""
        cluster = outcome.cluster or ""
        ref = outcome.workload
        informer = self._member_informers.get((cluster, ref.api_version, ref.kind))
        if informer is None or outcome.record is None:
            return
        body = self._mark(dispatch_manifest(manifest.body, ref, outcome.record), manifest)
        body["metadata"]["uid"] = outcome.uid
        informer.remember(body)

    def _record_placed(self, manifest: Manifest, outcome: Outcome, decision_id: str) -> None:
        ref = manifest.ref
        cluster = outcome.cluster or ""
        record = outcome.record
        placed_at = record.placed_at if record else format_time(time.time())
        obj = dict(manifest.body)
        try:
            obj = self._patch_meta(
                ref, obj, lambda o: record_patch(o, cluster, decision_id, placed_at)
            )
        except NotFoundError:
            log.info("%s: deleted on the hub while it was dispatched", _ref_text(ref))
            with self._lock:
                self._gc.add((cluster, ref.api_version, ref.kind, ref.namespace, ref.name))
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
            generation=_generation(manifest.body),
        )
        obj = self._patch_status(ref, obj, status_patch(obj, condition))
        placement = outcome.placement
        gpus = sum(p.requests.get("nvidia.com/gpu", 0) for p in placement.pods) if placement else 0
        pods = len(placement.pods) if placement else 0
        self.events.record(
            obj,
            "Normal",
            "Placed",
            f"cluster {cluster}: {pods} pods, {gpus} GPUs ({how})",
        )
        now = self._clock()
        with self._lock:
            first = self._first_seen.get(ref, now)
            self._backoff.forget(ref)
            self._invalid.pop(ref, None)
        self.metrics.placements.labels(cluster).inc()
        self.metrics.latency.observe(max(0.0, now - first))
        log.info(
            "%s placed on %s",
            _ref_text(ref),
            cluster,
            extra={
                "event": "placed",
                "workload": _ref_text(ref),
                "cluster": cluster,
                "decision": decision_id,
            },
        )

    def _record_unplaced(
        self, manifest: Manifest, outcome: Outcome, reasons: dict[str, str], epoch: int
    ) -> None:
        ref = manifest.ref
        failed = outcome.state == "failed"
        if reasons:
            detail = "; ".join(f"{c}: {t}" for c, t in reasons.items())
            text = f"no cluster can run it now: {detail}"
        else:
            text = outcome.error or "no cluster can run it now"
        if failed and outcome.error and outcome.error not in text:
            text = f"{outcome.error}; {text}"
        reason = "DispatchFailed" if failed else "Unschedulable"
        category = "DispatchFailed" if failed else unschedulable_reason(reasons)
        obj = dict(manifest.body)
        condition = placed_condition(False, reason, text, time.time(), generation=_generation(obj))
        with self._wake:
            self._backoff.failed(ref, self._clock(), epoch)
            if ref in self._objects:
                self._pending.setdefault(ref, self._clock())
        self.metrics.unschedulable.labels(category).inc()
        try:
            current = self._objects.get(ref, obj)
            self._patch_status(ref, current, status_patch(current, condition))
        except NotFoundError:
            return
        self.events.record(obj, "Warning", reason, text)
        log.info(
            "%s not placed: %s",
            _ref_text(ref),
            text,
            extra={"event": "unschedulable", "workload": _ref_text(ref), "reason": category},
        )

    def _invalid_object(self, ref: WorkloadRef, obj: JSON, reason: str, text: str) -> None:
        """A hub object that cannot be placed as written: condition, Event, no retry."""
        with self._lock:
            self._invalid[ref] = _as_written(obj)
        self.metrics.invalid.labels(reason).inc()
        log.warning(
            "%s cannot be placed: %s",
            _ref_text(ref),
            text,
            extra={"event": "invalid-object", "workload": _ref_text(ref), "reason": reason},
        )
        condition = placed_condition(False, reason, text, time.time(), generation=_generation(obj))
        try:
            self._patch_status(ref, obj, status_patch(obj, condition))
        except KubeError as err:
            log.info("%s: condition not written: %s", _ref_text(ref), err)
        self.events.record(obj, "Warning", reason, text)


_NO_RECORD = PlacementRecord("", "", "")


def _generation(obj: Mapping[str, Any]) -> int | None:
    value = (obj.get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else None


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _as_written(obj: Mapping[str, Any]) -> str:
    """What the user wrote, as far as placement reads it: generation, labels, annotations.

    Status writes (placer's own conditions) change the resourceVersion but not this, so an
    object reported invalid is not tried again until its owner changes it.
    """
    meta = obj.get("metadata") or {}
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k != ANNOTATION_PHASE
    }
    return repr(
        (
            meta.get("generation"),
            sorted((meta.get("labels") or {}).items()),
            sorted(annotations.items()),
        )
    )


def _rv(obj: Mapping[str, Any]) -> int:
    text = _version(obj)
    return int(text) if text.isdigit() else 0


def _more_room(
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
