"""Work stuck on a member moves: pods left Pending as unschedulable past ``pendingTimeout``.

placer decides on the capacity it gathered; the member's scheduler may still leave a placed
workload's pods ``Pending`` — others took the room since, a gang scheduler holds a gang back,
a node went away. :class:`StuckMover` looks, after every gather of the placement cycle, at the
``Pending`` pods of each member holding a placed copy — from the member's pod watch (the
capacity cache keeps a Pending pod's ``PodScheduled`` condition: no request in steady state),
else with one list per member (``status.phase=Pending``; ``--capacity list``) — whose
``PodScheduled`` condition is ``False`` with reason ``Unschedulable``, finds the copy each
belongs to (owner chain, :class:`~placer.kube.owners.OwnerWalker`) and so its hub object. A
hub object with such a pod unschedulable for longer than the ``pendingTimeout`` of its
PlacementPolicy (default :data:`DEFAULT_PENDING_TIMEOUT`, 5 minutes) is **re-placed**:

1. its copy on that member is deleted (so that it can never run twice: the copy is gone before
   the hub object is decided again) with its in-flight entry;
2. the member is added to the hub object's annotation ``placer.dev/avoid-clusters``, which the
   solver honours (:attr:`placer.model.Workload.avoid_clusters`), and its placement record is
   cleared, so that the next cycle decides it again without that member;
3. the hub object says so: condition ``Placed=False`` reason ``Rescheduled`` and a Warning Event
   ``Rescheduled`` carrying the member scheduler's own message (``0/4 nodes are available:
   ...``), and the metric ``placer_rescheduled_total{cluster}``.

Likewise a workload whose copy **failed** (its mirrored phase ``Failed``) is retried on another
member when its PlacementPolicy says ``retry: {onFailure: N}``, at most N times (counted in the
hub object's annotation ``placer.dev/retries``; reason ``Retried``).

An object the loop or a cycle is working on is left for the next look (the move holds the
object in the work queue, as a cycle does); one whose copy cannot be deleted
stays where it is (and is tried again at the next look). Pure parts (:func:`unschedulable_pod`)
are tested on their own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from placer.controller.events import EventRecorder
from placer.controller.hubcache import HubCache
from placer.controller.hubwrites import HubWriter
from placer.controller.members import MembersView
from placer.controller.records import (
    JSON,
    clear_record_patch,
    placed_condition,
    record_of,
    status_patch,
)
from placer.dispatch import Ledger
from placer.dispatch.ledger import delete_entry
from placer.errors import KubeError, PlacerError
from placer.kube.owners import OwnerWalker
from placer.model import ANNOTATION_AVOID, WorkloadRef
from placer.objects import annotations_of, generation_of, meta, name_of, uid_of
from placer.policy import PlacementPolicy, policy_for

__all__ = [
    "DEFAULT_PENDING_TIMEOUT",
    "RESCHEDULED",
    "Stuck",
    "StuckMover",
    "avoid_patch",
    "unschedulable_pod",
]

log = logging.getLogger(__name__)

#: seconds a placed workload's pod may stay unschedulable on its member when no policy says.
DEFAULT_PENDING_TIMEOUT = 300.0
#: the condition's and the Event's reason.
RESCHEDULED = "Rescheduled"
#: ... when a failed copy is retried elsewhere (``retry.onFailure``).
RETRIED = "Retried"
#: on hub objects: failed copies retried elsewhere so far.
ANNOTATION_RETRIES = "placer.dev/retries"


@dataclass(frozen=True)
class Stuck:
    """A placed workload whose pods the member's scheduler leaves Pending."""

    ref: WorkloadRef
    cluster: str
    #: pods unschedulable, and for how long the longest has been (seconds).
    pods: int
    seconds: float
    #: the member scheduler's message (the longest-waiting pod's).
    message: str
    #: a failed copy retried elsewhere (``retry.onFailure``), not pods stuck.
    retry: bool = False


def unschedulable_pod(pod: Mapping[str, Any], now: float) -> tuple[float, str] | None:
    """``(seconds unschedulable, the scheduler's message)`` of a Pending pod its scheduler could
    not place (``PodScheduled=False``, reason ``Unschedulable``), else ``None``."""
    status = pod.get("status") or {}
    if status.get("phase") != "Pending" or (pod.get("spec") or {}).get("nodeName"):
        return None
    for condition in status.get("conditions") or ():
        if not isinstance(condition, Mapping) or condition.get("type") != "PodScheduled":
            continue
        if condition.get("status") != "False" or condition.get("reason") != "Unschedulable":
            return None
        since = _epoch(condition.get("lastTransitionTime")) or _epoch(
            meta(pod).get("creationTimestamp")
        )
        seconds = max(0.0, now - since) if since is not None else 0.0
        return seconds, str(condition.get("message") or "Unschedulable")
    return None


def avoid_patch(obj: Mapping[str, Any], cluster: str, retry: bool = False) -> dict[str, Any]:
    """Merge patch clearing the placement record and adding ``cluster`` to the clusters the
    object avoids (``placer.dev/avoid-clusters``); ``retry`` counts one more retry of a failed
    copy (``placer.dev/retries``)."""
    patch = clear_record_patch(obj)
    annotations = annotations_of(obj)
    avoided = [c for c in annotations.get(ANNOTATION_AVOID, "").split(",") if c]
    if cluster not in avoided:
        avoided.append(cluster)
    patch["metadata"]["annotations"][ANNOTATION_AVOID] = ",".join(avoided)
    if retry:
        done = _count(annotations.get(ANNOTATION_RETRIES))
        patch["metadata"]["annotations"][ANNOTATION_RETRIES] = str(done + 1)
    return patch


class StuckMover:
    """Finds placed workloads stuck on their members and re-places them (module docstring).

    Args:
        hub: the hub cache (objects, their records, the hub's policies).
        members: the members (clients, the copies of this hub).
        writer: writes on hub objects.
        ledger: the in-flight ledger (entries of deleted copies are dropped).
        events: the hub's Events.
        policies: the ``--policy`` files' policies (before the hub's).
        claim: take an object for the move, unless the loop or a cycle is working on it
            (``False``: busy; looked at again next time);
        release: the move of an object is over (the loop looks at it again).
        rescheduled: ``rescheduled(cluster)`` counts a move (the metric).
        clock: wall-clock seconds (pod conditions carry wall-clock times).
    """

    def __init__(
        self,
        *,
        hub: HubCache,
        members: MembersView,
        writer: HubWriter,
        ledger: Ledger,
        events: EventRecorder,
        policies: Sequence[PlacementPolicy],
        claim: Callable[[WorkloadRef], bool],
        release: Callable[[WorkloadRef], None],
        rescheduled: Callable[[str], None] = lambda cluster: None,
        clock: Callable[[], float] = time.time,
        pending_pods: Callable[[str], Sequence[Mapping[str, Any]] | None] = lambda c: None,
    ) -> None:
        self.hub = hub
        self.members = members
        self.writer = writer
        self.ledger = ledger
        self.events = events
        self.file_policies = tuple(policies)
        self._claim = claim
        self._release = release
        self._rescheduled = rescheduled
        self._clock = clock
        #: a member's Pending pods with their PodScheduled condition, from the capacity
        #: watches (None: not known: they are listed).
        self._pending_pods = pending_pods
        self._lock = threading.Lock()

    def timeout_for(self, obj: Mapping[str, Any]) -> float:
        """The object's ``pendingTimeout`` (its policy's, else the default)."""
        try:
            workload = self.hub.decompose(obj).workload
        except PlacerError:  # an object that does not decompose is not placed
            return DEFAULT_PENDING_TIMEOUT
        policy = policy_for(workload, (*self.file_policies, *self.hub.policies))
        if policy is not None and policy.pending_timeout is not None:
            return policy.pending_timeout
        return DEFAULT_PENDING_TIMEOUT

    def retries_for(self, obj: Mapping[str, Any]) -> int:
        """How many times a failed copy of the object is retried elsewhere (its policy's
        ``retry.onFailure``, else 0)."""
        try:
            workload = self.hub.decompose(obj).workload
        except PlacerError:
            return 0
        policy = policy_for(workload, (*self.file_policies, *self.hub.policies))
        return policy.retry_on_failure if policy is not None else 0

    def find_failed(self) -> list[Stuck]:
        """Placed workloads whose copy failed, with retries left (``retry.onFailure``)."""
        found: list[Stuck] = []
        for obj in self.hub.objects():
            record = record_of(obj)
            if record is None or not record.confirmed or "Failed" not in record.phase.split(","):
                continue
            done = _count(annotations_of(obj).get(ANNOTATION_RETRIES))
            if done >= self.retries_for(obj):
                continue
            ref = WorkloadRef(
                str(obj.get("apiVersion")), str(obj.get("kind")), _namespace(obj), name_of(obj)
            )
            message = f"its copy failed there (retry {done + 1} of {self.retries_for(obj)})"
            found.append(Stuck(ref, record.cluster, 0, 0.0, message, retry=True))
        return found

    def find(self) -> list[Stuck]:
        """The placed workloads stuck past their timeout, one per hub object."""
        now = self._clock()
        placed: dict[str, dict[str, tuple[WorkloadRef, JSON]]] = {}
        for obj in self.hub.objects():
            record = record_of(obj)
            if record is None or not record.confirmed or record.terminal:
                continue
            ref = WorkloadRef(
                str(obj.get("apiVersion")), str(obj.get("kind")), _namespace(obj), name_of(obj)
            )
            copies, _ = self.members.view(ref, uid_of(obj))
            copy = copies.get(record.cluster)
            if copy is not None and uid_of(copy):
                placed.setdefault(record.cluster, {})[uid_of(copy)] = (ref, obj)
        found: list[Stuck] = []
        for cluster, by_uid in sorted(placed.items()):
            client = self.members.clients.get(cluster)
            if client is None:
                continue
            pods = self._pending_pods(cluster)
            if pods is None:  # no pod watch (--capacity list), or it has not listed yet
                try:
                    pods = client.list("v1", "Pod", field_selector="status.phase=Pending").items
                except KubeError as err:
                    log.info("cluster %s: pending pods not listed: %s", cluster, err.message)
                    continue
            if pods:
                found += self._stuck_on(cluster, client, pods, by_uid, now)
        return found

    def _stuck_on(
        self,
        cluster: str,
        client: Any,
        pods: Iterable[Mapping[str, Any]],
        copies: Mapping[str, tuple[WorkloadRef, JSON]],
        now: float,
    ) -> list[Stuck]:
        walker = OwnerWalker(client)
        waiting: dict[str, list[tuple[float, str]]] = {}
        for pod in pods:
            state = unschedulable_pod(pod, now)
            if state is None:
                continue
            owners = walker.owner_uids(pod, stop=copies)  # up the chain to a copy (memoised)
            copy_uid = next((u for u in copies if u in owners), None)
            if copy_uid is not None:
                waiting.setdefault(copy_uid, []).append(state)
        found: list[Stuck] = []
        for copy_uid, states in waiting.items():
            ref, obj = copies[copy_uid]
            seconds, message = max(states)
            if seconds >= self.timeout_for(obj):
                found.append(Stuck(ref, cluster, len(states), seconds, message))
        return found

    def check(self) -> list[Stuck]:
        """Find and move the stuck workloads; the ones moved."""
        with self._lock:  # one look at a time
            moved: list[Stuck] = []
            for stuck in [*self.find(), *self.find_failed()]:
                if not self._claim(stuck.ref):
                    continue
                try:
                    if self.move(stuck):
                        moved.append(stuck)
                finally:
                    self._release(stuck.ref)
            return moved

    def move(self, stuck: Stuck) -> bool:
        """Delete the copy, then forget the placement and avoid the member; False when the copy
        could not be deleted (it stays, and is looked at again)."""
        ref, cluster = stuck.ref, stuck.cluster
        obj = self.hub.get(ref)
        client = self.members.clients.get(cluster)
        if obj is None or client is None:
            return False
        try:
            client.delete(
                ref.api_version, ref.kind, ref.name, namespace=ref.namespace, missing_ok=True
            )
        except KubeError as err:
            log.warning(
                "%s: stuck on %s, but its copy could not be deleted (%s): it stays",
                ref,
                cluster,
                err.message,
                extra={"event": "reschedule-failed", "workload": str(ref), "cluster": cluster},
            )
            return False
        self.members.forget_copy(cluster, ref)
        self.ledger.discard(cluster, ref)
        try:
            delete_entry(client, ref)
        except KubeError as err:
            log.info("cluster %s: ledger entry of %s not removed: %s", cluster, ref, err)
        obj = self.writer.patch_meta(ref, obj, lambda o: avoid_patch(o, cluster, stuck.retry))
        if stuck.retry:
            reason = RETRIED
            message = (
                f"cluster {cluster}: {stuck.message}; its copy there was deleted, placing it "
                "on another cluster"
            )
        else:
            reason = RESCHEDULED
            message = (
                f"cluster {cluster}: {stuck.pods} pod(s) unschedulable for "
                f"{stuck.seconds:.0f}s (pendingTimeout {self.timeout_for(obj):g}s): "
                f"{stuck.message}; its copy there was deleted, placing it on another cluster"
            )
        condition = placed_condition(
            False, reason, message, time.time(), generation=generation_of(obj)
        )
        obj = self.writer.patch_status(ref, obj, status_patch(obj, condition))
        self.events.record(obj, "Warning", reason, message)
        self._rescheduled(cluster)
        log.warning(
            "%s: %s",
            ref,
            message,
            extra={"event": "rescheduled", "workload": str(ref), "cluster": cluster},
        )
        return True


def _count(text: object) -> int:
    try:
        return max(0, int(str(text))) if text is not None else 0
    except ValueError:
        return 0


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def _epoch(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
