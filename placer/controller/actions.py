"""What the controller does about one hub object, as the loop decided (worker threads).

Each action of :mod:`placer.controller.reconcile` becomes hub and member writes here: confirm
or adopt a placement, mirror a copy's status and phase, re-apply a changed object to its
cluster (with a Warning Event when the edit no longer fits there: placed workloads do not move
on edit), fail over from a lost member, delete a copy, remove the finalizer; and deleting stale
copies whose hub object is gone. An object is *busy* while its actions run; a failure retries
it after a short delay.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace

from placer.controller.base import (
    JSON,
    ControllerBase,
    generation_of,
    ref_text,
)
from placer.controller.hubconfig import (
    describe,
)
from placer.controller.reconcile import (
    Action,
    Adopt,
    Confirm,
    DeleteCopy,
    Failover,
    Finalize,
    Mirror,
    Reapply,
    Wait,
    is_stale,
)
from placer.controller.records import (
    clear_record_patch,
    finalizer_patch,
    format_time,
    hub_uid_of,
    phase_patch,
    placed_condition,
    record_of,
    record_patch,
    status_patch,
    uid_of,
)
from placer.definitions import (
    can_suspend,
    resume,
)
from placer.dispatch import (
    Manifest,
    PlacementRecord,
    dispatch_manifest,
)
from placer.dispatch.existing import placement_from_record
from placer.dispatch.ledger import delete_entry
from placer.errors import (
    KubeError,
    NotFoundError,
    PlacerError,
)
from placer.model import Workload, WorkloadRef
from placer.solver import release, solve

log = logging.getLogger(__name__)

__all__ = ["WAITING", "ActionsMixin"]

#: the ``Placed`` condition's reason (and the Event's) while a member blocks an object.
WAITING = "WaitingForCluster"


class ActionsMixin(ControllerBase):
    """Single-object actions (see the module docstring)."""

    def _execute(
        self, ref: WorkloadRef, obj: JSON, actions: list[Action], copies: dict[str, JSON]
    ) -> None:
        requeue = False
        failed = False
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
                elif isinstance(action, Wait):
                    obj = self._wait(ref, obj, action)
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
            log.exception("%s: action failed", ref_text(ref), extra={"event": "action-failed"})
            self._retry_later(ref, None)
        finally:
            with self._wake:
                self._busy.discard(ref)
                if not failed:
                    self._action_backoff.forget(ref)
                if ref in self._objects:
                    if requeue:
                        self._pending.setdefault(ref, self._clock())
                        self._cycle_wake.set()
                    if not failed:
                        self._dirty.add(ref)
                self._wake.notify_all()

    def _hub_object_gone(self, ref: WorkloadRef, obj: JSON) -> bool:
        """After a 404: whether the hub object is gone (then it is forgotten at once)."""
        try:
            current = self.hub.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        except NotFoundError:
            current = None
        except KubeError:
            return False
        if current is not None and uid_of(current) == uid_of(obj):
            return False
        self._forget_object(ref, uid_of(obj))
        return True

    def _retry_later(self, ref: WorkloadRef, err: KubeError | None) -> None:
        """Reconcile ``ref`` again after a growing delay (2 s, doubling, at most a minute)."""
        with self._lock:
            when = self._action_backoff.failed(ref, self._clock(), 0)
            if ref in self._objects:
                self._retry[ref] = when
        if err is not None:
            log.warning(
                "%s: %s (retried in %.0fs)",
                ref_text(ref),
                err,
                when - self._clock(),
                extra={"event": "action-failed", "workload": ref_text(ref)},
            )

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
            ref_text(ref),
            cluster,
            extra={"event": "adopted", "workload": ref_text(ref), "cluster": cluster},
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
            True, "Placed", f"cluster {cluster}", time.time(), generation=generation_of(obj)
        )
        member_status = copy.get("status")
        mirrored = dict(member_status) if isinstance(member_status, Mapping) else {}
        return self._patch_status(ref, obj, status_patch(obj, condition, mirrored))

    def _reapply(self, ref: WorkloadRef, obj: JSON, cluster: str, copy: JSON) -> JSON:
        """Apply the changed hub object onto its copy (same cluster, same record)."""
        decomposition = self._decompose(obj)
        own = record_of(obj)
        record = PlacementRecord.from_object(copy) or PlacementRecord(
            cluster, own.decision if own else "", format_time(time.time())
        )
        problem = self._edit_does_not_fit(cluster, copy, decomposition.workload)
        if problem:
            message = (
                f"the edited workload may not fit on cluster {cluster}: {problem}; it stays "
                "there (a placed workload does not move when edited), so some of its pods may "
                "wait for room"
            )
            self.events.record(obj, "Warning", "EditDoesNotFit", message)
            log.warning(
                "%s: %s",
                ref_text(ref),
                message,
                extra={"event": "edit-does-not-fit", "workload": ref_text(ref)},
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
            ref_text(ref),
            cluster,
            generation_of(obj),
            extra={"event": "reapplied", "workload": ref_text(ref), "cluster": cluster},
        )
        return self._confirm(ref, obj, cluster, "re-applied")

    def _edit_does_not_fit(self, cluster: str, copy: JSON, workload: Workload) -> str:
        """Why ``workload`` (an edited hub object) would not fit on ``cluster`` once its copy's
        room is given back, from the last gathered capacity; ``""`` when it fits or when that
        cannot be told (no capacity gathered yet, the copy not readable)."""
        with self._lock:
            fleet = self._fleet
        if fleet is None:
            return ""
        base = replace(fleet, clusters=tuple(c for c in fleet.clusters if c.name == cluster))
        if not base.clusters or not base.clusters[0].reachable:
            return ""
        record = PlacementRecord.from_object(copy)
        try:
            old = self._decompose(copy)
        except PlacerError:
            return ""
        if record is not None:
            placement = placement_from_record(Manifest(copy, old, source="member"), cluster, record)
            nodes = {n.name for n in base.clusters[0].nodes}
            pods = tuple(p for p in placement.pods if p.node in nodes)
            base = release(base, [replace(placement, pods=pods)])
        decision = solve(
            [replace(workload, pinned_cluster=None)],
            base,
            solver="greedy",
            time_limit=self.settings.solve_time_limit,
        )
        if decision.placements:
            return ""
        reasons = decision.unplaced[0].reasons if decision.unplaced else {}
        return reasons.get(cluster) or "no room for all of its pods"

    def _failover(self, ref: WorkloadRef, obj: JSON, action: Failover) -> None:
        self.ledger.discard(action.cluster, ref)
        obj = self._patch_meta(ref, obj, clear_record_patch)
        message = f"{action.reason}; placing it on another cluster"
        condition = placed_condition(
            False, "ClusterLost", message, time.time(), generation=generation_of(obj)
        )
        obj = self._patch_status(ref, obj, status_patch(obj, condition))
        self.events.record(obj, "Warning", "ClusterLost", message)
        self.metrics.failovers.labels(action.cluster).inc()
        with self._lock:
            self._epoch += 1
        log.warning(
            "%s: %s",
            ref_text(ref),
            message,
            extra={"event": "failover", "workload": ref_text(ref), "cluster": action.cluster},
        )

    def _wait(self, ref: WorkloadRef, obj: JSON, action: Wait) -> JSON:
        """Say on the hub object which members it waits for, and why (condition and Event)."""
        clusters = tuple(c for c, _ in action.blockers)
        where = "; ".join(f"{c}: {problem}" for c, problem in action.blockers)
        plural = "s" if len(clusters) > 1 else ""
        message = (
            f"waiting for cluster{plural} {', '.join(clusters)}: a copy of this workload may "
            f"already be there, and its copies there cannot be listed ({where}); placing it "
            "elsewhere could run it twice. It is placed once they can be listed again, or once "
            f"out of sight for the grace period ({self.settings.grace_period:g}s); other "
            "workloads are placed meanwhile"
        )
        condition = placed_condition(
            False, WAITING, message[:1024], time.time(), generation=generation_of(obj)
        )
        obj = self._patch_status(ref, obj, status_patch(obj, condition))
        self.events.record(obj, "Warning", WAITING, message)
        with self._lock:
            if ref in self._objects:
                self._blocked[ref] = (message, clusters)
        log.warning(
            "%s: %s",
            ref_text(ref),
            message,
            extra={
                "event": "waiting-for-member",
                "workload": ref_text(ref),
                "cluster": ",".join(clusters),
            },
        )
        return obj

    def _finalize(self, ref: WorkloadRef, obj: JSON) -> None:
        written: list[JSON] = []

        def build(current: JSON) -> JSON | None:
            patch = finalizer_patch(current)
            if patch is not None:
                written.append(patch)
            return patch

        self._patch_meta(ref, obj, build)
        if not written:
            return  # (someone else removed it meanwhile)
        log.info(
            "%s: deleted on the hub; copies removed",
            ref_text(ref),
            extra={"event": "finalized", "workload": ref_text(ref)},
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
            ref_text(ref),
            cluster,
            reason,
            extra={"event": "copy-deleted", "workload": ref_text(ref), "cluster": cluster},
        )

    def _collect(self, candidates: set[tuple[str, str, str, str, str]]) -> None:
        """Delete stale copies whose hub object is gone (or records another cluster)."""
        for cluster, api_version, kind, namespace, name in candidates:
            hub_informer = self._hub_informers.get((api_version, kind))
            informer = self._member_informers.get((cluster, api_version, kind))
            if hub_informer is None or informer is None:
                continue
            if not hub_informer.synced:  # judged once the hub's objects are listed
                with self._lock:
                    self._gc_later.add((cluster, api_version, kind, namespace, name))
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
