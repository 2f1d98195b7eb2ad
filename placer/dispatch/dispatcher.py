"""Dispatching a decision: apply each workload to its cluster, safely, or try the next one.

:class:`Dispatcher` takes the decided :class:`~placer.model.Decision`, the workloads' manifests
(:class:`~placer.dispatch.outcomes.Manifest`: the object as written plus its decomposition), the
fleet the decision was made on and one :class:`~placer.kube.KubeClient` per member cluster; what
it does is set by :class:`~placer.dispatch.options.DispatchOptions`. First it claims every
workload of the decision on the members (:mod:`placer.dispatch.claims`; the ones left unplaced
too) and, holding the claims, looks for copies already there (``unchanged`` / ``failed`` as
:func:`~placer.dispatch.existing.settle_existing` says); a workload another decider holds is
``in-flight`` — or, with ``claim_wait``, waited for and looked at again once the claims it won
are dispatched. The claims are renewed while it works and released at the end. Then for every
placement it:

1. reserves the capacity in the member's in-flight ledger (:mod:`placer.dispatch.reservation`)
   *before* applying, so that no concurrent decision sees the workload without its charge
   (all placements of one cluster in one write, before the first apply there);
2. reads the member's ledger back and checks that no *concurrent* decision — another placer
   process that gathered at the same moment, so neither saw the other's entry — reserved the
   same room meanwhile (:mod:`placer.dispatch.readback`);
3. makes sure the workload's namespace exists on the member (creates it, labelled
   ``placer.dev/placed-by=placer``, unless ``create_namespaces=False``: then a missing
   namespace is a failure of that cluster);
4. server-side applies the manifest (field manager ``placer``) with the placement record
   (:mod:`placer.dispatch.record`), after the optional ``resume``/``transform`` step (the
   controller dispatches suspended hub objects unsuspended) and the hand-off to the member's
   scheduler (:mod:`placer.dispatch.handoff`: pod-template changes, PodGroups and the Karta
   applied first), preceded by the objects its pods name (:mod:`placer.dispatch.dependencies`:
   checked before anything is written, applied first, owned by the workload afterwards) — only
   while the workload's claim is still this dispatch's (the fence; a unit whose claim was
   taken over steps back, ``in-flight``).

Units: workloads sharing a ``placer.dev/group`` are dispatched together, all or nothing
(:mod:`placer.dispatch.units`).

Failure handling: when any step fails for a unit, everything created for it on that cluster is
removed again (:mod:`placer.dispatch.rollback`), then that cluster is excluded for the unit and
the unit is decided again on the fleet as it now stands (:mod:`placer.dispatch.redecide`) and
dispatched to the next best cluster, until it is placed or no cluster is left. The Kubernetes
Status (code, reason, message) of every failed attempt is kept in
:attr:`~placer.dispatch.outcomes.Outcome.attempts` and in the final unplaced reasons. A unit
whose clean-up failed is not placed elsewhere: a workload must never run twice.

Dry run (``dry_run=True``): the same path with ``dryRun=All`` on every write; nothing is
changed anywhere (no claim, no namespace, no ledger entry), failures still move on to the next
cluster, so the output shows exactly what a real run would do.

Clusters are dispatched concurrently (one thread per cluster; units of one cluster in order);
re-decisions run one unit at a time after each round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from placer.backoff import Doubling
from placer.definitions import can_suspend, resume
from placer.dispatch.claims import Claim, Claims
from placer.dispatch.dependencies import (
    Dependencies,
    body_of,
    check_expected,
    existing_state,
    plan_dependencies,
)
from placer.dispatch.existing import find_existing, settle_existing
from placer.dispatch.handoff import (
    check_queue,
    ensure_karta,
    own,
    plan_handoff,
    scheduler_for,
)
from placer.dispatch.ledger import InFlight, Ledger
from placer.dispatch.options import DispatchOptions
from placer.dispatch.outcomes import (
    DISPATCHED,
    DRY_RUN,
    FAILED,
    UNPLACED,
    Attempt,
    DispatchResult,
    Manifest,
    Outcome,
    attempt_error,
    in_flight_outcome,
    unplaced_text,
)
from placer.dispatch.readback import settle_concurrent
from placer.dispatch.record import (
    LABEL_PLACED_BY,
    PLACED_BY,
    PlacementRecord,
    dispatch_manifest,
    new_decision_id,
)
from placer.dispatch.redecide import Redecider
from placer.dispatch.reservation import reserve
from placer.dispatch.rollback import may_have_landed, rollback
from placer.dispatch.scaling import with_chosen_replicas
from placer.dispatch.units import ClusterRun, DispatchError, Unit, UnitResult, group_units
from placer.errors import (
    ClusterUnreachableError,
    ForbiddenError,
    InputError,
    KubeError,
    NotFoundError,
    PlacerError,
)
from placer.kube import KubeClient
from placer.model import Decision, Fleet, Placement, Unplaced, WorkloadRef
from placer.objects import name_of, uid_of
from placer.policy import topology_of
from placer.quantity import add
from placer.solver.topology import required_domains
from placer.timestamps import rfc3339

__all__ = ["Dispatcher"]

log = logging.getLogger(__name__)


@dataclass
class _State:
    """One dispatch's inputs and what it has found so far."""

    by_ref: dict[WorkloadRef, Manifest]
    runs: dict[str, ClusterRun]
    decision_id: str
    placed_at: str
    fleet: Fleet
    done: dict[WorkloadRef, Outcome] = field(default_factory=dict)
    extra_unplaced: dict[WorkloadRef, dict[str, str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: placements to decide again before dispatching (group members found elsewhere).
    again: list[Placement] = field(default_factory=list)


class Dispatcher:
    """Carries out decisions on the member clusters (see the module docstring).

    Args:
        clients: one client per member cluster, by cluster name.
        options: what to do and how (:class:`~placer.dispatch.options.DispatchOptions`;
            the defaults suit a one-off dispatch).
        ledger: the in-process ledger the decision was charged with (the controller keeps one
            for its lifetime; ``placer submit`` reads one before deciding): every dispatched
            placement is recorded in it, and the concurrent-decision check
            (:mod:`placer.dispatch.readback`) needs it to tell new entries from known ones.
    """

    def __init__(
        self,
        clients: Mapping[str, KubeClient],
        options: DispatchOptions | None = None,
        *,
        ledger: Ledger | None = None,
    ) -> None:
        self.clients = dict(clients)
        self.options = options or DispatchOptions()
        self.ledger = ledger
        self.redecider = Redecider.from_options(self.options)

    # ----------------------------------------------------------------------------------------

    def dispatch(
        self,
        manifests: Sequence[Manifest],
        decision: Decision,
        fleet: Fleet,
        *,
        decision_id: str | None = None,
    ) -> DispatchResult:
        """Carry out ``decision`` (made on ``fleet``) for ``manifests``.

        Workloads of ``manifests`` the decision does not mention are reported ``unplaced``
        with the decision's reasons (or none). Never raises for cluster trouble: every failure
        is in the outcomes.

        Raises:
            InputError: a placed workload has no manifest, or no ``metadata.name``.
        """
        decision_id = decision_id or new_decision_id()
        by_ref = {m.ref: m for m in manifests}
        for placement in decision.placements:
            manifest = by_ref.get(placement.workload)
            if manifest is None:
                raise InputError(f"{placement.workload}: placed, but no manifest was given")
            name = name_of(manifest.body)
            if not name:
                raise InputError(
                    "metadata.name is required to dispatch (generateName cannot be applied "
                    "idempotently)",
                    source=manifest.source or str(placement.workload),
                    field="metadata.name",
                )
        runs = {name: ClusterRun(client, name) for name, client in self.clients.items()}
        placed_at = rfc3339()
        state = _State(by_ref, runs, decision_id, placed_at, fleet)
        placements = list(decision.placements)
        if not self.options.claims or self.options.dry_run or not placements:
            if self.options.check_existing and placements:
                placements = self._settle_copies(state, placements)
            self._carry_out(state, placements)
        else:
            claims = Claims(
                self.clients,
                decision=decision_id,
                holder=self.options.holder,
                ttl=self.options.claim_ttl,
                field_manager=self.options.field_manager,
                succession=self.options.succession,
            )
            for run in runs.values():
                run.claims = claims
            # a decider that waits (a submit, reporting to a user) also looks after the
            # workloads it left unplaced: a concurrent decider may be placing them
            unplaced = (
                [u.workload for u in decision.unplaced if u.workload in by_ref]
                if self.options.claim_wait > 0
                else []
            )
            with claims.renewing():
                self._claimed_passes(state, claims, placements, unplaced)
            for name, reason in sorted(claims.skipped.items()):
                state.warnings.append(
                    f"cluster {name}: workload claims not taken ({reason}); a placer process "
                    "deciding at the same time and reaching only this cluster could place "
                    "the same workloads"
                )
        for run_name, run in runs.items():
            if run.ledger_problem:
                state.warnings.append(
                    f"cluster {run_name}: in-flight ledger not written ({run.ledger_problem}); "
                    "back-to-back decisions by other processes may not see these placements"
                )
        return self._result(
            manifests, decision, decision_id, state.done, state.extra_unplaced, state.warnings
        )

    def _claimed_passes(
        self,
        state: _State,
        claims: Claims,
        placements: Sequence[Placement],
        unplaced: Sequence[WorkloadRef],
    ) -> None:
        """Claim, check for copies, dispatch, release; then, for the workloads another decider
        held, wait and do it again until ``claim_wait`` is over (:mod:`~placer.dispatch.claims`).

        The workloads won are dispatched before waiting for the others, so that two deciders
        each holding some of the other's workloads never wait on each other. The workloads the
        decision left ``unplaced`` (given when waiting) are claimed and checked too: when a
        concurrent decider is placing them (its in-flight entries are what left no room),
        they are reported ``in-flight``, or ``unchanged`` once its copy is found.
        """
        deadline = time.monotonic() + self.options.claim_wait
        pauses = Doubling(0.2, 1.0)
        todo = list(placements)
        waiting = list(unplaced)
        while todo or waiting:
            won, lost = self._acquire_units(state, claims, todo)
            acquired = claims.acquire(waiting)
            lost.update(acquired.lost)
            if won or acquired.won:
                self._carry_out(state, self._settle_copies(state, won, acquired.won))
                claims.release([*(p.workload for p in won), *acquired.won])
            left = deadline - time.monotonic()
            if not lost or left <= 0:
                for ref, claim in lost.items():
                    state.done[ref] = in_flight_outcome(ref, claim)
                return
            time.sleep(min(pauses.failed(), left))
            todo = [p for p in todo if p.workload in lost]
            waiting = [ref for ref in waiting if ref in lost]

    def _acquire_units(
        self, state: _State, claims: Claims, placements: Sequence[Placement]
    ) -> tuple[list[Placement], dict[WorkloadRef, Claim]]:
        """Claim the placements' workloads: the placements of units won whole, and the
        workloads of the other units with the claim that holds each (a unit is won whole or
        not at all: its won part is released)."""
        acquired = claims.acquire(p.workload for p in placements)
        won: list[Placement] = []
        lost: dict[WorkloadRef, Claim] = {}
        for unit in group_units(placements, state.by_ref):
            holders = [acquired.lost[ref] for ref in unit.refs if ref in acquired.lost]
            if not holders:
                won += unit.placements
                continue
            claims.release(ref for ref in unit.refs if ref not in acquired.lost)
            for ref in unit.refs:
                lost[ref] = acquired.lost.get(ref, holders[0])
        return won, lost

    def _settle_copies(
        self,
        state: _State,
        placements: Sequence[Placement],
        unplaced: Sequence[WorkloadRef] = (),
    ) -> list[Placement]:
        """The placements still to dispatch once copies already on the members are settled
        (:func:`~placer.dispatch.existing.settle_existing`; outcomes into ``state``;
        ``unplaced`` workloads are only looked for). Members of a group found placed elsewhere
        are pinned to the group's cluster and decided again when they are not planned there."""
        refs = [p.workload for p in placements]
        if not refs and not unplaced:
            return []
        refs += unplaced
        existing = find_existing(self.clients, refs, label_selector=self.options.copy_selector)
        manifests = [state.by_ref[ref] for ref in refs]
        todo, settled = settle_existing(manifests, existing, own=self.options.own_copy)
        state.done.update(settled)
        state.warnings.extend(
            f"cluster {name}: could not check for existing copies ({reason})"
            for name, reason in existing.unknown.items()
        )
        keep: list[Placement] = []
        by_ref = {p.workload: p for p in placements}
        for manifest in todo:
            placement = by_ref.get(manifest.ref)
            if placement is None:  # unplaced by the decision, and no copy anywhere
                continue
            pin = manifest.workload.pinned_cluster
            if pin is not None and pin != state.by_ref[manifest.ref].workload.pinned_cluster:
                state.by_ref[manifest.ref] = manifest  # pinned to its group's cluster
                if placement.cluster != pin:
                    state.again.append(placement)
                    continue
            keep.append(placement)
        return keep

    def _carry_out(self, state: _State, placements: Sequence[Placement]) -> None:
        """Dispatch ``placements`` in rounds: apply, and decide again those that failed."""
        by_ref = state.by_ref
        success = [o.placement for o in state.done.values() if o.placement is not None and o.placed]
        round_units: list[Unit] = []
        for unit in group_units(state.again, by_ref):
            again = self._redecided(state, unit, success)
            if again is not None:
                success += again.placements
                round_units.append(again)
        state.again.clear()
        round_units += group_units(placements, by_ref)
        while round_units:
            failed = self._round(
                round_units,
                by_ref,
                state.runs,
                state.decision_id,
                state.placed_at,
                state.done,
                state.fleet,
                success,
            )
            success = [
                o.placement for o in state.done.values() if o.placement is not None and o.placed
            ]
            round_units = []
            for unit, failure in failed:
                cluster = unit.placements[0].cluster
                if failure.taken is not None:  # another decider took the claim over
                    for ref in unit.refs:
                        state.done[ref] = in_flight_outcome(ref, failure.taken)
                    continue
                unit.excluded[cluster] = failure.attempt
                if failure.leftover:
                    for ref in unit.refs:
                        state.done[ref] = Outcome(
                            ref,
                            FAILED,
                            cluster=cluster,
                            attempts=tuple(unit.excluded.values()),
                            error=f"{failure.attempt.error}; {failure.leftover}",
                        )
                    continue
                again = self._redecided(state, unit, success)
                if again is not None:
                    # later re-decisions of this round must see the capacity it takes
                    success += again.placements
                    round_units.append(again)

    def _redecided(self, state: _State, unit: Unit, success: Sequence[Placement]) -> Unit | None:
        """The unit decided again without the clusters that failed it
        (:meth:`~placer.dispatch.redecide.Redecider.elsewhere`), or ``None`` with its outcomes
        failed."""
        again = self.redecider.elsewhere(unit, state.by_ref, state.fleet, list(success))
        if not isinstance(again, Decision):
            return again
        for unplaced in again.unplaced:
            state.extra_unplaced[unplaced.workload] = dict(unplaced.reasons)
        for ref in unit.refs:
            reasons = state.extra_unplaced.get(ref, {})
            state.done[ref] = Outcome(
                ref,
                FAILED,
                attempts=tuple(unit.excluded.values()),
                error=unit.failure_text() if unit.excluded else unplaced_text(reasons),
            )
            state.extra_unplaced[ref] = reasons
        return None

    # ----------------------------------------------------------------------------------------

    def _round(
        self,
        units: list[Unit],
        by_ref: Mapping[WorkloadRef, Manifest],
        runs: dict[str, ClusterRun],
        decision_id: str,
        placed_at: str,
        done: dict[WorkloadRef, Outcome],
        fleet: Fleet,
        success: Sequence[Placement],
    ) -> list[tuple[Unit, DispatchError]]:
        per_cluster: dict[str, list[Unit]] = {}
        for unit in units:
            per_cluster.setdefault(unit.placements[0].cluster, []).append(unit)

        def work(cluster: str, todo: list[Unit]) -> list[tuple[Unit, UnitResult]]:
            out: list[tuple[Unit, UnitResult]] = []
            run = runs.get(cluster)
            if run is not None and self.options.member_ledger and not self.options.dry_run:
                try:
                    reserve(
                        run,
                        todo,
                        decision_id,
                        ttl=self.options.in_flight_ttl,
                        field_manager=self.options.field_manager,
                    )
                except ClusterUnreachableError as err:
                    attempt = replace(attempt_error(err), cluster=cluster)
                    return [(unit, DispatchError(attempt)) for unit in todo]
                todo, taken = settle_concurrent(
                    run,
                    cluster,
                    todo,
                    by_ref,
                    fleet,
                    success,
                    decision_id,
                    ledger=self.ledger,
                    redecider=self.redecider,
                    ttl=self.options.in_flight_ttl,
                    field_manager=self.options.field_manager,
                )
                out += [(unit, DispatchError(attempt)) for unit, attempt in taken]
            for unit in todo:
                if run is None:
                    attempt = Attempt(cluster, "no client for this cluster", 0, "NoClient")
                    out.append((unit, DispatchError(attempt)))
                    continue
                try:
                    out.append(
                        (
                            unit,
                            self._dispatch_unit(unit, by_ref, run, decision_id, placed_at, fleet),
                        )
                    )
                except DispatchError as failure:
                    out.append((unit, failure))
            return out

        workers = self.options.max_workers or min(16, max(1, len(per_cluster)))
        results: list[tuple[Unit, UnitResult]] = []
        if len(per_cluster) <= 1 or workers == 1:
            for cluster, todo in per_cluster.items():
                results += work(cluster, todo)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dispatch") as pool:
                futures = [pool.submit(work, c, todo) for c, todo in per_cluster.items()]
                for future in futures:
                    results += future.result()
        failed: list[tuple[Unit, DispatchError]] = []
        for unit, result in results:
            if isinstance(result, DispatchError):
                failed.append((unit, result))
            else:
                for outcome in result:
                    done[outcome.workload] = replace(
                        outcome, attempts=tuple(unit.excluded.values())
                    )
        return failed

    def _dispatch_unit(
        self,
        unit: Unit,
        by_ref: Mapping[WorkloadRef, Manifest],
        run: ClusterRun,
        decision_id: str,
        placed_at: str,
        fleet: Fleet,
    ) -> list[Outcome]:
        client = run.client
        dry_run = self.options.dry_run
        cluster = unit.placements[0].cluster
        created_here: list[str] = []
        #: every object written for the unit, in order (the workloads and what goes with them).
        written: list[WorkloadRef] = []
        notes: dict[WorkloadRef, list[str]] = {p.workload: [] for p in unit.placements}
        would_create: set[str] = set()
        outcomes: list[Outcome] = []
        try:
            # what the pods name must be supplied or on the member, before anything is written
            needs = {p.workload: plan_dependencies(by_ref[p.workload]) for p in unit.placements}
            for ref, dependencies in needs.items():
                check_expected(client, dependencies, str(ref))
            for placement in unit.placements:
                namespace = placement.workload.namespace
                state = self._namespace(run, namespace)
                if state == "created":
                    created_here.append(namespace)
                elif state == "would-create":
                    would_create.add(namespace)
            for placement in unit.placements:
                manifest = by_ref[placement.workload]
                record = PlacementRecord.for_placement(placement, decision_id, placed_at)
                scheduler = scheduler_for(
                    cluster,
                    manifest.workload,
                    fleet,
                    self.options.schedulers,
                    self.options.policies,
                )
                shaped = topology_of(manifest.workload, self.options.policies)
                domains = required_domains(shaped, placement, fleet)
                handoff = plan_handoff(
                    self._body(manifest, record, placement),
                    manifest,
                    placement,
                    scheduler,
                    pin_nodes=self.options.pin_nodes,
                    domains=domains,
                )
                notes[placement.workload] += handoff.describe()
                notes[placement.workload] += [
                    f"pods of {label} kept in "
                    + ", ".join(f"{level}={value}" for level, value in sorted(domain.items()))
                    + " (required node affinity)"
                    for label, domain in sorted(domains.items())
                ]
                if placement.workload.namespace in would_create:
                    notes[placement.workload].append(
                        f"namespace {placement.workload.namespace} would be created; the "
                        "object itself cannot be dry-run before its namespace exists"
                    )
                    outcomes.append(
                        Outcome(
                            placement.workload,
                            DRY_RUN,
                            cluster=cluster,
                            placement=placement,
                            record=record,
                            namespace_created=True,
                            handoff=_with_dependencies(handoff.recorded, needs[placement.workload]),
                        )
                    )
                    continue
                self._fence(run, unit, placement.workload, cluster, written, created_here)
                target = manifest.decomposition.definition.target
                if handoff.karta is not None and target is not None:
                    notes[placement.workload].append(
                        ensure_karta(
                            client,
                            handoff.karta,
                            target,
                            field_manager=self.options.field_manager,
                            dry_run=dry_run,
                        )
                    )
                problem = check_queue(
                    client, scheduler.name, handoff.queue, placement.workload.namespace
                )
                if problem:
                    notes[placement.workload].append(problem)
                carried = self._dependencies(
                    run, needs[placement.workload], written, notes[placement.workload]
                )
                for group, group_ref in zip(handoff.pod_groups, handoff.refs, strict=True):
                    written.append(group_ref)
                    client.apply(group, field_manager=self.options.field_manager, dry_run=dry_run)
                written.append(placement.workload)
                result = client.apply(
                    handoff.body,
                    field_manager=self.options.field_manager,
                    force=False,
                    dry_run=dry_run,
                )
                if not dry_run and (handoff.pod_groups or carried):
                    own(client, [*handoff.pod_groups, *carried], result)
                uid = "" if dry_run else uid_of(result)
                outcomes.append(
                    Outcome(
                        placement.workload,
                        DRY_RUN if dry_run else DISPATCHED,
                        cluster=cluster,
                        placement=placement,
                        record=record,
                        uid=uid,
                        namespace_created=placement.workload.namespace in created_here,
                        handoff=_with_dependencies(handoff.recorded, needs[placement.workload]),
                    )
                )
        except PlacerError as err:
            attempt = attempt_error(err)
            attempt = replace(attempt, cluster=cluster)
            # the failing write may have landed when the answer was lost: remove it too
            maybe = written if may_have_landed(err) else written[:-1]
            leftover = rollback(run, unit, maybe, created_here, dry_run=dry_run)
            raise DispatchError(attempt, leftover=leftover) from None
        for placement in unit.placements:
            run.used_namespaces.add(placement.workload.namespace)
            if self.ledger is not None and not dry_run:
                entry = run.reserved.get(placement.workload)
                self.ledger.add(
                    entry or InFlight.new(placement, decision_id, ttl=self.options.in_flight_ttl)
                )
        if run.ledger_problem:
            for ref in notes:
                notes[ref].append("in-flight ledger not written on this cluster")
        return [replace(o, notes=tuple(notes[o.workload])) for o in outcomes]

    def _dependencies(
        self,
        run: ClusterRun,
        needs: Dependencies,
        written: list[WorkloadRef],
        notes: list[str],
    ) -> list[dict[str, Any]]:
        """Apply the supplied objects the workload's pods name, before the workload
        (:mod:`placer.dispatch.dependencies`); the ones placer keeps (to be owned by it)."""
        client = run.client
        carried: list[dict[str, Any]] = []
        for dependency, obj in needs.supplied:
            state = existing_state(client, dependency)
            if state == "foreign":
                notes.append(f"{dependency} is on the member and not placer's: used as it is")
                continue
            body = body_of(dependency, obj)
            if state == "absent":
                written.append(
                    WorkloadRef("v1", dependency.kind, dependency.namespace, dependency.name)
                )
            client.apply(
                body, field_manager=self.options.field_manager, dry_run=self.options.dry_run
            )
            carried.append(body)
            verb = "created" if state == "absent" else "updated"
            if self.options.dry_run:
                verb = f"would be {verb}"
            notes.append(f"{dependency} {verb} before the workload")
        return carried

    def _fence(
        self,
        run: ClusterRun,
        unit: Unit,
        ref: WorkloadRef,
        cluster: str,
        applied: list[WorkloadRef],
        created: list[str],
    ) -> None:
        """Before an apply: the workload's claim must still be this dispatch's (renewed when
        half its lifetime is gone); if another decider took it over, the unit steps back."""
        claims = run.claims
        if claims is None or claims.holds(ref):
            return
        taken = claims.taken(ref)
        text = f"its claim was taken over by {taken.describe()}" if taken else "its claim expired"
        leftover = rollback(run, unit, applied, created, dry_run=self.options.dry_run)
        attempt = Attempt(cluster, text, 409, "Conflict")
        holder = taken or Claim("", "", "another decider", "", 0.0, 0.0, 0.0)
        raise DispatchError(attempt, leftover=leftover, taken=holder)

    def _body(
        self, manifest: Manifest, record: PlacementRecord, placement: Placement
    ) -> dict[str, Any]:
        body = dispatch_manifest(manifest.body, manifest.ref, record)
        # an elastic workload's copy carries the counts the decision chose
        body = with_chosen_replicas(body, manifest.decomposition, placement)
        definition = manifest.decomposition.definition
        if self.options.resume and can_suspend(definition):
            body = resume(body, definition)
        if self.options.transform is not None:
            body = dict(self.options.transform(body, manifest))
        return body

    def _namespace(self, run: ClusterRun, namespace: str) -> str:
        """``known``, ``created`` or ``would-create``; raises KubeError to fail the cluster."""
        if namespace in run.known_namespaces:
            return "known"
        client = run.client
        try:
            client.get("v1", "Namespace", namespace)
        except NotFoundError:
            if not self.options.create_namespaces:
                raise NotFoundError(
                    f"namespace {namespace} does not exist and namespace creation is off",
                    cluster=client.name,
                    code=404,
                    reason="NotFound",
                    status_message=f'namespaces "{namespace}" not found',
                ) from None
            body = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace, "labels": {LABEL_PLACED_BY: PLACED_BY}},
            }
            if self.options.dry_run:
                client.create(body, dry_run=True)
                return "would-create"
            try:
                client.create(body)
            except KubeError as err:
                if err.code == 409:  # created meanwhile by someone else
                    run.known_namespaces.add(namespace)
                    return "known"
                raise
            run.known_namespaces.add(namespace)
            run.created_namespaces.add(namespace)
            return "created"
        except ForbiddenError:
            pass  # may not read namespaces: the apply will tell whether it exists
        run.known_namespaces.add(namespace)
        return "known"

    def _result(
        self,
        manifests: Sequence[Manifest],
        decision: Decision,
        decision_id: str,
        done: dict[WorkloadRef, Outcome],
        extra_unplaced: dict[WorkloadRef, dict[str, str]],
        warnings: list[str],
    ) -> DispatchResult:
        reasons = {u.workload: dict(u.reasons) for u in decision.unplaced}
        reasons.update(extra_unplaced)
        outcomes: list[Outcome] = []
        placements: list[Placement] = []
        unplaced: list[Unplaced] = []
        for manifest in manifests:
            ref = manifest.ref
            outcome = done.get(ref)
            if outcome is None:
                outcome = Outcome(ref, UNPLACED, error=unplaced_text(reasons.get(ref, {})))
            outcomes.append(outcome)
            if outcome.placed and outcome.placement is not None:
                placements.append(outcome.placement)
            else:
                unplaced.append(Unplaced(ref, reasons.get(ref, {})))
        summary = replace(
            decision.summary,
            placed=len(placements),
            placed_requests=add(*(p.requests for p in placements)),
        )
        final = Decision(tuple(placements), tuple(unplaced), summary)
        return DispatchResult(decision_id, final, tuple(outcomes), tuple(warnings))


def _with_dependencies(recorded: Mapping[str, Any], needs: Dependencies) -> dict[str, Any]:
    """The outcome's hand-off record with the objects carried along (names only)."""
    if not needs.supplied:
        return dict(recorded)
    carried = [f"{d.kind}/{d.name}" for d, _ in needs.supplied]
    return {**recorded, "dependencies": carried}
