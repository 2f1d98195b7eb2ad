"""The controller's state and the helpers every part of it uses.

:class:`ControllerBase` holds what the controller knows (caches of hub objects and member
copies, health, queues, the ledger, the decomposition cache) and the primitives shared by the
loop, the single-object actions (:mod:`placer.controller.actions`) and the placement cycles
(:mod:`placer.controller.cycles`): hub writes that keep the caches current, decomposition with
a cache, the marks on copies, the phase of a copy. :class:`placer.controller.Controller`
(:mod:`placer.controller.loop`) composes them. Everything here runs in the controller's
threads; shared state is guarded by one lock (``self._lock``, with ``self._wake`` its
condition).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from placer.controller.events import EventRecorder
from placer.controller.hubconfig import (
    HubDefinitions,
    HubPolicies,
)
from placer.controller.informer import Informer
from placer.controller.leader import LeaderElector
from placer.controller.metrics import Metrics
from placer.controller.reconcile import (
    Backoff,
    Health,
)
from placer.controller.records import (
    ANNOTATION_HUB_UID,
    ANNOTATION_PHASE,
    LABEL_HUB,
    condition_of,
    finalizers_of,
    hub_uid_of,
    is_deleting,
    placed_condition,
    record_of,
    status_patch,
    uid_of,
)
from placer.controller.settings import ControllerSettings
from placer.definitions import (
    Catalog,
    Decomposition,
    decompose,
    phases_of,
)
from placer.dispatch import (
    Existing,
    Ledger,
    Manifest,
)
from placer.dispatch.claims import Succession
from placer.errors import (
    ConflictError,
    PlacerError,
)
from placer.fleet import FleetConfig
from placer.kube import KubeClient
from placer.model import Fleet, WorkloadRef
from placer.policy import PlacementPolicy

log = logging.getLogger(__name__)

JSON = dict[str, Any]
KindKey = tuple[str, str]
_DECOMPOSITIONS = 20_000
_PHASES = 50_000


def ref_text(ref: WorkloadRef) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


__all__ = [
    "JSON",
    "ControllerBase",
    "KindKey",
    "as_written",
    "generation_of",
    "more_room",
    "ref_text",
    "rv_of",
    "version_of",
]


class ControllerBase:
    """State and shared primitives of the placement controller (see the module docstring)."""

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
        #: group -> (cluster, when) of placements dispatched whose hub record may not be
        #: written yet (the hub records are the lasting answer; see ``group_clusters``).
        self._recent_groups: dict[str, tuple[str, float]] = {}
        # members
        self._member_informers: dict[tuple[str, str, str], Informer] = {}
        self._health: dict[str, Health] = {}
        # work
        self._dirty: set[WorkloadRef] = set()
        self._busy: set[WorkloadRef] = set()
        self._pending: dict[WorkloadRef, float] = {}
        self._retry: dict[WorkloadRef, float] = {}
        #: member copies to judge (stale ones are deleted); ``_gc_later`` waits for a tick.
        self._gc: set[tuple[str, str, str, str, str]] = set()
        self._gc_later: set[tuple[str, str, str, str, str]] = set()
        self._backoff = Backoff(settings.backoff.initial, settings.backoff.maximum)
        self._epoch = 0
        self._fleet: Fleet | None = None
        self._free: dict[str, dict[str, int]] = {}
        self._last_gather = float("-inf")
        #: hub object uid -> (resourceVersion, decomposition): one entry per live object.
        self._decomposed: OrderedDict[str, tuple[str, Decomposition]] = OrderedDict()
        #: (cluster, kind, namespace, name) of a copy -> (resourceVersion, phase).
        self._phases: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        #: hub object uid -> members this leader dispatched it to (or tried): where a copy
        #: may be although no record says so (see ``reconcile``'s ``suspects``).
        self._touched: dict[str, set[str]] = {}
        #: uids of hub objects listed when this leader started: an earlier leader may have
        #: dispatched them without recording it, so a copy may be on any member.
        self._inherited: set[str] = set()
        #: hub object -> (message, members) of the ``WaitingForCluster`` condition on it.
        self._blocked: dict[WorkloadRef, tuple[str, tuple[str, ...]]] = {}
        #: (member, apiVersion, kind) -> (why its copies cannot be listed, since when).
        self._listing: dict[tuple[str, str, str], tuple[str, float]] = {}
        #: member -> why it is left out of decisions though it was gathered (see ``_gather``).
        self._excluded: dict[str, str] = {}
        #: failed single-object actions, retried with a growing delay.
        self._action_backoff = Backoff(2.0, 60.0)
        self._pool: ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._elector: LeaderElector | None = None
        self._cycle_running = False

    def _wake_all(self) -> None:
        with self._wake:
            self._wake.notify_all()

    @staticmethod
    def _condition(obj: Mapping[str, Any]) -> dict[str, Any] | None:
        return condition_of(obj)

    def _set_health(self, cluster: str, reachable: bool, reason: str = "") -> None:
        with self._wake:
            current = self._health.get(cluster, Health())
            if current.reachable == reachable:
                if not reachable and reason and reason != current.problem:
                    self._health[cluster] = replace(current, problem=reason)
                return
            self._health[cluster] = Health(
                reachable, self._clock(), current.synced, "" if reachable else reason
            )
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

    def _release(self, refs: Sequence[WorkloadRef]) -> None:
        """The work on ``refs`` is over: reconcile them again."""
        with self._wake:
            for ref in refs:
                self._busy.discard(ref)
            self._dirty.update(refs)
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
        """Keep what a hub write answered, unless the object is gone meanwhile.

        NB: the answer to a write can arrive after the watch's DELETED event for the same
        object (the write that removes the last finalizer is such a write): an object the
        caches no longer hold is never put back.
        """
        if is_deleting(obj) and not finalizers_of(obj):
            self._forget_object(ref, uid_of(obj))  # that write removed it for good
            return
        with self._lock:
            current = self._objects.get(ref)
            if current is None or uid_of(current) != uid_of(obj):
                return
            informer = self._hub_informers.get((ref.api_version, ref.kind))
            if informer is not None:
                informer.refresh(obj)
            if rv_of(current) <= rv_of(obj):
                self._objects[ref] = obj

    def _forget_object(self, ref: WorkloadRef, uid: str) -> None:
        """The hub object is gone: it leaves every queue and cache (busy work ends by itself)."""
        with self._wake:
            current = self._objects.get(ref)
            if current is not None and uid and uid_of(current) != uid:
                return  # a new object of the same name
            self._objects.pop(ref, None)
            if uid:
                self._by_uid.pop(uid, None)
                # its copies are stale now (one listed meanwhile was not judged as such)
                for (cluster, api_version, kind), informer in self._member_informers.items():
                    if (api_version, kind) != (ref.api_version, ref.kind):
                        continue
                    copy = informer.get(ref.namespace, ref.name)
                    if copy is not None and hub_uid_of(copy) == uid:
                        self._gc.add((cluster, api_version, kind, ref.namespace, ref.name))
                self._touched.pop(uid, None)
                self._inherited.discard(uid)
                self._decomposed.pop(uid, None)
            self._pending.pop(ref, None)
            self._dirty.discard(ref)
            self._retry.pop(ref, None)
            self._first_seen.pop(ref, None)
            self._invalid.pop(ref, None)
            self._blocked.pop(ref, None)
            self._backoff.forget(ref)
            self._action_backoff.forget(ref)
            for cluster in self.members:
                self._phases.pop((cluster, ref.kind, ref.namespace, ref.name), None)
            if current is not None and record_of(current) is not None:
                self._epoch += 1  # its capacity comes back
            self._wake.notify_all()
        if uid:
            self.events.forget(uid)

    def _confirm(self, ref: WorkloadRef, obj: JSON, cluster: str, how: str) -> JSON:
        record = record_of(obj)
        decision = record.decision if record else ""
        condition = placed_condition(
            True,
            "Placed",
            f"cluster {cluster}: {how} by decision {decision or '-'}",
            time.time(),
            generation=generation_of(obj),
        )
        return self._patch_status(ref, obj, status_patch(obj, condition))

    def _decompose(self, obj: Mapping[str, Any]) -> Decomposition:
        """The hub object's decomposition, cached per object (its latest version only)."""
        uid, version = uid_of(obj), version_of(obj)
        with self._lock:
            cached = self._decomposed.get(uid)
            catalog = self._definitions.catalog
        if cached is not None and cached[0] == version:
            return cached[1]
        decomposition = decompose(obj, catalog, source="hub")
        with self._lock:
            if uid in self._by_uid:  # (not for an object gone meanwhile)
                self._decomposed[uid] = (version, decomposition)
                self._decomposed.move_to_end(uid)
            while len(self._decomposed) > _DECOMPOSITIONS:
                self._decomposed.popitem(last=False)
        return decomposition

    def _warm(self, obj: Mapping[str, Any]) -> None:
        """Decompose ahead of the cycle (errors are the cycle's to report)."""
        try:
            self._decompose(obj)
        except PlacerError:
            pass

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

    def _own_copy(self, manifest: Manifest, existing: Existing) -> bool:
        """Whether a copy found on a member is this hub's copy of the hub object (the marks
        of :meth:`_mark`; ``Dispatcher`` own_copy): a copy placed by ``placer submit`` or by
        another hub is not adopted by a dispatch."""
        labels = (existing.object.get("metadata") or {}).get("labels") or {}
        return labels.get(LABEL_HUB) == self.settings.hub and hub_uid_of(existing.object) == uid_of(
            manifest.body
        )

    def _phase_of(self, cluster: str, copy: Mapping[str, Any]) -> str:
        """The copy's phase through its definition, cached per copy (latest version only)."""
        meta = copy.get("metadata") or {}
        key = (cluster, str(copy.get("kind")), str(meta.get("namespace")), str(meta.get("name")))
        version = version_of(copy)
        cached = self._phases.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            phase = ",".join(phases_of(copy, self._definitions.catalog))
        except PlacerError:
            phase = ""
        if phase == "Undefined":
            phase = ""
        if len(self._phases) > _PHASES:
            self._phases.clear()
        self._phases[key] = (version, phase)
        return phase


def generation_of(obj: Mapping[str, Any]) -> int | None:
    value = (obj.get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else None


def version_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def as_written(obj: Mapping[str, Any]) -> str:
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


def rv_of(obj: Mapping[str, Any]) -> int:
    text = version_of(obj)
    return int(text) if text.isdigit() else 0


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
