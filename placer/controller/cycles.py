"""Placement cycles: collect, decide together, dispatch, record (the cycle thread).

A cycle takes every ready pending object (after the batch window; unschedulable ones when
their backoff allows), gathers the fleet and syncs the in-flight ledger (a member whose nodes,
pods, ledger or copies of a kind in use cannot be listed is left out, with its reason),
decomposes, solves in batch, dispatches through :class:`placer.dispatch.Dispatcher` in
concurrent parts (:mod:`placer.controller.fanout`) and hands the recording of each outcome on
the hub to the worker pool, so that the next cycle can decide while the hub is written.
Objects that cannot be placed as written are reported once (condition and Event) until they
change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial

from placer.controller.base import (
    JSON,
    ControllerBase,
    as_written,
    generation_of,
    more_room,
    ref_text,
)
from placer.controller.fanout import Part, Redecisions, ensure_namespaces, split_decision
from placer.controller.metrics import exclusion_reason, unschedulable_reason
from placer.controller.reconcile import group_clusters
from placer.controller.records import (
    ANNOTATION_HUB_UID,
    LABEL_HUB,
    describe_error,
    format_time,
    is_deleting,
    placed_condition,
    record_patch,
    status_patch,
    uid_of,
)
from placer.definitions import (
    GroupVersionKind,
)
from placer.dispatch import (
    IN_FLIGHT,
    Dispatcher,
    DispatchOptions,
    DispatchResult,
    Manifest,
    Outcome,
    new_decision_id,
    sync_cluster,
)
from placer.errors import (
    ClusterUnreachableError,
    KubeError,
    NoDefinitionError,
    NotFoundError,
    PlacerError,
)
from placer.fleet import ClusterSource, FleetConfig, gather_fleet
from placer.fleet.gather import failure_reason
from placer.kube import KubeClient
from placer.model import Decision, Fleet, WorkloadRef
from placer.policy import PlacementPolicy
from placer.solver import solve

log = logging.getLogger(__name__)


#: how long a dispatched group member's cluster is remembered while its hub record is written.
RECENT_GROUP_SECONDS = 120.0


def batch_deadline(oldest: float, newest: float, window: float) -> float:
    """When a cycle deciding objects queued from ``oldest`` to ``newest`` should start.

    At least ``window`` after the oldest; while objects keep arriving (the newest less than a
    quarter window ago) a burst is collected whole, up to three windows after the oldest —
    one decision for a burst costs one gather and one solve, not one per window.
    """
    return max(oldest + window, min(newest + window / 4, oldest + 3 * window))


__all__ = ["CyclesMixin", "batch_deadline"]


class CyclesMixin(ControllerBase):
    """Placement cycles (see the module docstring)."""

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
            newest_ready = float("-inf")
            for ref, queued in self._pending.items():
                if ref in self._busy:
                    continue
                if self._backoff.ready(ref, now, self._epoch):
                    oldest_ready = min(oldest_ready, queued)
                    newest_ready = max(newest_ready, queued)
                else:
                    later = self._backoff.next_time(ref, self._epoch)
                    if later is not None:
                        earliest = min(earliest, later)
            if oldest_ready < float("inf"):
                deadline = batch_deadline(oldest_ready, newest_ready, self.settings.batch_window)
                return min(earliest, deadline)
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
        now = time.time()
        unreadable: dict[str, str] = {}

        def sync(source: ClusterSource) -> None:
            """Each member's ledger is read before its pods (see ``gather_charged``)."""
            client = self.clients.get(source.name)
            if client is None:
                return
            try:
                entries = sync_cluster(client, now=now, succession=self.succession)
            except ClusterUnreachableError:
                raise
            except KubeError as err:
                problem = failure_reason(err)
                unreadable[source.name] = f"its in-flight ledger cannot be read: {problem}"
                return
            self.ledger.replace_cluster(source.name, entries)

        gathered = gather_fleet(config, before=sync)
        for cluster in gathered.clusters:
            self._set_health(cluster.name, cluster.reachable, cluster.reason)
        fleet = self._exclude(gathered, unreadable)
        charged = self.ledger.charge(fleet, now=now)
        free = {c.name: c.free() for c in charged.clusters if c.reachable}
        with self._wake:
            if more_room(self._free, free):
                self._epoch += 1
            self._free = free
            self._fleet = charged
            self._last_gather = self._clock()
        return charged

    def _exclude(self, gathered: Fleet, unreadable: Mapping[str, str]) -> Fleet:
        """The fleet to decide on: members gathered but not fully listable are left out.

        A member whose in-flight ledger, or whose copies of a kind in use, cannot be listed
        (401, 403, an error) gets ``reachable=False`` with the reason: its free room and the
        copies there are not known, so nothing is placed there until it can be listed (the
        gather's own failures are already unreachable). Says so in the log when it changes
        and in ``placer_cluster_excluded``.
        """
        with self._lock:
            listing = dict(self._listing)
        problems: dict[str, str] = dict(unreadable)
        for (member, api_version, kind), (reason, _) in sorted(listing.items()):
            if member not in problems:
                problems[member] = f"its {kind} objects ({api_version}) cannot be listed: {reason}"
        clusters = []
        excluded: dict[str, str] = {}
        for cluster in gathered.clusters:
            if not cluster.reachable:
                excluded[cluster.name] = cluster.reason
            elif cluster.name in problems:
                excluded[cluster.name] = problems[cluster.name]
                cluster = replace(cluster, reachable=False, reason=problems[cluster.name])
            clusters.append(cluster)
        with self._lock:
            before, self._excluded = self._excluded, excluded
        for name in sorted(set(before) | set(excluded)):
            old, new = before.get(name), excluded.get(name)
            if old == new:
                continue
            if old is not None:
                self.metrics.excluded.remove(name, exclusion_reason(old))
            if new is not None:
                self.metrics.excluded.labels(name, exclusion_reason(new)).set(1)
                if name in problems:  # (the gather's failures are logged as member health)
                    log.warning(
                        "member %s is left out of placement decisions: %s",
                        name,
                        new,
                        extra={"event": "member-excluded", "cluster": name},
                    )
            else:
                log.info(
                    "member %s is used for placement decisions again",
                    name,
                    extra={"event": "member-included", "cluster": name},
                )
        return replace(gathered, clusters=tuple(clusters))

    def _run_cycle(self) -> None:
        started = self._clock()
        with self._wake:
            now = self._clock()
            ready = [
                ref
                for ref in self._pending
                if ref not in self._busy and self._backoff.ready(ref, now, self._epoch)
            ]
            ready.sort(key=lambda r: (self._pending[r], ref_text(r)))
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

    def _then_release(self, ref: WorkloadRef, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as err:
            log.warning(
                "%s: recording the outcome failed: %s",
                ref_text(ref),
                err,
                extra={"event": "record-failed", "workload": ref_text(ref)},
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
        manifests = self._pin_groups(manifests, fleet)
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
        now = self._clock()
        for outcome in outcomes:
            group = by_ref[outcome.workload].workload.group
            if outcome.placed and outcome.cluster and group:
                self._recent_groups[group] = (outcome.cluster, now)
        assert self._pool is not None
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
            if tried:  # where a copy may be, whatever the hub ends up recording
                with self._lock:
                    if manifest.ref in self._objects:
                        self._touched.setdefault(uid_of(manifest.body), set()).update(tried)
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

    def _pin_groups(self, manifests: list[Manifest], fleet: Fleet) -> list[Manifest]:
        """Pin new members of a ``placer.dev/group`` to the cluster of members already placed.

        The hub records say where each group went (:func:`group_clusters`); placements
        dispatched in the last ``RECENT_GROUP_SECONDS`` whose record is still being written
        count too. A member that carries its own ``placer.dev/cluster`` pin keeps it.
        """
        reachable = [c.name for c in fleet.clusters if c.reachable]
        with self._lock:
            objects = list(self._objects.values())
        where = group_clusters(objects, reachable)
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
    ) -> tuple[list[Outcome], dict[WorkloadRef, dict[str, str]]]:
        """Carry ``decision`` out in concurrent parts (:mod:`placer.controller.fanout`)."""
        parts = split_decision(decision, manifests, fleet, self.settings.dispatch_parts)
        if self.settings.create_namespaces and len(parts) > 1:
            ensure_namespaces(clients, decision.placements)
        redecisions = Redecisions(
            policies=policies,
            solver=self.settings.solver,
            time_limit=self.settings.solve_time_limit,
        )

        def run(index: int, part: Part) -> DispatchResult:
            options = DispatchOptions(
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
                decide=redecisions.for_part(index) if len(parts) > 1 else None,
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

    def _no_definition_text(self, ref: WorkloadRef, err: NoDefinitionError) -> str:
        gvk = GroupVersionKind.from_api_version(ref.api_version, ref.kind)
        problem = self._definitions.uncovered.get(gvk)
        return problem or describe_error(err)

    def _remember_copy(self, outcome: Outcome, manifest: Manifest) -> None:
        """Put the applied copy in the member cache at once (its watch event follows)."""
        cluster = outcome.cluster or ""
        ref = outcome.workload
        informer = self._member_informers.get((cluster, ref.api_version, ref.kind))
        if informer is None or outcome.record is None:
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
        informer.remember(stub)

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
            log.info("%s: deleted on the hub while it was dispatched", ref_text(ref))
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
            generation=generation_of(manifest.body),
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
            ref_text(ref),
            cluster,
            extra={
                "event": "placed",
                "workload": ref_text(ref),
                "cluster": cluster,
                "decision": decision_id,
            },
        )

    def _record_unplaced(
        self, manifest: Manifest, outcome: Outcome, reasons: dict[str, str], epoch: int
    ) -> None:
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
        obj = dict(manifest.body)
        condition = placed_condition(
            False, reason, text, time.time(), generation=generation_of(obj)
        )
        with self._wake:
            if ref not in self._objects:
                return  # deleted meanwhile
            self._backoff.failed(ref, self._clock(), epoch, room=not in_flight)
            self._pending.setdefault(ref, self._clock())
        if not in_flight:
            self.metrics.unschedulable.labels(category).inc()
        try:
            current = self._objects.get(ref, obj)
            self._patch_status(ref, current, status_patch(current, condition))
        except NotFoundError:
            return
        self.events.record(obj, "Normal" if in_flight else "Warning", reason, text)
        log.info(
            "%s not placed: %s",
            ref_text(ref),
            text,
            extra={"event": "unschedulable", "workload": ref_text(ref), "reason": category},
        )

    def _invalid_object(self, ref: WorkloadRef, obj: JSON, reason: str, text: str) -> None:
        """A hub object that cannot be placed as written: condition, Event, no retry."""
        with self._lock:
            self._invalid[ref] = as_written(obj)
        self.metrics.invalid.labels(reason).inc()
        log.warning(
            "%s cannot be placed: %s",
            ref_text(ref),
            text,
            extra={"event": "invalid-object", "workload": ref_text(ref), "reason": reason},
        )
        condition = placed_condition(
            False, reason, text, time.time(), generation=generation_of(obj)
        )
        try:
            self._patch_status(ref, obj, status_patch(obj, condition))
        except KubeError as err:
            log.info("%s: condition not written: %s", ref_text(ref), err)
        self.events.record(obj, "Warning", reason, text)
