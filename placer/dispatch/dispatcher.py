"""Dispatching a decision: apply each workload to its cluster, safely, or try the next one.

:class:`Dispatcher` takes the decided :class:`~placer.model.Decision`, the workloads' manifests
(:class:`Manifest`: the object as written plus its decomposition), the fleet the decision was
made on and one :class:`~placer.kube.KubeClient` per member cluster. First it claims every
workload of the decision on the members (:mod:`placer.dispatch.claims`; the ones left
unplaced too) and, holding the claims, looks for copies already there (``unchanged`` /
``failed`` as :func:`settle_existing` says); a workload another decider holds is ``in-flight``
— or, with ``claim_wait``, waited for and looked at again once the claims it won are
dispatched. The claims are renewed while it works and released at the end. Then for every
placement it:

1. reserves the capacity in the member's in-flight ledger (:mod:`placer.dispatch.ledger`)
   *before* applying, so that no concurrent decision sees the workload without its charge
   (all placements of one cluster in one write, before the first apply there);
2. reads the member's ledger back and checks that no *concurrent* decision — another placer
   process that gathered at the same moment, so neither saw the other's entry — reserved the
   same room meanwhile (below);
3. makes sure the workload's namespace exists on the member (creates it, labelled
   ``placer.dev/placed-by=placer``, unless ``create_namespaces=False``: then a missing
   namespace is a failure of that cluster);
4. server-side applies the manifest (field manager ``placer``) with the placement record
   (:mod:`placer.dispatch.record`), after the optional ``resume``/``transform`` step (the
   controller dispatches suspended hub objects unsuspended) — only while the workload's claim
   is still this dispatch's (the fence; a unit whose claim was taken over steps back,
   ``in-flight``).

Units: workloads sharing a ``placer.dev/group`` are dispatched together, all or nothing.

Concurrent decisions: the ledger closes the gap between an apply and the moment its pods are
visible, but two processes that gather in the same instant still decide on the same free room.
So after writing its entries a dispatch lists the member's ledger again (one call) and takes
the entries it did not know when deciding (not in ``ledger``, not its own decision). If there
are any, its units are checked in order against the decision's fleet charged with those
entries (and with the units that passed): a unit whose planned nodes no longer have room
releases its entries and is planned again on that cluster's remaining nodes (entries
rewritten, ledger read back again, at most :data:`CONCURRENCY_CHECKS` times), or, when it no
longer fits there, fails on that cluster with ``409 Conflict`` and is decided again elsewhere
like any other failure. Of two dispatches that overlap, the later one to read back always
sees the earlier one's entry (each writes before it reads, and readers keep even a fully
observed entry stored for :data:`~placer.dispatch.ledger.OBSERVED_KEEP`; an entry unknown
when deciding is charged whole, whether or not its pods were gathered: conservative), so
contested room is never taken twice: one of them re-plans or steps back. The check needs the
``ledger`` the decision was charged with; without one it is skipped.

Failure handling: when any step fails for a unit (unreachable, 403, 404 for a kind the
cluster does not serve, 422, an admission webhook's denial...), everything created for the
unit on that cluster is removed again — objects already applied (co-grouped ones included),
the ledger entry, and a namespace placer created for it that nothing else placed uses — then
that cluster is excluded for the unit and the unit is decided again by the solver on the fleet
as it now stands (this dispatch's successful placements charged), and dispatched to the next
best cluster; until it is placed or no cluster is left. The Kubernetes Status (code, reason,
message) of every failed attempt is kept in :attr:`Outcome.attempts` and in the final
unplaced reasons.

If the clean-up itself fails (the cluster stopped answering mid-way, so an apply may have
landed), the unit is **not** placed elsewhere — a workload must never run twice — and the
outcome says what may be left where.

Dry run (``dry_run=True``): the same path with ``dryRun=All`` on every write; nothing is
changed anywhere (no claim, no namespace, no ledger entry), failures still move on to the next
cluster, so the output shows exactly what a real run would do.

Clusters are dispatched concurrently (one thread per cluster; units of one cluster in order);
re-decisions run one unit at a time after each round.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from placer.definitions import Decomposition, can_suspend, resume
from placer.dispatch.claims import CLAIM_TTL, Claim, Claims, Succession
from placer.dispatch.existing import Existing, ExistingCopies, find_existing
from placer.dispatch.ledger import (
    DEFAULT_TTL,
    InFlight,
    Ledger,
    charge_known,
    read_entries,
    remove_entries,
    write_entries,
)
from placer.dispatch.record import (
    FIELD_MANAGER,
    LABEL_PLACED_BY,
    PLACED_BY,
    PlacementRecord,
    dispatch_manifest,
    label_value,
    new_decision_id,
    rfc3339,
)
from placer.errors import (
    ClusterUnreachableError,
    ForbiddenError,
    InputError,
    KubeError,
    NotFoundError,
    PlacerError,
)
from placer.kube import KubeClient
from placer.model import (
    Decision,
    DecisionSummary,
    Fleet,
    Placement,
    PodAssignment,
    Unplaced,
    Workload,
    WorkloadRef,
)
from placer.policy import PlacementPolicy
from placer.quantity import GPU
from placer.solver import solve, verify
from placer.solver.charging import whole_devices
from placer.solver.state import node_devices

__all__ = [
    "DISPATCHED",
    "DRY_RUN",
    "FAILED",
    "IN_FLIGHT",
    "UNCHANGED",
    "UNPLACED",
    "Attempt",
    "Decide",
    "DispatchResult",
    "Dispatcher",
    "Manifest",
    "Outcome",
    "OwnCopy",
    "Transform",
    "attempt_error",
    "placement_from_record",
    "settle_existing",
]

log = logging.getLogger(__name__)

#: ``transform(body, manifest)``: the body to apply instead of ``body`` (after the record).
Transform = Callable[[dict[str, Any], "Manifest"], Mapping[str, Any]]
#: ``decide(workloads, fleet)``: a decision for re-deciding units after a failed dispatch.
Decide = Callable[[Sequence[Workload], Fleet], Decision]
#: ``own_copy(manifest, existing)``: whether a copy with placer's record is this workload.
OwnCopy = Callable[["Manifest", Existing], bool]

#: outcome states.
#: how many times a dispatch reads a member's ledger back (re-planning in between) before
#: it goes ahead with what it has.
CONCURRENCY_CHECKS = 3

DISPATCHED = "dispatched"
DRY_RUN = "dry-run"
UNCHANGED = "unchanged"
IN_FLIGHT = "in-flight"
FAILED = "failed"
UNPLACED = "unplaced"


@dataclass(frozen=True)
class Manifest:
    """A workload to dispatch: the object as the user (or the hub) has it, and what it is."""

    body: Mapping[str, Any]
    decomposition: Decomposition
    #: where it came from (file name, ``hub``), for messages.
    source: str = ""

    @property
    def ref(self) -> WorkloadRef:
        return self.decomposition.ref

    @property
    def workload(self) -> Workload:
        return self.decomposition.workload


@dataclass(frozen=True)
class Attempt:
    """A cluster where dispatching a workload failed, and why (the server's Status)."""

    cluster: str
    error: str
    code: int = 0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "error": self.error,
            "code": self.code,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Outcome:
    """What happened to one workload.

    ``state``: ``dispatched`` (applied now), ``dry-run`` (the server accepted the dry run),
    ``unchanged`` (already placed by placer on ``cluster``; nothing was sent), ``in-flight``
    (another placer process holds its claim and is dispatching it: nothing was sent here;
    ``error`` names the decision), ``failed`` (no cluster took it, or the clean-up after a
    failure did not finish: ``error`` says what) or ``unplaced`` (the solver found no cluster).
    """

    workload: WorkloadRef
    state: str
    cluster: str | None = None
    placement: Placement | None = None
    record: PlacementRecord | None = None
    attempts: tuple[Attempt, ...] = ()
    error: str = ""
    #: uid of the object on the member (empty for dry runs and failures).
    uid: str = ""
    #: the namespace was created for it (or would be, in a dry run).
    namespace_created: bool = False
    #: remarks (dry-run notes, ledger warnings).
    notes: tuple[str, ...] = ()

    @property
    def dispatched(self) -> bool:
        """Applied now (a dry run or an unchanged workload is not)."""
        return self.state == DISPATCHED

    @property
    def placed(self) -> bool:
        """It runs (or would run, in a dry run) on ``cluster``."""
        return self.state in (DISPATCHED, DRY_RUN, UNCHANGED)


@dataclass(frozen=True)
class DispatchResult:
    """The decision as carried out: final placements, per-workload outcomes (input order)."""

    decision_id: str
    decision: Decision
    outcomes: tuple[Outcome, ...]
    warnings: tuple[str, ...] = ()

    def outcome(self, ref: WorkloadRef) -> Outcome:
        for outcome in self.outcomes:
            if outcome.workload == ref:
                return outcome
        raise KeyError(str(ref))

    @property
    def ok(self) -> bool:
        """Every workload is placed (dispatched, unchanged or dry-run accepted)."""
        return all(o.placed for o in self.outcomes)


def attempt_error(err: PlacerError) -> Attempt:
    """An :class:`Attempt` from an error, keeping the server's Status code and reason."""
    if isinstance(err, KubeError):
        text = err.message
        prefix = f"cluster {err.cluster}: "
        if err.cluster and text.startswith(prefix):
            text = text[len(prefix) :]
        return Attempt(err.cluster or "", text, err.code, err.reason)
    return Attempt("", err.message)


class _DispatchError(Exception):
    """A unit could not be dispatched to a cluster (everything created was removed)."""

    def __init__(self, attempt: Attempt, *, leftover: str = "", taken: Claim | None = None) -> None:
        super().__init__(attempt.error)
        self.attempt = attempt
        #: what may be left on the cluster because the clean-up failed (empty: clean).
        self.leftover = leftover
        #: another decider took the unit's claim over (it is not tried elsewhere).
        self.taken = taken


#: what dispatching one unit gives: its outcomes, or the failure.
_UnitResult = _DispatchError | list[Outcome]


@dataclass
class _ClusterRun:
    """Per-cluster state of one dispatch (used by one thread at a time)."""

    client: KubeClient
    #: the cluster's name in the fleet.
    name: str = ""
    known_namespaces: set[str] = field(default_factory=set)
    created_namespaces: set[str] = field(default_factory=set)
    #: namespaces holding workloads this dispatch placed successfully.
    used_namespaces: set[str] = field(default_factory=set)
    #: the ledger could not be written here (warned once).
    ledger_problem: str = ""
    #: in-flight entries reserved on this cluster by this dispatch, by workload.
    reserved: dict[WorkloadRef, InFlight] = field(default_factory=dict)
    #: the workload claims of this dispatch (``None``: not claiming).
    claims: Claims | None = None


@dataclass
class _State:
    """One dispatch's inputs and what it has found so far."""

    by_ref: dict[WorkloadRef, Manifest]
    runs: dict[str, _ClusterRun]
    decision_id: str
    placed_at: str
    fleet: Fleet
    done: dict[WorkloadRef, Outcome] = field(default_factory=dict)
    extra_unplaced: dict[WorkloadRef, dict[str, str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: placements to decide again before dispatching (group members found elsewhere).
    again: list[Placement] = field(default_factory=list)


@dataclass
class _Unit:
    """Placements dispatched together (a ``placer.dev/group``, or one workload)."""

    placements: list[Placement]
    excluded: dict[str, Attempt] = field(default_factory=dict)

    @property
    def refs(self) -> list[WorkloadRef]:
        return [p.workload for p in self.placements]


class Dispatcher:
    """Carries out decisions on the member clusters (see the module docstring).

    Args:
        clients: one client per member cluster, by cluster name.
        policies: PlacementPolicies for re-decisions (the ones of the first decision).
        create_namespaces: create a missing namespace (``False``: a missing one fails there).
        dry_run: ``dryRun=All`` on every write; nothing changes.
        ledger: an in-process ledger to record dispatched placements in (the controller's);
            entries are also written on the members unless ``member_ledger=False``.
        member_ledger: reserve in each member's ``placer-system`` ledger before applying.
        in_flight_ttl: seconds an in-flight entry counts at most.
        resume: dispatch suspended objects resumed (their definition's resume actions).
        transform: last change to each body before it is applied.
        solver, time_limit, seed: for re-decisions after a failed apply.
        decide: replaces the solver for re-decisions (e.g. snapshot-free decisions).
        check_existing: look for copies of the placed workloads on every member before
            applying (:func:`~placer.dispatch.existing.find_existing`): one placed by placer
            stays where it is (``unchanged``), someone else's blocks it (``failed``). Always
            done, after claiming, when ``claims`` is on; this asks for it without claims.
        claims: claim each workload's identity on every member before anything is written
            for it (:mod:`placer.dispatch.claims`), so that of two concurrent deciders exactly
            one dispatches it; the other reports it ``in-flight``, or ``unchanged`` once it
            finds the copy. Dry runs never claim.
        claim_wait: seconds to wait for workloads another decider holds (their claims looked
            at again every 0.2-1 s; a claim that expires meanwhile is taken over) before
            reporting them ``in-flight``.
        claim_ttl: seconds a claim lives without renewal.
        holder: who claims, for people reading a claim (default: host and pid).
        succession: the caller is elected through a leader Lease (the controller): its
            predecessors' claims are taken over at once (:class:`~placer.dispatch.claims.
            Succession`).
        own_copy: ``own_copy(manifest, existing)``: whether a copy found with placer's record
            is this workload as this caller places it (``unchanged``); a copy it rejects is
            ``failed`` (the controller accepts only copies marked with its hub object's uid).
            Default: every copy with placer's record.
        copy_selector: label selector for the lists of the copy check (the controller leaves
            out its own hub's copies, which its informers track and its reconcile adopts).
        max_workers: threads (default: one per cluster with work, at most 16).
        field_manager: server-side apply field manager.
    """

    def __init__(
        self,
        clients: Mapping[str, KubeClient],
        *,
        policies: Sequence[PlacementPolicy] = (),
        create_namespaces: bool = True,
        dry_run: bool = False,
        ledger: Ledger | None = None,
        member_ledger: bool = True,
        in_flight_ttl: float = DEFAULT_TTL,
        resume: bool = False,
        transform: Transform | None = None,
        solver: str = "cpsat",
        time_limit: float = 1.0,
        seed: int = 0,
        decide: Decide | None = None,
        check_existing: bool = False,
        claims: bool = True,
        claim_wait: float = 0.0,
        claim_ttl: float = CLAIM_TTL,
        holder: str | None = None,
        succession: Succession | None = None,
        own_copy: OwnCopy | None = None,
        copy_selector: str | None = None,
        max_workers: int | None = None,
        field_manager: str = FIELD_MANAGER,
    ) -> None:
        self.clients = dict(clients)
        self.policies = tuple(policies)
        self.create_namespaces = create_namespaces
        self.dry_run = dry_run
        self.ledger = ledger
        self.member_ledger = member_ledger
        self.in_flight_ttl = in_flight_ttl
        self.resume = resume
        self.transform = transform
        self.solver = solver
        self.time_limit = time_limit
        self.seed = seed
        self.decide = decide
        self.check_existing = check_existing
        self.claims = claims
        self.claim_wait = claim_wait
        self.claim_ttl = claim_ttl
        self.holder = holder
        self.succession = succession
        self.own_copy = own_copy
        self.copy_selector = copy_selector
        self.max_workers = max_workers
        self.field_manager = field_manager

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
            name = (manifest.body.get("metadata") or {}).get("name")
            if not isinstance(name, str) or not name:
                raise InputError(
                    "metadata.name is required to dispatch (generateName cannot be applied "
                    "idempotently)",
                    source=manifest.source or str(placement.workload),
                    field="metadata.name",
                )
        runs = {name: _ClusterRun(client, name) for name, client in self.clients.items()}
        placed_at = rfc3339()
        state = _State(by_ref, runs, decision_id, placed_at, fleet)
        placements = list(decision.placements)
        if not self.claims or self.dry_run or not placements:
            if self.check_existing and placements:
                placements = self._settle_copies(state, placements)
            self._carry_out(state, placements)
        else:
            claims = Claims(
                self.clients,
                decision=decision_id,
                holder=self.holder,
                ttl=self.claim_ttl,
                field_manager=self.field_manager,
                succession=self.succession,
            )
            for run in runs.values():
                run.claims = claims
            # a decider that waits (a submit, reporting to a user) also looks after the
            # workloads it left unplaced: a concurrent decider may be placing them
            unplaced = (
                [u.workload for u in decision.unplaced if u.workload in by_ref]
                if self.claim_wait > 0
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
        deadline = time.monotonic() + self.claim_wait
        pause = 0.2
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
                    state.done[ref] = _in_flight(ref, claim)
                return
            time.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)
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
        for unit in _units(placements, state.by_ref):
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
        (:func:`settle_existing`; outcomes into ``state``; ``unplaced`` workloads are only
        looked for). Members of a group found placed elsewhere are pinned to the group's
        cluster and decided again when they are not planned there."""
        refs = [p.workload for p in placements]
        if not refs and not unplaced:
            return []
        refs += unplaced
        existing = find_existing(self.clients, refs, label_selector=self.copy_selector)
        manifests = [state.by_ref[ref] for ref in refs]
        todo, settled = settle_existing(manifests, existing, own=self.own_copy)
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
        round_units: list[_Unit] = []
        for unit in _units(state.again, by_ref):
            again = self._redecided(state, unit, success)
            if again is not None:
                success += again.placements
                round_units.append(again)
        state.again.clear()
        round_units += _units(placements, by_ref)
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
                        state.done[ref] = _in_flight(ref, failure.taken)
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

    def _redecided(self, state: _State, unit: _Unit, success: Sequence[Placement]) -> _Unit | None:
        """The unit decided again (:meth:`_redecide`), or ``None`` with its outcomes failed."""
        again = self._redecide(unit, state.by_ref, state.fleet, list(success))
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
                error=_failure_text(unit) if unit.excluded else _unplaced_text(reasons),
            )
            state.extra_unplaced[ref] = reasons
        return None

    # ----------------------------------------------------------------------------------------

    def _round(
        self,
        units: list[_Unit],
        by_ref: Mapping[WorkloadRef, Manifest],
        runs: dict[str, _ClusterRun],
        decision_id: str,
        placed_at: str,
        done: dict[WorkloadRef, Outcome],
        fleet: Fleet,
        success: Sequence[Placement],
    ) -> list[tuple[_Unit, _DispatchError]]:
        per_cluster: dict[str, list[_Unit]] = {}
        for unit in units:
            per_cluster.setdefault(unit.placements[0].cluster, []).append(unit)

        def work(cluster: str, todo: list[_Unit]) -> list[tuple[_Unit, _UnitResult]]:
            out: list[tuple[_Unit, _UnitResult]] = []
            run = runs.get(cluster)
            if run is not None and self.member_ledger and not self.dry_run:
                try:
                    self._reserve(run, todo, decision_id)
                except ClusterUnreachableError as err:
                    attempt = replace(attempt_error(err), cluster=cluster)
                    return [(unit, _DispatchError(attempt)) for unit in todo]
                todo, taken = self._settle_concurrent(
                    run, cluster, todo, by_ref, fleet, success, decision_id
                )
                out += [(unit, _DispatchError(attempt)) for unit, attempt in taken]
            for unit in todo:
                if run is None:
                    attempt = Attempt(cluster, "no client for this cluster", 0, "NoClient")
                    out.append((unit, _DispatchError(attempt)))
                    continue
                try:
                    out.append(
                        (unit, self._dispatch_unit(unit, by_ref, run, decision_id, placed_at))
                    )
                except _DispatchError as failure:
                    out.append((unit, failure))
            return out

        workers = self.max_workers or min(16, max(1, len(per_cluster)))
        results: list[tuple[_Unit, _UnitResult]] = []
        if len(per_cluster) <= 1 or workers == 1:
            for cluster, todo in per_cluster.items():
                results += work(cluster, todo)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dispatch") as pool:
                futures = [pool.submit(work, c, todo) for c, todo in per_cluster.items()]
                for future in futures:
                    results += future.result()
        failed: list[tuple[_Unit, _DispatchError]] = []
        for unit, result in results:
            if isinstance(result, _DispatchError):
                failed.append((unit, result))
            else:
                for outcome in result:
                    done[outcome.workload] = replace(
                        outcome, attempts=tuple(unit.excluded.values())
                    )
        return failed

    def _dispatch_unit(
        self,
        unit: _Unit,
        by_ref: Mapping[WorkloadRef, Manifest],
        run: _ClusterRun,
        decision_id: str,
        placed_at: str,
    ) -> list[Outcome]:
        client = run.client
        cluster = unit.placements[0].cluster
        created_here: list[str] = []
        applied: list[WorkloadRef] = []
        notes: dict[WorkloadRef, list[str]] = {p.workload: [] for p in unit.placements}
        would_create: set[str] = set()
        outcomes: list[Outcome] = []
        try:
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
                body = self._body(manifest, record)
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
                        )
                    )
                    continue
                self._fence(run, unit, placement.workload, cluster, applied, created_here)
                applied.append(placement.workload)
                result = client.apply(
                    body, field_manager=self.field_manager, force=False, dry_run=self.dry_run
                )
                uid = "" if self.dry_run else str((result.get("metadata") or {}).get("uid", ""))
                outcomes.append(
                    Outcome(
                        placement.workload,
                        DRY_RUN if self.dry_run else DISPATCHED,
                        cluster=cluster,
                        placement=placement,
                        record=record,
                        uid=uid,
                        namespace_created=placement.workload.namespace in created_here,
                    )
                )
        except PlacerError as err:
            attempt = attempt_error(err)
            attempt = replace(attempt, cluster=cluster)
            # the failing apply may have landed when the answer was lost: remove it too
            maybe = applied if _may_have_landed(err) else applied[:-1]
            leftover = self._rollback(run, unit, maybe, created_here)
            raise _DispatchError(attempt, leftover=leftover) from None
        for placement in unit.placements:
            run.used_namespaces.add(placement.workload.namespace)
            if self.ledger is not None and not self.dry_run:
                entry = run.reserved.get(placement.workload)
                self.ledger.add(
                    entry or InFlight.new(placement, decision_id, ttl=self.in_flight_ttl)
                )
        if run.ledger_problem:
            for ref in notes:
                notes[ref].append("in-flight ledger not written on this cluster")
        return [replace(o, notes=tuple(notes[o.workload])) for o in outcomes]

    def _fence(
        self,
        run: _ClusterRun,
        unit: _Unit,
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
        leftover = self._rollback(run, unit, applied, created)
        attempt = Attempt(cluster, text, 409, "Conflict")
        holder = taken or Claim("", "", "another decider", "", 0.0, 0.0, 0.0)
        raise _DispatchError(attempt, leftover=leftover, taken=holder)

    def _body(self, manifest: Manifest, record: PlacementRecord) -> dict[str, Any]:
        body = dispatch_manifest(manifest.body, manifest.ref, record)
        definition = manifest.decomposition.definition
        if self.resume and can_suspend(definition):
            body = resume(body, definition)
        if self.transform is not None:
            body = dict(self.transform(body, manifest))
        return body

    def _namespace(self, run: _ClusterRun, namespace: str) -> str:
        """``known``, ``created`` or ``would-create``; raises KubeError to fail the cluster."""
        if namespace in run.known_namespaces:
            return "known"
        client = run.client
        try:
            client.get("v1", "Namespace", namespace)
        except NotFoundError:
            if not self.create_namespaces:
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
            if self.dry_run:
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

    def _reserve(self, run: _ClusterRun, units: Sequence[_Unit], decision_id: str) -> None:
        """Reserve every placement of ``units`` in the member's ledger, in one write.

        A cluster that refuses the ledger (403, ...) gets the workloads anyway, with a warning;
        an unreachable one raises :class:`ClusterUnreachableError` (its units fail).
        """
        if run.ledger_problem:
            return
        claims = run.claims
        entries = [
            InFlight.new(
                placement,
                decision_id,
                ttl=self.in_flight_ttl,
                claimed=claims is not None and run.name in claims.members_of(ref),
            )
            for unit in units
            for placement in unit.placements
            if any(pod.node for pod in placement.pods)  # snapshot-free: nothing to charge
            for ref in (placement.workload,)
        ]
        if not entries:
            return
        token = re.sub(r"[^a-z0-9-]+", "-", label_value(decision_id).lower()).strip("-")
        name = f"inflight-{token[:40] or 'decision'}"
        try:
            stored = write_entries(run.client, entries, name=name, field_manager=self.field_manager)
        except ClusterUnreachableError:
            raise
        except KubeError as err:
            run.ledger_problem = attempt_error(err).error
            log.warning("cluster %s: in-flight ledger not written: %s", run.client.name, err)
            return
        run.reserved.update({entry.workload: entry for entry in stored})

    def _settle_concurrent(
        self,
        run: _ClusterRun,
        cluster: str,
        units: Sequence[_Unit],
        by_ref: Mapping[WorkloadRef, Manifest],
        fleet: Fleet,
        success: Sequence[Placement],
        decision_id: str,
    ) -> tuple[list[_Unit], list[tuple[_Unit, Attempt]]]:
        """Check ``units`` (reserved on ``cluster``) against entries a concurrent decision
        wrote since this one was made (see the module docstring).

        Returns the units to apply — re-planned on the cluster's nodes where their planned
        nodes were taken, with their entries rewritten — and the units that no longer fit
        there, each with the attempt that fails it.
        """
        if self.ledger is None or run.ledger_problem or not run.reserved:
            return list(units), []
        base = replace(fleet, clusters=tuple(c for c in fleet.clusters if c.name == cluster))
        mine = {ref for unit in units for ref in unit.refs}
        ours = [p for p in success if p.cluster == cluster and p.workload not in mine]
        todo = list(units)
        failed: list[tuple[_Unit, Attempt]] = []
        for _ in range(CONCURRENCY_CHECKS):
            meanwhile = self._written_meanwhile(run, cluster, decision_id)
            if not meanwhile:
                return todo, failed
            decisions = ", ".join(sorted({e.decision for e in meanwhile}))
            charged = charge_known(base, [e.placement for e in meanwhile] + ours)
            keep: list[_Unit] = []
            taken: list[_Unit] = []
            for unit in todo:
                placements = _idle_devices(charged, unit.placements)
                if self._fits(unit, placements, by_ref, charged):
                    keep.append(unit)
                    charged = charge_known(charged, placements)
                else:
                    taken.append(unit)
            if not taken:
                return todo, failed
            replanned: list[_Unit] = []
            for unit in taken:
                self._rollback(run, unit, [], [])
                again = self._decide_on(unit, by_ref, charged)
                if again is None:
                    text = (
                        f"the room was taken by a concurrent placement (decision {decisions}) "
                        "since this decision was made, and the workload no longer fits here"
                    )
                    log.info("cluster %s: %s: %s", cluster, ", ".join(map(str, unit.refs)), text)
                    failed.append((unit, Attempt(cluster, text, 409, "Conflict")))
                    continue
                log.info(
                    "cluster %s: %s re-planned on other nodes (decision %s took its nodes)",
                    cluster,
                    ", ".join(map(str, unit.refs)),
                    decisions,
                )
                replanned.append(_Unit(again, unit.excluded))
                charged = charge_known(charged, again)
            if replanned:
                self._reserve(run, replanned, decision_id)
            todo = keep + replanned
        return todo, failed

    def _written_meanwhile(
        self, run: _ClusterRun, cluster: str, decision_id: str
    ) -> list[InFlight]:
        """Live entries on ``cluster`` that neither this decision nor its ledger knew."""
        assert self.ledger is not None
        try:
            stored = read_entries(run.client)
        except KubeError as err:  # the apply will tell whether the cluster still answers
            log.info("cluster %s: ledger not read back: %s", cluster, err)
            return []
        now = time.time()
        meanwhile = []
        for entry in stored:
            if entry.decision == decision_id or entry.expired(now):
                continue
            known = self.ledger.get(cluster, entry.workload)
            if known is None or known.decision != entry.decision:
                meanwhile.append(entry)
        return meanwhile

    @staticmethod
    def _fits(
        unit: _Unit,
        placements: Sequence[Placement],
        by_ref: Mapping[WorkloadRef, Manifest],
        fleet: Fleet,
    ) -> bool:
        workloads = [by_ref[ref].workload for ref in unit.refs]
        summary = DecisionSummary(
            solver="check",
            mode="batch",
            status="feasible",
            seconds=0.0,
            workloads=len(workloads),
            placed=len(placements),
        )
        return not verify(Decision(tuple(placements), (), summary), workloads, fleet)

    def _decide_on(
        self, unit: _Unit, by_ref: Mapping[WorkloadRef, Manifest], fleet: Fleet
    ) -> list[Placement] | None:
        """The unit's workloads placed again on ``fleet`` (one cluster), or ``None``."""
        workloads = [by_ref[ref].workload for ref in unit.refs]
        if self.decide is not None:
            decision = self.decide(workloads, fleet)
        else:
            decision = solve(
                workloads,
                fleet,
                policies=self.policies,
                solver=self.solver,
                time_limit=self.time_limit,
                seed=self.seed,
            )
        if decision.unplaced or len(decision.placements) != len(workloads):
            return None
        return list(decision.placements)

    def _rollback(
        self,
        run: _ClusterRun,
        unit: _Unit,
        applied: list[WorkloadRef],
        created: list[str],
    ) -> str:
        """Remove what the unit left on the cluster; what could not be removed, in words."""
        if self.dry_run:
            return ""
        client = run.client
        problems: list[str] = []
        for ref in applied:
            try:
                client.delete(
                    ref.api_version,
                    ref.kind,
                    ref.name,
                    namespace=ref.namespace,
                    propagation_policy="Background",
                    missing_ok=True,
                )
            except KubeError as err:
                problems.append(f"{ref} may be left on cluster {client.name} ({err.message})")
        by_store: dict[str, list[WorkloadRef]] = {}
        for ref in unit.refs:
            entry = run.reserved.pop(ref, None)
            if entry is not None:
                by_store.setdefault(entry.store, []).append(ref)
        for store, refs in by_store.items():
            try:
                remove_entries(client, store, refs)
            except KubeError as err:  # left to expire, or to readers once its grace is over
                log.info("cluster %s: ledger entries %s not removed: %s", client.name, refs, err)
        for namespace in created:
            if namespace in run.used_namespaces:
                continue
            try:
                client.delete("v1", "Namespace", namespace, missing_ok=True)
                run.known_namespaces.discard(namespace)
                run.created_namespaces.discard(namespace)
            except KubeError as err:
                problems.append(
                    f"namespace {namespace} created by placer may be left on cluster "
                    f"{client.name} ({err.message})"
                )
        if problems:
            return "not placed elsewhere, so that it cannot run twice: " + "; ".join(problems)
        return ""

    def _redecide(
        self,
        unit: _Unit,
        by_ref: Mapping[WorkloadRef, Manifest],
        fleet: Fleet,
        success: list[Placement],
    ) -> _Unit | Decision:
        """The unit decided again without its failed clusters: a new unit, or the decision
        that left it unplaced."""
        excluded = {name: a for name, a in unit.excluded.items()}
        clusters = []
        for cluster in fleet.clusters:
            if cluster.name in excluded:
                clusters.append(
                    replace(cluster, reachable=False, reason=excluded[cluster.name].error)
                )
            else:
                clusters.append(cluster)
        base = replace(fleet, clusters=tuple(clusters))
        known = {c.name for c in base.clusters if c.reachable}
        charged = charge_known(base, [p for p in success if p.cluster in known])
        workloads = [by_ref[ref].workload for ref in unit.refs]
        if self.decide is not None:
            decision = self.decide(workloads, charged)
        else:
            decision = solve(
                workloads,
                charged,
                policies=self.policies,
                solver=self.solver,
                time_limit=self.time_limit,
                seed=self.seed,
            )
        if decision.placements and not decision.unplaced:
            return _Unit(list(decision.placements), dict(unit.excluded))
        fixed = tuple(
            Unplaced(
                u.workload,
                {
                    name: (f"dispatch failed: {excluded[name].error}" if name in excluded else text)
                    for name, text in u.reasons.items()
                },
            )
            for u in decision.unplaced
        )
        return replace(decision, placements=(), unplaced=fixed)

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
                outcome = Outcome(ref, UNPLACED, error=_unplaced_text(reasons.get(ref, {})))
            outcomes.append(outcome)
            if outcome.placed and outcome.placement is not None:
                placements.append(outcome.placement)
            else:
                unplaced.append(Unplaced(ref, reasons.get(ref, {})))
        summary = replace(
            decision.summary,
            placed=len(placements),
            placed_requests=_sum_requests(placements),
        )
        final = Decision(tuple(placements), tuple(unplaced), summary)
        return DispatchResult(decision_id, final, tuple(outcomes), tuple(warnings))


# --------------------------------------------------------------------------------------------


def _units(placements: Sequence[Placement], by_ref: Mapping[WorkloadRef, Manifest]) -> list[_Unit]:
    groups: dict[tuple[str, str], _Unit] = {}
    units: list[_Unit] = []
    for placement in placements:
        group = by_ref[placement.workload].workload.group
        if group:
            key = (placement.cluster, group)
            if key in groups:
                groups[key].placements.append(placement)
                continue
            unit = groups[key] = _Unit([placement])
        else:
            unit = _Unit([placement])
        units.append(unit)
    return units


def _idle_devices(fleet: Fleet, placements: Sequence[Placement]) -> list[Placement]:
    """``placements`` with each whole-GPU pod's recorded devices moved to devices still idle
    in ``fleet``, as charging them would (:func:`placer.solver.charge`): the verifier checks
    the indices a plan records, and which device a whole-GPU pod gets is the device plugin's
    choice, so a plan whose "device 0" another decision took still fits on device 1."""
    state = {(c.name, n.name): list(node_devices(n)) for c in fleet.clusters for n in c.nodes}
    moved: list[Placement] = []
    for placement in placements:
        pods = []
        for pod in placement.pods:
            devices = state.get((placement.cluster, pod.node))
            whole = pod.requests.get(GPU, 0)
            if devices is not None and pod.devices and whole:
                chosen = whole_devices(devices, list(pod.devices[:whole]), whole)
                if len(chosen) == whole:
                    pod = replace(pod, devices=(*chosen, *pod.devices[whole:]))
                    for i in chosen:
                        devices[i] = 0
            pods.append(pod)
        moved.append(replace(placement, pods=tuple(pods)))
    return moved


def _may_have_landed(err: PlacerError) -> bool:
    """Whether a failed write may still have been stored (the answer was lost)."""
    if isinstance(err, ClusterUnreachableError):
        text = err.status_message or ""
        never_sent = err.reason == "TLSError" or "refused" in text or "does not resolve" in text
        return not never_sent
    return isinstance(err, KubeError) and err.code >= 500


def _failure_text(unit: _Unit) -> str:
    parts = [f"{a.cluster}: {a.error}" for a in unit.excluded.values()]
    return "dispatch failed on every cluster that fits: " + "; ".join(parts)


def _unplaced_text(reasons: Mapping[str, str]) -> str:
    if not reasons:
        return "not placed"
    return "not placed: " + "; ".join(f"{c}: {t}" for c, t in reasons.items())


def _sum_requests(placements: Sequence[Placement]) -> dict[str, int]:
    total: dict[str, int] = {}
    for placement in placements:
        for name, amount in placement.requests.items():
            total[name] = total.get(name, 0) + amount
    return total


def _in_flight(ref: WorkloadRef, claim: Claim) -> Outcome:
    """The outcome of a workload another decider holds the claim of."""
    return Outcome(
        ref,
        IN_FLIGHT,
        error=(
            f"being placed by {claim.describe()} (it holds the workload's claim); nothing "
            "was sent from here, so that it cannot run twice"
        ),
    )


def settle_existing(
    manifests: Sequence[Manifest],
    existing: ExistingCopies,
    *,
    own: OwnCopy | None = None,
) -> tuple[list[Manifest], dict[WorkloadRef, Outcome]]:
    """Workloads still to decide, and the outcomes of those that already exist somewhere.

    A copy with placer's record (that ``own`` accepts, when given): ``unchanged`` (it stays
    there; a new member of its ``placer.dev/group`` is pinned to the same cluster). Other
    copies (someone else's object, or placer's placed by a caller ``own`` rejects):
    ``failed``, placed nowhere, so that it cannot run twice.
    """
    settled: dict[WorkloadRef, Outcome] = {}
    group_cluster: dict[str, str] = {}
    for manifest in manifests:
        copies = existing.of(manifest.ref)
        if not copies:
            continue
        ours = [c for c in copies if c.record is not None and (own is None or own(manifest, c))]
        if ours:
            copy = ours[0]
            record = copy.record
            assert record is not None
            note: tuple[str, ...] = ()
            if len(copies) > 1:
                others = ", ".join(c.cluster for c in copies if c is not copy)
                note = (f"also found on {others}: check for a duplicate",)
            settled[manifest.ref] = Outcome(
                manifest.ref,
                UNCHANGED,
                cluster=copy.cluster,
                placement=placement_from_record(manifest, copy.cluster, record),
                record=record,
                uid=copy.uid,
                notes=note,
            )
            if manifest.workload.group:
                group_cluster[manifest.workload.group] = copy.cluster
        elif any(c.record is not None for c in copies):
            placed = next(c for c in copies if c.record is not None)
            assert placed.record is not None
            settled[manifest.ref] = Outcome(
                manifest.ref,
                FAILED,
                cluster=placed.cluster,
                error=(
                    f"already placed on cluster {placed.cluster} by another placer "
                    f"(decision {placed.record.decision}), not by this one; not placed again, "
                    "so that it cannot run twice: delete that copy to place it from here"
                ),
            )
        else:
            where = ", ".join(c.cluster for c in copies)
            settled[manifest.ref] = Outcome(
                manifest.ref,
                FAILED,
                cluster=copies[0].cluster,
                error=(
                    f"already exists on cluster {where} without placer's placement record "
                    "(created by someone else); not placed anywhere, so that it cannot run "
                    "twice: delete it there, or rename the workload"
                ),
            )
    todo: list[Manifest] = []
    for manifest in manifests:
        if manifest.ref in settled:
            continue
        group = manifest.workload.group
        if group and group in group_cluster:
            workload = replace(manifest.workload, pinned_cluster=group_cluster[group])
            decomposition = replace(manifest.decomposition, workload=workload)
            manifest = replace(manifest, decomposition=decomposition)
        todo.append(manifest)
    return todo, settled


def placement_from_record(manifest: Manifest, cluster: str, record: PlacementRecord) -> Placement:
    workload = manifest.workload
    pods = []
    for component in workload.components:
        planned = record.plan.get(component.label, ())
        for index in range(component.replicas):
            node = planned[index] if index < len(planned) else ""
            pods.append(
                PodAssignment(
                    component.name, component.instance, index, node, dict(component.pod.requests)
                )
            )
    return Placement(workload.ref, cluster, tuple(pods), workload.total_requests())
