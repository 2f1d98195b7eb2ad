"""Elastic workloads grow while they run, when room appears and the framework can resize.

A workload placed with an elastic component below its maximum (:mod:`placer.solver.elastic`:
the decision gave it the largest count that fitted then) may get more pods later, when other
work leaves its member. :class:`Grower` looks after every gather of the placement cycle at the
placed hub objects whose definition says the framework resizes a running workload
(``placer.dev/resizable: "true"``, :attr:`placer.definitions.Definition.resizable`; in the
catalog PyTorchJob, RayCluster and RayService). For each one whose copy runs fewer pods than its
maximum it packs the extra pods on the member's free room as gathered (in-flight placements
charged: :func:`placer.solver.elastic.room_to_grow`) and, when some fit:

1. writes the new count into the copy through the definition's ``replicasPath``
   (:func:`placer.definitions.elastic.write_replicas`) with a conditional replace (PUT with
   the copy's ``resourceVersion``: a copy changed meanwhile is looked at again next time);
2. books the extra pods in the in-flight ledger (in process and on the member) together with
   the copy's bound pods, so that no decision places onto that room before the new pods are
   bound (a member that refuses the entry is logged: the copy is resized all the same);
3. tells the hub object: a Normal Event ``Resized`` (``cluster m1: worker 2 -> 7 of max 12
   replicas``).

A definition without the flag (RayJob: KubeRay does not carry a change of ``rayClusterSpec`` to
the running cluster) is never resized: such a workload stays as placed. The hub object keeps its
own spec; only the copy changes. An object the loop or a cycle is working on is left for the
next look (as :mod:`placer.controller.stuck` does).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from placer.controller.events import EventRecorder
from placer.controller.hubcache import HubCache
from placer.controller.hubwrites import HubWriter
from placer.controller.members import MembersView
from placer.controller.records import ANNOTATION_REPLICAS, record_of, replicas_annotation
from placer.definitions import decompose
from placer.definitions.decompose import Decomposition
from placer.definitions.elastic import write_replicas
from placer.dispatch import Ledger
from placer.dispatch.ledger import InFlight, remove_entries, write_entry
from placer.errors import KubeError, PlacerError
from placer.kube.owners import OwnerWalker
from placer.model import Fleet, Placement, PodAssignment, WorkloadRef, pods_requests
from placer.objects import meta, name_of, uid_of
from placer.podspec import pod_demand
from placer.solver.elastic import room_to_grow

__all__ = ["RESIZED", "Grower", "Growth"]

log = logging.getLogger(__name__)

#: the Event's reason.
RESIZED = "Resized"


@dataclass(frozen=True)
class Growth:
    """A placed workload given more pods on its member."""

    ref: WorkloadRef
    cluster: str
    #: ``component label -> (before, after, maximum)``.
    counts: Mapping[str, tuple[int, int, int]]

    def describe(self) -> str:
        changes = ", ".join(
            f"{label} {before} -> {after} of max {most} replicas"
            for label, (before, after, most) in sorted(self.counts.items())
        )
        return f"cluster {self.cluster}: {changes} (room appeared; the framework resizes it)"


class Grower:
    """Grows resizable elastic workloads on their members (module docstring).

    Args:
        hub: the hub cache (objects, their records, decomposition).
        members: the members (clients, the copies of this hub).
        ledger: the in-flight ledger (the extra pods are booked in it).
        events: the hub's Events.
        claim: take an object, unless the loop or a cycle is working on it;
        release: the object is free again.
    """

    def __init__(
        self,
        *,
        hub: HubCache,
        members: MembersView,
        ledger: Ledger,
        events: EventRecorder,
        claim: Callable[[WorkloadRef], bool],
        release: Callable[[WorkloadRef], None],
        writer: HubWriter | None = None,
    ) -> None:
        self.hub = hub
        self.writer = writer
        self.members = members
        self.ledger = ledger
        self.events = events
        self._claim = claim
        self._release = release
        self._lock = threading.Lock()
        #: workloads that could not grow, with their member and its free room then.
        self._tried: dict[WorkloadRef, tuple[str, dict[str, int]]] = {}

    def check(self, fleet: Fleet) -> list[Growth]:
        """Grow what can grow on ``fleet`` (the capacity just gathered, in flight charged). A
        workload that could not grow is looked at again only when its member's free room
        changed."""
        grown: list[Growth] = []
        free = {c.name: c.free() for c in fleet.clusters if c.reachable}
        with self._lock:
            for obj in self.hub.objects():
                found = self._candidate(obj)
                if found is None:
                    continue
                ref, cluster, copy, decomposition = found
                if cluster not in free or self._tried.get(ref) == (cluster, free[cluster]):
                    continue
                plan = self.plan(ref, cluster, copy, decomposition, fleet)
                if plan is None:
                    self._tried[ref] = (cluster, free[cluster])
                    continue
                if not self._claim(ref):
                    continue
                try:
                    growth = self.resize(ref, cluster, copy, decomposition, plan)
                finally:
                    self._release(ref)
                if growth is None:
                    continue
                self._tried.pop(ref, None)
                grown.append(growth)
                self.events.record(obj, "Normal", RESIZED, growth.describe())
                log.info(
                    "%s: %s",
                    ref,
                    growth.describe(),
                    extra={"event": "resized", "workload": str(ref), "cluster": cluster},
                )
        return grown

    def _candidate(
        self, obj: Mapping[str, Any]
    ) -> tuple[WorkloadRef, str, dict[str, Any], Decomposition] | None:
        record = record_of(obj)
        if record is None or not record.confirmed or record.terminal:
            return None
        try:
            decomposition = self.hub.decompose(obj)
        except PlacerError:
            return None
        if not decomposition.definition.resizable or not decomposition.workload.elastic:
            return None
        ref = decomposition.ref
        copies, _ = self.members.view(ref, uid_of(obj))
        copy = copies.get(record.cluster)
        if copy is None or not uid_of(copy):
            return None
        return ref, record.cluster, copy, decomposition

    def plan(
        self,
        ref: WorkloadRef,
        cluster: str,
        copy: dict[str, Any],
        decomposition: Decomposition,
        fleet: Fleet,
    ) -> tuple[dict[str, int], tuple[PodAssignment, ...]] | None:
        """The copy's counts now (by component label) and the extra pods that fit, or
        ``None`` when none does."""
        try:
            running = decompose(copy, decomposition.definition, source=f"{ref} on {cluster}")
        except PlacerError as err:
            log.info("%s: not resized, the copy does not read: %s", ref, err)
            return None
        current = {c.label: c.replicas for c in running.components}
        extra = room_to_grow(decomposition.workload, current, fleet, cluster)
        return (current, extra) if extra else None

    def resize(
        self,
        ref: WorkloadRef,
        cluster: str,
        copy: dict[str, Any],
        decomposition: Decomposition,
        plan: tuple[dict[str, int], tuple[PodAssignment, ...]],
    ) -> Growth | None:
        """Book the extra pods and write the new counts into the copy (module docstring);
        ``None`` when the member refused."""
        current, extra = plan
        added: dict[str, int] = {}
        for pod in extra:
            label = f"{pod.component}/{pod.instance}" if pod.instance else pod.component
            added[label] = added.get(label, 0) + 1
        counts = {
            (c.name, c.instance): current[c.label] + added[c.label]
            for c in decomposition.workload.components
            if c.label in added
        }
        maxima = {c.label: c.max_replicas or 0 for c in decomposition.workload.components}
        client = self.members.clients.get(cluster)
        if client is None:
            return None
        where = f"{ref} on {cluster}"
        try:
            resized = write_replicas(copy, decomposition.definition, counts, where=where)
            client.replace(resized, field_manager="placer")
        except (KubeError, PlacerError) as err:
            log.info("%s: not resized on %s now: %s", ref, cluster, err)
            return None
        try:
            self._book(client, ref, cluster, copy, extra)
        except KubeError as err:
            log.warning("%s: resized on %s, but its new pods are not booked: %s", ref, cluster, err)
        self._record(ref, decomposition, {k: n + added.get(k, 0) for k, n in current.items()})
        return Growth(
            ref,
            cluster,
            {
                label: (current[label], current[label] + n, maxima.get(label, 0))
                for label, n in added.items()
            },
        )

    def _record(
        self, ref: WorkloadRef, decomposition: Decomposition, counts: dict[str, int]
    ) -> None:
        """The hub object's :data:`~placer.controller.records.ANNOTATION_REPLICAS` at the new
        counts (what its queue counts it at); a failure is logged (the next growth, or
        placement, writes it again)."""
        replicas = replicas_annotation(decomposition.workload, counts)
        if self.writer is None or replicas is None:
            return
        try:
            self.writer.patch(ref, {"metadata": {"annotations": {ANNOTATION_REPLICAS: replicas}}})
        except KubeError as err:
            log.info("%s: its new replica counts are not recorded on the hub: %s", ref, err)

    def _book(
        self,
        client: Any,
        ref: WorkloadRef,
        cluster: str,
        copy: Mapping[str, Any],
        extra: tuple[PodAssignment, ...],
    ) -> None:
        """The in-flight entry of the resized copy, replacing its earlier one: its bound pods
        (which retire themselves again as the entry is observed), what its earlier entry still
        charged (planned pods not bound yet), and the extra pods."""
        walker = OwnerWalker(client)
        before: list[PodAssignment] = []
        namespace = str(meta(copy).get("namespace") or "")
        for pod in client.list("v1", "Pod", namespace=namespace).items:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and walker.owned_by(pod, uid_of(copy)):
                requests = dict(pod_demand(pod.get("spec") or {}).requests)
                before.append(PodAssignment(name_of(pod), "", len(before), str(node), requests))
        previous = self.ledger.get(cluster, ref)
        if previous is not None and not previous.expired(time.time()):
            before += previous.placement.pods
        pods = (*before, *extra)
        placement = Placement(ref, cluster, pods, pods_requests(pods))
        entry = write_entry(client, InFlight.new(placement, f"resize-{int(time.time())}"))
        self.ledger.add(entry)
        if previous is not None and previous.store and previous.store != entry.store:
            remove_entries(client, previous.store, [ref])
