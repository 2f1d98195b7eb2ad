"""Changed workloads: apply the change where the workload runs, or move it (``placer submit``).

``placer submit`` of a workload placer already placed whose manifest changed since
(:func:`placer.dispatch.changes.copy_changed`) does not place it again: the :class:`Updater`
applies the change to the copy on its cluster, under the workload's claim
(:mod:`placer.dispatch.claims`), so that a concurrent submit or delete of the same workload is
not raced:

1. **Look again while holding the claim.** The workload must have exactly one copy, with
   placer's record, not placed by the controller (a hub's copy changes on the hub), not
   being deleted; a copy that no longer differs (a concurrent submit applied the same
   change) is ``unchanged``.
2. **Check the change against the cluster's nodes.** The copy's pods (bound, not finished:
   what capacity gathering counted) and what the ledger still charges for it are taken off
   that cluster's nodes, and the changed workload is decided there alone (the solver, with
   the submission's policies): it fits, with a pod-to-node plan, or it does not, with the
   solver's reason.
3. **It fits: apply it there** — an in-flight entry for the changed placement first, marked as
   an update (:attr:`~placer.dispatch.ledger.InFlight.update`: the copy's pods retire what
   they cover, so the ledger charges the difference), the concurrent-decision read-back
   (:mod:`placer.dispatch.readback`), then a server-side apply with a new decision id in the
   record (field manager ``placer``, no force: a field another manager changed since is a
   conflict, reported with the server's Status). The state is ``updated``, with what changed
   (:func:`~placer.dispatch.changes.describe_changes`). A refusal leaves the copy as it was
   (the entry is taken out again): ``failed``, nothing changed.
4. **It does not fit there:** ``failed`` with the reason and nothing changed — unless
   ``move`` (``--move``): the workload is decided on the other clusters and moved.

Moving, and the rule that a workload never runs twice
-----------------------------------------------------
A move must never leave two running copies, and should not leave none. Two orders are safe:

* **The kind can be suspended** (its definition has a ``suspendDefinition``: JobSet, Job,
  PyTorchJob, RayCluster...): the new copy is applied **suspended** on the target first
  (annotation ``placer.dev/moving-from``), through the dispatcher (namespace, ledger entry,
  read-back, roll-back and the next best cluster on a refusal) — so everything that can refuse
  the workload there (a missing CRD, a webhook, a quota) does so while the old copy still
  runs. Then the old copy is deleted in the foreground and awaited until it is gone (its pods
  with it), and only then is the new one resumed (the manifest applied as written, which
  removes the suspension placer added). At every moment at most one copy runs; the workload
  is never without a copy. If the old copy cannot be deleted, the new one is deleted again and
  nothing changed. If it is still terminating when the wait ends, the new copy stays
  suspended, and the next ``placer submit`` of the file resumes it once the old one is gone.
* **The kind cannot be suspended** (Deployment, LeaderWorkerSet...): a moment without the
  workload cannot be avoided, so it is done only with ``allow_restart``
  (``--allow-restart``): a server-side dry run on the target first (nothing is removed if it
  would be refused), then the old copy is deleted and awaited, then the new one is applied;
  should that fail after all, the old copy is put back where it was.

Either way the workload restarts (its pods start anew on the target). A member of a
``placer.dev/group`` is not moved alone (its group would be split). The namespace placer
created for the old copy goes when nothing else is left in it, and the old copy's ledger entry
with it (:mod:`placer.dispatch.removal`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from placer.accelerators import accelerators_from_dict, default_accelerators
from placer.definitions import can_suspend, suspend
from placer.dispatch.changes import copy_changed, describe_changes
from placer.dispatch.claims import Claims
from placer.dispatch.dependencies import refresh
from placer.dispatch.dispatcher import Dispatcher
from placer.dispatch.existing import Existing, ExistingCopies, find_existing, settle_existing
from placer.dispatch.handoff import own, plan_handoff, scheduler_for
from placer.dispatch.ledger import Ledger, charge_known, release_known, remove_entries
from placer.dispatch.options import REMOVAL_WAIT, DispatchOptions, MoveOptions
from placer.dispatch.outcomes import (
    DISPATCHED,
    DRY_RUN,
    FAILED,
    MOVED,
    UNCHANGED,
    UPDATED,
    Manifest,
    Outcome,
    attempt_error,
    in_flight_outcome,
)
from placer.dispatch.readback import settle_concurrent
from placer.dispatch.record import (
    ANNOTATION_MOVING_FROM,
    LABEL_HUB,
    PlacementRecord,
    dispatch_manifest,
)
from placer.dispatch.redecide import Redecider
from placer.dispatch.removal import remove_copy, retire_namespace
from placer.dispatch.reservation import release_reserved, reserve
from placer.dispatch.rollback import may_have_landed
from placer.dispatch.scaling import with_chosen_replicas
from placer.dispatch.units import ClusterRun, Unit
from placer.errors import ClusterUnreachableError, DefinitionError, KubeError, PlacerError
from placer.fleet.capacity import PodTally
from placer.kube import KubeClient, OwnerWalker
from placer.model import Decision, Fleet, Placement, PodAssignment, WorkloadRef, pods_requests
from placer.policy import topology_of
from placer.quantity import PODS
from placer.solver.topology import required_domains
from placer.timestamps import rfc3339

__all__ = ["REMOVAL_WAIT", "Change", "MoveOptions", "UpdateResult", "Updater", "changed_copies"]

#: attempts to resume a moved copy (a transient refusal is tried again).
RESUME_ATTEMPTS = 3


@dataclass(frozen=True)
class Change:
    """A workload placer placed whose manifest changed: the manifest and the copy found."""

    manifest: Manifest
    copy: Existing


@dataclass(frozen=True)
class UpdateResult:
    """What :meth:`Updater.update` did: one outcome per change, and the fleet with the
    changes charged (the old copies' pods taken off, the changed placements put on)."""

    outcomes: Mapping[WorkloadRef, Outcome]
    fleet: Fleet
    warnings: tuple[str, ...] = ()


def changed_copies(
    manifests: Sequence[Manifest],
    settled: Mapping[WorkloadRef, Outcome],
    existing: ExistingCopies,
) -> list[Change]:
    """The workloads settled ``unchanged`` whose copy differs from their manifest."""
    changes: list[Change] = []
    for manifest in manifests:
        outcome = settled.get(manifest.ref)
        if outcome is None or outcome.state != UNCHANGED:
            continue
        copy = next(
            (c for c in existing.of(manifest.ref) if c.cluster == outcome.cluster and c.record),
            None,
        )
        if copy is not None and copy_changed(manifest, copy.object):
            changes.append(Change(manifest, copy))
    return changes


@dataclass
class _State:
    decision_id: str
    placed_at: str
    fleet: Fleet
    outcomes: dict[WorkloadRef, Outcome] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class Updater:
    """Applies changed manifests over their copies, or moves them (module docstring).

    Args:
        clients: the reachable members, by name.
        options: the submission's dispatch options (policies and solver for the fit check,
            dry run, namespaces, ledger, claims).
        ledger: the in-flight ledger the fleet was charged with (its entries for the copies
            are taken off before the fit check; the changed placements are added).
        moves: :class:`MoveOptions`.
    """

    def __init__(
        self,
        clients: Mapping[str, KubeClient],
        options: DispatchOptions | None = None,
        *,
        ledger: Ledger | None = None,
        moves: MoveOptions | None = None,
    ) -> None:
        self.clients = dict(clients)
        self.options = options or DispatchOptions()
        self.ledger = ledger
        self.moves = moves or MoveOptions()
        self.redecider = Redecider.from_options(self.options)

    def update(self, changes: Sequence[Change], fleet: Fleet, *, decision_id: str) -> UpdateResult:
        """Apply every change (module docstring); never raises for cluster trouble."""
        state = _State(decision_id, rfc3339(), fleet)
        if self.options.dry_run or not self.options.claims:
            self._pass(state, changes, None)
            return UpdateResult(dict(state.outcomes), state.fleet, tuple(state.warnings))
        claims = Claims(
            self.clients,
            decision=decision_id,
            holder=self.options.holder,
            ttl=self.options.claim_ttl,
            field_manager=self.options.field_manager,
        )
        deadline = time.monotonic() + self.options.claim_wait
        todo = list(changes)
        with claims.renewing():
            while todo:
                acquired = claims.acquire(c.manifest.ref for c in todo)
                won = [c for c in todo if c.manifest.ref not in acquired.lost]
                if won:
                    self._pass(state, won, claims)
                    claims.release(c.manifest.ref for c in won)
                todo = [c for c in todo if c.manifest.ref in acquired.lost]
                if todo and time.monotonic() >= deadline:
                    for change in todo:
                        ref = change.manifest.ref
                        state.outcomes[ref] = in_flight_outcome(ref, acquired.lost[ref])
                    break
                if todo:
                    time.sleep(0.5)
        for name, reason in sorted(claims.skipped.items()):
            state.warnings.append(
                f"cluster {name}: workload claims not taken ({reason}); a placer process "
                "deciding at the same time and reaching only this cluster could change the "
                "same workloads"
            )
        return UpdateResult(dict(state.outcomes), state.fleet, tuple(state.warnings))

    # ----------------------------------------------------------------------------------------

    def _pass(self, state: _State, changes: Sequence[Change], claims: Claims | None) -> None:
        """Step 1 for every change, then 2-4 for those still to do (module docstring)."""
        refs = [c.manifest.ref for c in changes]
        existing = find_existing(self.clients, refs)
        for change in changes:
            manifest = change.manifest
            ref = manifest.ref
            where = change.copy.cluster
            if where in existing.unknown:
                state.outcomes[ref] = _failed(
                    manifest,
                    change.copy,
                    f"cluster {where} could not be read ({existing.unknown[where]}); nothing "
                    "was changed",
                )
                continue
            blocked, copy = self._settle(manifest, existing.of(ref), where)
            if blocked is not None:
                state.outcomes[ref] = blocked
                continue
            assert copy is not None
            try:
                state.outcomes[ref] = self._update_one(state, manifest, copy, claims)
            except KubeError as err:
                state.outcomes[ref] = _failed(
                    manifest, copy, f"{attempt_error(err).error}; nothing was changed"
                )

    def _settle(
        self, manifest: Manifest, copies: Sequence[Existing], where: str
    ) -> tuple[Outcome | None, Existing | None]:
        """The outcome of a workload that is not to be changed now, or its one copy."""
        ref = manifest.ref
        if not copies:
            return Outcome(
                ref,
                FAILED,
                cluster=where,
                error=f"its copy on cluster {where} was deleted meanwhile; nothing was "
                "placed: submit again to place it anew",
            ), None
        _, settled = settle_existing([manifest], ExistingCopies({ref: tuple(copies)}))
        outcome = settled[ref]
        if outcome.state != UNCHANGED:
            return outcome, None
        if len(copies) > 1:
            clusters = ", ".join(sorted(c.cluster for c in copies))
            deleting = [c.cluster for c in copies if _deleting(c)]
            why = (
                f"the old copy on {', '.join(deleting)} is still being deleted: submit again "
                "once it is gone"
                if deleting
                else "delete the copies it should not have (placer delete --context CLUSTER)"
            )
            return replace(
                outcome,
                state=FAILED,
                error=f"copies exist on several clusters ({clusters}); none was changed, so "
                f"that it cannot run twice: {why}",
            ), None
        copy = copies[0]
        hub = ((copy.object.get("metadata") or {}).get("labels") or {}).get(LABEL_HUB)
        if hub:
            return replace(
                outcome,
                state=FAILED,
                error=f"placed by the placement controller of hub {hub}: change the workload "
                "on the hub; nothing was changed here",
            ), None
        if _deleting(copy):
            return replace(
                outcome,
                state=FAILED,
                error=f"its copy on cluster {copy.cluster} is being deleted; nothing was "
                "changed: submit again once it is gone",
            ), None
        if not copy_changed(manifest, copy.object):
            return outcome, None  # changed meanwhile, by a concurrent submit of the same file
        return None, copy

    def _update_one(
        self, state: _State, manifest: Manifest, copy: Existing, claims: Claims | None
    ) -> Outcome:
        """Steps 2-4 for one workload (module docstring)."""
        cluster = copy.cluster
        freed = self._freed(state.fleet, manifest.ref, copy)
        here = replace(manifest.workload, pinned_cluster=cluster)
        pinned = replace(manifest, decomposition=replace(manifest.decomposition, workload=here))
        decision = self.redecider.decision([here], freed)
        changes = describe_changes(manifest, copy.object)
        if decision.placements:
            return self._in_place(
                state, pinned, copy, decision.placements[0], freed, changes, claims
            )
        reasons = decision.unplaced[0].reasons if decision.unplaced else {}
        reason = reasons.get(cluster, "it does not fit there")
        if not self.moves.move:
            return _failed(
                manifest,
                copy,
                f"the change no longer fits on cluster {cluster}: {reason}; nothing was "
                "changed (--move places it on another cluster)",
                changes,
            )
        return self._move(state, manifest, copy, freed, reason, changes, claims)

    def _freed(self, fleet: Fleet, ref: WorkloadRef, copy: Existing) -> Fleet:
        """``fleet`` without what the copy holds on its cluster: its counted pods and what the
        ledger still charges for it.

        Raises:
            KubeError: the copy's pods could not be listed.
        """
        cluster = copy.cluster
        client = self.clients[cluster]
        table = (
            accelerators_from_dict(fleet.accelerators, source="fleet", field="accelerators")
            if fleet.accelerators
            else default_accelerators()
        )
        owners = OwnerWalker(client)
        pods: list[PodAssignment] = []
        for pod in client.list("v1", "Pod", namespace=ref.namespace).items:
            if not (_uid(pod) == copy.uid or owners.owned_by(pod, copy.uid)):
                continue
            tally = PodTally(table)
            tally.add(pod)
            for node, requests in tally.requested.items():
                counted = {k: v for k, v in requests.items() if k != PODS}
                pods.append(PodAssignment("copy", "", len(pods), node, counted))
        held = [Placement(ref, cluster, tuple(pods), pods_requests(pods))] if pods else []
        entry = self.ledger.get(cluster, ref) if self.ledger is not None else None
        if entry is not None and entry.placement.pods:
            held.append(entry.placement)
        return release_known(fleet, held)

    # ----------------------------------------------------------------------------------------
    # in place

    def _in_place(
        self,
        state: _State,
        manifest: Manifest,
        copy: Existing,
        placement: Placement,
        freed: Fleet,
        changes: tuple[str, ...],
        claims: Claims | None,
    ) -> Outcome:
        """Step 3 (module docstring)."""
        ref = manifest.ref
        cluster = copy.cluster
        client = self.clients[cluster]
        dry_run = self.options.dry_run
        run = ClusterRun(client, cluster, claims=claims, updates={ref})
        unit = Unit([placement])
        if self.options.member_ledger and not dry_run:
            try:
                reserve(
                    run,
                    [unit],
                    state.decision_id,
                    ttl=self.options.in_flight_ttl,
                    field_manager=self.options.field_manager,
                )
            except ClusterUnreachableError as err:
                return _failed(manifest, copy, f"{attempt_error(err).error}; nothing was changed")
            todo, taken = settle_concurrent(
                run,
                cluster,
                [unit],
                {ref: manifest},
                freed,
                [],
                state.decision_id,
                ledger=self.ledger,
                redecider=self.redecider,
                ttl=self.options.in_flight_ttl,
                field_manager=self.options.field_manager,
            )
            if taken:
                return _failed(manifest, copy, f"{taken[0][1].error}; nothing was changed", changes)
            unit = todo[0]
            placement = unit.placements[0]
        record = PlacementRecord.for_placement(placement, state.decision_id, state.placed_at)
        # handed to the member's scheduler as a dispatch is (placer.dispatch.handoff): applied
        # without, the update would take the scheduler name, the group, the queue and the
        # topology affinity away
        scheduler = scheduler_for(
            cluster, manifest.workload, freed, self.options.schedulers, self.options.policies
        )
        shaped = topology_of(manifest.workload, self.options.policies)
        handoff = plan_handoff(
            # the counts its decision chose for an elastic workload (placer.dispatch.scaling)
            with_chosen_replicas(
                dispatch_manifest(manifest.body, ref, record), manifest.decomposition, placement
            ),
            manifest,
            placement,
            scheduler,
            pin_nodes=self.options.pin_nodes,
            domains=required_domains(shaped, placement, freed),
            kueue_suspends=_suspended(copy, manifest),
        )
        body = handoff.body
        if claims is not None and not claims.holds(ref):
            release_reserved(run, unit)
            holder = claims.taken(ref)
            text = (
                f"its claim was taken over by {holder.describe()}"
                if holder
                else "its claim expired"
            )
            return _failed(manifest, copy, f"{text}; nothing was changed", changes)
        try:
            for group in handoff.pod_groups:  # before the workload, as a dispatch applies them
                client.apply(group, field_manager=self.options.field_manager, dry_run=dry_run)
            result = client.apply(
                body, field_manager=self.options.field_manager, force=False, dry_run=dry_run
            )
        except PlacerError as err:
            release_reserved(run, unit)
            attempt = replace(attempt_error(err), cluster=cluster)
            text = (
                f"cluster {cluster} did not answer the update ({attempt.error}): it may or may "
                "not have been applied; submit again to see"
                if may_have_landed(err)
                else f"cluster {cluster} refused the update: {attempt.error}; nothing was changed"
            )
            return Outcome(
                ref,
                FAILED,
                cluster=cluster,
                attempts=(attempt,),
                error=text,
                changes=changes,
                previous=copy.record,
            )
        self._replace_entry(run, ref, state.decision_id)
        state.fleet = charge_known(freed, [placement])
        notes: tuple[str, ...] = (
            ("in-flight ledger not written on this cluster",) if run.ledger_problem else ()
        )
        notes += tuple(handoff.describe())
        if handoff.pod_groups and not dry_run:
            try:
                own(client, handoff.pod_groups, result)
            except KubeError as err:
                notes += (f"its PodGroups not made owned by it ({err.message})",)
        # what its pods name is updated with it (placer.dispatch.dependencies)
        notes += tuple(
            refresh(
                client, manifest, result, field_manager=self.options.field_manager, dry_run=dry_run
            )
        )
        return Outcome(
            ref,
            DRY_RUN if dry_run else UPDATED,
            cluster=cluster,
            placement=placement,
            record=record,
            uid="" if dry_run else str((result.get("metadata") or {}).get("uid", "")),
            notes=notes,
            changes=changes,
            previous=copy.record,
        )

    def _replace_entry(self, run: ClusterRun, ref: WorkloadRef, decision_id: str) -> None:
        """The copy's earlier ledger entry out, the update's in (member and this process)."""
        if self.ledger is None:
            return
        old = self.ledger.get(run.name, ref)
        if old is not None and old.store and old.decision != decision_id:
            try:
                remove_entries(run.client, old.store, [ref])
            except KubeError:  # readers retire it: its decision is no longer on the copy
                pass
            self.ledger.discard(run.name, ref)
        entry = run.reserved.get(ref)
        if entry is not None:
            self.ledger.add(entry)

    # ----------------------------------------------------------------------------------------
    # moving

    def _move(
        self,
        state: _State,
        manifest: Manifest,
        copy: Existing,
        freed: Fleet,
        reason: str,
        changes: tuple[str, ...],
        claims: Claims | None,
    ) -> Outcome:
        """Step 4 with ``move`` (module docstring, "Moving")."""
        ref = manifest.ref
        source = copy.cluster
        definition = manifest.decomposition.definition
        why = f"the change no longer fits on cluster {source} ({reason})"
        if manifest.workload.group:
            return _failed(
                manifest,
                copy,
                f"{why}, and it is a member of group {manifest.workload.group}: moving it "
                "alone would split the group; nothing was changed",
                changes,
            )
        suspendable = can_suspend(definition)
        if not suspendable and not self.moves.allow_restart:
            return _failed(
                manifest,
                copy,
                f"{why}; its kind cannot be suspended ({definition.label} has no "
                "suspendDefinition), so moving it means removing it before the new copy "
                "starts: pass --allow-restart to accept that; nothing was changed",
                changes,
            )
        others = replace(freed, clusters=tuple(c for c in freed.clusters if c.name != source))
        decision = self.redecider.decision([manifest.workload], others)
        if not decision.placements:
            reasons = decision.unplaced[0].reasons if decision.unplaced else {}
            elsewhere = "; ".join(f"{c}: {t}" for c, t in reasons.items()) or "no other cluster"
            return _failed(
                manifest,
                copy,
                f"{why}, and no other cluster can take it ({elsewhere}); nothing was changed",
                changes,
            )
        if self.options.dry_run:
            outcome = self._dispatch(manifest, decision, others, state, dry_run=True)
            return replace(
                outcome,
                changes=changes,
                previous=copy.record,
                moved_from=source if outcome.placed else "",
                notes=(*outcome.notes, f"{why}: would move from {source} to {outcome.cluster}"),
            )
        if claims is not None and not claims.holds(ref):
            return _failed(manifest, copy, "its claim expired; nothing was changed", changes)
        if suspendable:
            outcome = self._move_suspended(state, manifest, copy, decision, others, claims)
        else:
            outcome = self._move_restarting(state, manifest, copy, decision, others)
        if outcome.state == MOVED and outcome.placement is not None:
            state.fleet = charge_known(freed, [outcome.placement])
        return replace(
            outcome,
            changes=changes,
            previous=copy.record,
            notes=(f"{why}: moved to {outcome.cluster}", *outcome.notes)
            if outcome.state == MOVED
            else outcome.notes,
        )

    def _move_suspended(
        self,
        state: _State,
        manifest: Manifest,
        copy: Existing,
        decision: Decision,
        others: Fleet,
        claims: Claims | None,
    ) -> Outcome:
        """New copy suspended, old copy gone, new copy resumed (module docstring)."""
        ref = manifest.ref
        source = copy.cluster
        definition = manifest.decomposition.definition

        def suspended(body: dict[str, Any], _: Manifest) -> dict[str, Any]:
            result = suspend(body, definition)
            metadata = result.setdefault("metadata", {})
            metadata.setdefault("annotations", {})[ANNOTATION_MOVING_FROM] = source
            return result

        placed = self._dispatch(manifest, decision, others, state, transform=suspended)
        if placed.state != DISPATCHED or placed.cluster is None:
            return replace(placed, error=f"{placed.error}; nothing was changed")
        target = placed.cluster
        if claims is not None and not claims.holds(ref):
            self._take_back(target, ref, placed.uid)
            return _failed(manifest, copy, "its claim expired; nothing was changed")
        removal = remove_copy(self.clients[source], ref, uid=copy.uid, wait=self.moves.removal_wait)
        if not removal.accepted:
            self._take_back(target, ref, placed.uid)
            return _failed(
                manifest,
                copy,
                f"the old copy on cluster {source} could not be deleted ({removal.problem}); "
                f"the new copy on {target} was removed again: nothing was changed",
            )
        if not removal.gone:
            return replace(
                placed,
                state=FAILED,
                error=f"the old copy on cluster {source} is {removal.problem}; the new copy "
                f"waits suspended on cluster {target}: submit again once the old one is gone "
                "to resume it",
            )
        notes = self._retire(source, ref, copy.uid)
        assert placed.record is not None
        body = dispatch_manifest(manifest.body, ref, placed.record)
        if placed.placement is not None:  # the counts the decision chose, kept on resuming
            body = with_chosen_replicas(body, manifest.decomposition, placed.placement)
        problem = ""
        for attempt in range(RESUME_ATTEMPTS):
            try:
                self.clients[target].apply(
                    body, field_manager=self.options.field_manager, force=True
                )
                problem = ""
                break
            except PlacerError as err:
                problem = attempt_error(err).error
                time.sleep(0.5 * (attempt + 1))
        if problem:
            return replace(
                placed,
                state=FAILED,
                error=f"moved to cluster {target} (the old copy on {source} is gone), but not "
                f"resumed there ({problem}): it waits suspended; submit again to resume it",
                notes=notes,
            )
        return replace(placed, state=MOVED, moved_from=source, notes=(*placed.notes, *notes))

    def _move_restarting(
        self,
        state: _State,
        manifest: Manifest,
        copy: Existing,
        decision: Decision,
        others: Fleet,
    ) -> Outcome:
        """Dry run there, old copy gone, new copy applied; the old one back if that fails."""
        ref = manifest.ref
        source = copy.cluster
        tried = self._dispatch(manifest, decision, others, state, dry_run=True)
        if not tried.placed or tried.placement is None:
            return replace(tried, error=f"{tried.error}; nothing was changed")
        removal = remove_copy(self.clients[source], ref, uid=copy.uid, wait=self.moves.removal_wait)
        if not removal.accepted:
            return _failed(
                manifest,
                copy,
                f"the old copy on cluster {source} could not be deleted ({removal.problem}); "
                "nothing was changed",
            )
        if not removal.gone:
            return _failed(
                manifest,
                copy,
                f"the old copy on cluster {source} is {removal.problem}; the new copy was not "
                "applied: submit again once the old one is gone",
            )
        notes = self._retire(source, ref, copy.uid)
        target = Decision((tried.placement,), (), decision.summary)
        placed = self._dispatch(manifest, target, others, state)
        if placed.state == DISPATCHED:
            return replace(
                placed,
                state=MOVED,
                moved_from=source,
                notes=(*placed.notes, *notes, "restarted: it had no copy while it moved"),
            )
        back = dispatch_manifest(copy.object, ref, copy.record)
        try:
            self.clients[source].apply(back, field_manager=self.options.field_manager, force=True)
            after = f"its old copy was put back on cluster {source}"
        except PlacerError as err:
            after = (
                f"putting its old copy back on cluster {source} failed too "
                f"({attempt_error(err).error}): it runs nowhere now, submit again"
            )
        return replace(placed, error=f"{placed.error}; {after}", notes=notes)

    def _dispatch(
        self,
        manifest: Manifest,
        decision: Decision,
        fleet: Fleet,
        state: _State,
        *,
        dry_run: bool = False,
        transform: Any = None,
    ) -> Outcome:
        """``decision`` (one workload, the source cluster out of ``fleet``) carried out by the
        dispatcher: namespace, ledger, read-back, apply; the next best cluster on a refusal.
        The claim is this updater's; the copy check is done."""
        options = replace(
            self.options,
            claims=False,
            check_existing=False,
            dry_run=dry_run or self.options.dry_run,
            transform=transform,
        )
        dispatcher = Dispatcher(self.clients, options, ledger=self.ledger)
        result = dispatcher.dispatch([manifest], decision, fleet, decision_id=state.decision_id)
        state.warnings.extend(result.warnings)
        return result.outcome(manifest.ref)

    def _take_back(self, cluster: str, ref: WorkloadRef, uid: str) -> None:
        """Remove a new copy a move made, and what was kept for it (best effort)."""
        remove_copy(self.clients[cluster], ref, uid=uid)
        self._retire(cluster, ref, uid)
        if self.ledger is not None:
            self.ledger.discard(cluster, ref)

    def _retire(self, cluster: str, ref: WorkloadRef, uid: str) -> tuple[str, ...]:
        """The gone copy's ledger entry and, when empty, the namespace placer made for it."""
        client = self.clients[cluster]
        notes: list[str] = []
        entry = self.ledger.get(cluster, ref) if self.ledger is not None else None
        if entry is not None and entry.store:
            try:
                remove_entries(client, entry.store, [ref])
            except KubeError:  # readers retire it: its workload is gone from the cluster
                pass
            assert self.ledger is not None
            self.ledger.discard(cluster, ref)
        if retire_namespace(client, ref.namespace, {uid}) == "deleted":
            notes.append(f"namespace {ref.namespace} on {cluster} deleted (empty, made by placer)")
        return tuple(notes)


# --------------------------------------------------------------------------------------------


def _failed(
    manifest: Manifest, copy: Existing, error: str, changes: tuple[str, ...] = ()
) -> Outcome:
    """A change not made: the workload stays as it was on its cluster."""
    return Outcome(
        manifest.ref,
        FAILED,
        cluster=copy.cluster,
        error=error,
        changes=changes,
        previous=copy.record,
    )


def _suspended(copy: Existing, manifest: Manifest) -> bool:
    """Whether ``copy`` is suspended now (suspending it again changes nothing)."""
    definition = manifest.decomposition.definition
    if not can_suspend(definition):
        return False
    try:
        return suspend(copy.object, definition) == dict(copy.object)
    except DefinitionError:
        return False


def _deleting(copy: Existing) -> bool:
    return bool((copy.object.get("metadata") or {}).get("deletionTimestamp"))


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))
