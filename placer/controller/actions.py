"""What the controller does about one hub object, as the loop decided (worker threads).

:class:`Actions` turns each action of :mod:`placer.controller.reconcile` into hub and member
writes: confirm or adopt a placement, mirror a copy's status and phase, re-apply a changed
object to its cluster (with a Warning Event when the edit no longer fits there: placed
workloads do not move on edit), fail over from a lost member, say what an object waits for,
delete a copy, remove the finalizer; and delete stale copies whose hub object is gone, and
report invalid hub definitions and policies. It writes; what the controller remembers about
the outcome (retries, the queue, the capacity epoch) is the caller's
(:class:`placer.controller.Controller`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from placer.controller.events import EventRecorder
from placer.controller.hubcache import HubCache
from placer.controller.hubconfig import describe
from placer.controller.hubwrites import HubWriter
from placer.controller.members import MembersView
from placer.controller.metrics import Metrics
from placer.controller.reconcile import (
    Action,
    Adopt,
    Confirm,
    DeleteCopy,
    Failover,
    Finalize,
    Mirror,
    MirrorSpread,
    Reapply,
    Wait,
)
from placer.controller.records import (
    JSON,
    clear_record_patch,
    condition_of,
    finalizer_patch,
    is_own_copy,
    mark_copy,
    phase_patch,
    placed_condition,
    record_of,
    record_patch,
    replicas_annotation,
    status_patch,
)
from placer.controller.settings import ControllerSettings
from placer.definitions import (
    can_suspend,
    resume,
)
from placer.definitions.decompose import Decomposition
from placer.definitions.elastic import write_replicas
from placer.dispatch import (
    Ledger,
    Manifest,
    PlacementRecord,
    dispatch_manifest,
)
from placer.dispatch.eviction import DELETED, evict_copy
from placer.dispatch.existing import placement_from_record
from placer.dispatch.ledger import delete_entry
from placer.dispatch.scaling import running_workload
from placer.errors import (
    KubeError,
    NotFoundError,
    PlacerError,
)
from placer.kube import KubeClient
from placer.model import Fleet, Workload, WorkloadRef
from placer.objects import generation_of, labels_of, name_of, uid_of
from placer.solver import release, solve
from placer.timestamps import rfc3339

log = logging.getLogger(__name__)

__all__ = ["WAITING", "Actions", "wait_message"]

#: the ``Placed`` condition's reason (and the Event's) while a member blocks an object.
WAITING = "WaitingForCluster"


def wait_message(action: Wait, grace_period: float) -> str:
    """The ``WaitingForCluster`` condition's (and Event's) text."""
    clusters = tuple(c for c, _ in action.blockers)
    where = "; ".join(f"{c}: {problem}" for c, problem in action.blockers)
    plural = "s" if len(clusters) > 1 else ""
    return (
        f"waiting for cluster{plural} {', '.join(clusters)}: a copy of this workload may "
        f"already be there, and its copies there cannot be listed ({where}); placing it "
        "elsewhere could run it twice. It is placed once they can be listed again, or once "
        f"out of sight for the grace period ({grace_period:g}s); other "
        "workloads are placed meanwhile"
    )


class Actions:
    """Hub and member writes for one hub object's actions (see the module docstring).

    Args:
        settings: the controller's settings (hub name, grace period, solver limits).
        writer: writes on hub objects.
        hub: the hub cache (decompositions, the catalog).
        members: the members (clients, copy caches, phases).
        ledger: the in-flight ledger (failover and deletion release entries).
        events: the hub's Events.
        metrics: the controller's metrics.
        fleet: the capacity last gathered (``None`` before the first gather).
    """

    def __init__(
        self,
        settings: ControllerSettings,
        *,
        writer: HubWriter,
        hub: HubCache,
        members: MembersView,
        ledger: Ledger,
        events: EventRecorder,
        metrics: Metrics,
        fleet: Callable[[], Fleet | None],
    ) -> None:
        self.settings = settings
        self.writer = writer
        self.hub = hub
        self.members = members
        self.ledger = ledger
        self.events = events
        self.metrics = metrics
        self._fleet = fleet

    def perform(
        self, ref: WorkloadRef, obj: JSON, action: Action, copies: Mapping[str, JSON]
    ) -> JSON:
        """Carry ``action`` out; the hub object as last written."""
        if isinstance(action, DeleteCopy):
            self.delete_copy(ref, action.cluster, reason=action.reason)
        elif isinstance(action, Finalize):
            self.finalize(ref, obj)
        elif isinstance(action, Confirm):
            obj = self.writer.confirm(ref, obj, action.cluster, "Placed")
        elif isinstance(action, Adopt):
            obj = self.adopt(ref, obj, action.cluster, copies[action.cluster])
        elif isinstance(action, Mirror):
            obj = self.mirror(ref, obj, action.cluster, copies[action.cluster])
        elif isinstance(action, MirrorSpread):
            obj = self.mirror_spread(ref, obj, action)
        elif isinstance(action, Reapply):
            obj = self.reapply(ref, obj, action.cluster, copies[action.cluster])
        elif isinstance(action, Failover):
            self.failover(ref, obj, action)
        elif isinstance(action, Wait):
            obj = self.wait(ref, obj, action)
        return obj

    def adopt(self, ref: WorkloadRef, obj: JSON, cluster: str, copy: JSON) -> JSON:
        record = PlacementRecord.from_object(copy)
        decision = record.decision if record and record.decision else "adopted"
        placed_at = record.placed_at if record and record.placed_at else rfc3339()
        replicas = self._running_counts(obj, copy)
        obj = self.writer.patch_meta(
            ref, obj, lambda o: record_patch(o, cluster, decision, placed_at, replicas=replicas)
        )
        obj = self.writer.confirm(ref, obj, cluster, "adopted (its copy was already there)")
        self.events.record(
            obj,
            "Normal",
            "Adopted",
            f"cluster {cluster}: its copy was already there (decision {decision}); kept it",
        )
        log.info(
            "%s: adopted its copy on %s",
            ref,
            cluster,
            extra={"event": "adopted", "workload": str(ref), "cluster": cluster},
        )
        return obj

    def _keep_running_counts(
        self, body: JSON, decomposition: Decomposition, copy: JSON, *, where: str
    ) -> JSON:
        """``body`` (an edited hub object's copy to apply) with each elastic component at the
        count its copy runs now (its decision's choice, or its growth since; within the edited
        range), not at the hub's declared minimum: an edit does not shrink a running workload
        (and does not fight the count placer wrote into the copy)."""
        if not decomposition.workload.elastic:
            return body
        try:
            running = {
                (c.name, c.instance): c.replicas for c in self.hub.decompose(copy).components
            }
            counts = {
                (c.name, c.instance): min(
                    max(running[(c.name, c.instance)], c.replicas), c.max_replicas or 0
                )
                for c in decomposition.workload.components
                if c.elastic and (c.name, c.instance) in running
            }
            return write_replicas(body, decomposition.definition, counts, where=where)
        except PlacerError as err:
            log.info("%s: re-applied at its declared counts: %s", where, err)
            return body

    def _running_counts(self, obj: JSON, copy: JSON) -> str | None:
        """The hub record's :data:`~placer.controller.records.ANNOTATION_REPLICAS` of ``obj``
        running as its ``copy`` does (``None``: not elastic, or either does not decompose)."""
        try:
            workload = self.hub.decompose(obj).workload
            if not workload.elastic:
                return None
            running = running_workload(self.hub.decompose(copy), workload)
        except PlacerError:
            return None
        return replicas_annotation(workload, {c.label: c.replicas for c in running.components})

    def mirror(self, ref: WorkloadRef, obj: JSON, cluster: str, copy: JSON) -> JSON:
        phase = self.members.phase_of(cluster, copy, self.hub.catalog)
        record = record_of(obj)
        if record is not None and record.phase != phase:
            obj = self.writer.patch(ref, phase_patch(phase))
        condition = condition_of(obj) or placed_condition(
            True, "Placed", f"cluster {cluster}", time.time(), generation=generation_of(obj)
        )
        member_status = copy.get("status")
        mirrored = dict(member_status) if isinstance(member_status, Mapping) else {}
        return self.writer.patch_status(ref, obj, status_patch(obj, condition, mirrored))

    def mirror_spread(self, ref: WorkloadRef, obj: JSON, action: MirrorSpread) -> JSON:
        """A spread workload's copies' aggregated status and phase onto the hub object."""
        record = record_of(obj)
        if record is not None and record.phase != action.phase:
            obj = self.writer.patch(ref, phase_patch(action.phase))
        condition = condition_of(obj) or placed_condition(
            True,
            "Placed",
            f"cluster {record.cluster if record else ''}",
            time.time(),
            generation=generation_of(obj),
        )
        return self.writer.patch_status(ref, obj, status_patch(obj, condition, action.status))

    def reapply(self, ref: WorkloadRef, obj: JSON, cluster: str, copy: JSON) -> JSON:
        """Apply the changed hub object onto its copy (same cluster, same record)."""
        decomposition = self.hub.decompose(obj)
        own = record_of(obj)
        record = PlacementRecord.from_object(copy) or PlacementRecord(
            cluster, own.decision if own else "", rfc3339()
        )
        problem = self.edit_does_not_fit(cluster, copy, decomposition.workload)
        if problem:
            message = (
                f"the edited workload may not fit on cluster {cluster}: {problem}; it stays "
                "there (a placed workload does not move when edited), so some of its pods may "
                "wait for room"
            )
            self.events.record(obj, "Warning", "EditDoesNotFit", message)
            log.warning(
                "%s: %s",
                ref,
                message,
                extra={"event": "edit-does-not-fit", "workload": str(ref)},
            )
        body = dispatch_manifest(obj, ref, record)
        body = self._keep_running_counts(body, decomposition, copy, where=f"{ref} on {cluster}")
        if can_suspend(decomposition.definition):
            body = resume(body, decomposition.definition)
        body = mark_copy(body, self.settings.hub, uid_of(obj), labels_of(obj))
        applied = self.members.clients[cluster].apply(body, field_manager="placer", force=False)
        self.members.remember(cluster, ref, applied)
        log.info(
            "%s: re-applied to %s (generation %s)",
            ref,
            cluster,
            generation_of(obj),
            extra={"event": "reapplied", "workload": str(ref), "cluster": cluster},
        )
        return self.writer.confirm(ref, obj, cluster, "re-applied")

    def edit_does_not_fit(self, cluster: str, copy: JSON, workload: Workload) -> str:
        """Why ``workload`` (an edited hub object) would not fit on ``cluster`` once its copy's
        room is given back, from the last gathered capacity; ``""`` when it fits or when that
        cannot be told (no capacity gathered yet, the copy not readable)."""
        fleet = self._fleet()
        if fleet is None:
            return ""
        base = replace(fleet, clusters=tuple(c for c in fleet.clusters if c.name == cluster))
        if not base.clusters or not base.clusters[0].reachable:
            return ""
        record = PlacementRecord.from_object(copy)
        try:
            old = self.hub.decompose(copy)
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

    def failover(self, ref: WorkloadRef, obj: JSON, action: Failover) -> None:
        """Forget the placement on a lost member (the caller queues the object again); a
        spread workload's ledger entries on its other clusters stay (its copies there do)."""
        self.ledger.discard(action.cluster, ref)
        obj = self.writer.patch_meta(ref, obj, clear_record_patch)
        then = (
            "its share is divided over the other clusters"
            if action.spread
            else ("placing it on another cluster")
        )
        message = f"{action.reason}; {then}"
        condition = placed_condition(
            False, "ClusterLost", message, time.time(), generation=generation_of(obj)
        )
        obj = self.writer.patch_status(ref, obj, status_patch(obj, condition))
        self.events.record(obj, "Warning", "ClusterLost", message)
        self.metrics.failovers.labels(action.cluster).inc()
        log.warning(
            "%s: %s",
            ref,
            message,
            extra={"event": "failover", "workload": str(ref), "cluster": action.cluster},
        )

    def wait(self, ref: WorkloadRef, obj: JSON, action: Wait) -> JSON:
        """Say on the hub object which members it waits for, and why (condition and Event)."""
        clusters = tuple(c for c, _ in action.blockers)
        message = wait_message(action, self.settings.grace_period)
        condition = placed_condition(
            False, WAITING, message[:1024], time.time(), generation=generation_of(obj)
        )
        obj = self.writer.patch_status(ref, obj, status_patch(obj, condition))
        self.events.record(obj, "Warning", WAITING, message)
        log.warning(
            "%s: %s",
            ref,
            message,
            extra={
                "event": "waiting-for-member",
                "workload": str(ref),
                "cluster": ",".join(clusters),
            },
        )
        return obj

    def finalize(self, ref: WorkloadRef, obj: JSON) -> None:
        written: list[JSON] = []

        def build(current: JSON) -> JSON | None:
            patch = finalizer_patch(current)
            if patch is not None:
                written.append(patch)
            return patch

        self.writer.patch_meta(ref, obj, build)
        if not written:
            return  # (someone else removed it meanwhile)
        log.info(
            "%s: deleted on the hub; copies removed",
            ref,
            extra={"event": "finalized", "workload": str(ref)},
        )

    def delete_copy(self, ref: WorkloadRef, cluster: str, *, reason: str) -> None:
        client = self.members.clients.get(cluster)
        if client is None:
            return
        client.delete(ref.api_version, ref.kind, ref.name, namespace=ref.namespace, missing_ok=True)
        self.members.forget_copy(cluster, ref)
        self._drop_entry(client, cluster, ref)
        if reason == "stale":
            self.metrics.stale_deleted.labels(cluster).inc()
        log.info(
            "%s: copy on %s deleted (%s)",
            ref,
            cluster,
            reason,
            extra={"event": "copy-deleted", "workload": str(ref), "cluster": cluster},
        )

    def evict_copy(self, ref: WorkloadRef, obj: JSON, cluster: str, preemptor: WorkloadRef) -> str:
        """Evict hub object ``obj``'s copy on ``cluster`` for ``preemptor``: suspended where its
        definition can (parked: :func:`placer.dispatch.eviction.evict_copy`), else deleted; its
        in-flight entry removed. Returns ``suspended`` or ``deleted``; raises
        :class:`~placer.errors.KubeError` (nothing changed)."""
        client = self.members.clients.get(cluster)
        if client is None:
            raise KubeError("no client for it", cluster=cluster)
        try:
            copy = client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        except NotFoundError:
            copy = None
        if copy is None or not is_own_copy(copy, self.settings.hub, uid_of(obj)):
            self.delete_copy(ref, cluster, reason="preempted")  # (nothing of ours to suspend)
            return DELETED
        evicted = evict_copy(client, copy, self.hub.decompose(obj).definition, preemptor)
        if evicted.copy is not None:
            self.members.remember(cluster, ref, evicted.copy)
        else:
            self.members.forget_copy(cluster, ref)
        self._drop_entry(client, cluster, ref)
        log.info(
            "%s: copy on %s %s (preempted by %s)",
            ref,
            cluster,
            evicted.how,
            preemptor,
            extra={"event": "copy-evicted", "workload": str(ref), "cluster": cluster},
        )
        return evicted.how

    def _drop_entry(self, client: KubeClient, cluster: str, ref: WorkloadRef) -> None:
        """``ref``'s copy on ``cluster`` holds nothing any more: its in-flight entry goes."""
        self.ledger.discard(cluster, ref)
        try:
            delete_entry(client, ref)
        except KubeError as err:
            log.info("cluster %s: ledger entry of %s not removed: %s", cluster, ref, err)

    def delete_orphan(self, ref: WorkloadRef, cluster: str) -> None:
        """Delete a stale copy whose hub object is gone."""
        try:
            self.delete_copy(ref, cluster, reason="stale: its hub object is gone")
            self.metrics.stale_deleted.labels(cluster).inc()
        except KubeError as err:
            log.warning("cluster %s: stale copy %s not deleted: %s", cluster, ref, err)

    def report_config(self, obj: JSON, problem: str | None, reason: str) -> None:
        """An invalid hub definition or policy: Warning Event; ``Valid`` condition when the
        kind has a status."""
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
            "lastTransitionTime": rfc3339(),
        }
        api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
        name = name_of(obj)
        client = self.writer.client
        try:
            ref = client.resource(api_version, kind)
            if "status" not in ref.subresources:
                return
            client.patch_status(api_version, kind, name, {"status": {"conditions": [condition]}})
        except KubeError as err:
            log.info("could not set the condition of %s: %s", describe(obj), err)
