"""One submission, end to end: gather, account for what is in flight, decide, dispatch.

:func:`submit` is what ``placer submit`` runs (and what the benchmark measures):

1. gather the fleet's node-level capacity (:func:`placer.fleet.gather_fleet`) and the in-flight
   ledger of every member, each member's ledger read just before its capacity
   (:func:`gather_charged`: entries read, observed pods retired, expired, finished and
   abandoned entries deleted; see :func:`~placer.dispatch.ledger.sync_cluster`), and charge
   the ledger to the fleet — or, with ``snapshot_free``, only check which clusters answer;
2. find copies of the workloads already on the members (:func:`~placer.dispatch.existing.
   find_existing`): a workload placer already placed stays where it is (``unchanged``; a new
   member of its ``placer.dev/group`` is pinned to the same cluster); one that exists on a
   member *without* placer's record is not placed anywhere (it would run twice) and fails with
   an explanation;
3. apply the changed ones (their manifest differs from the copy placer placed) where they
   are, when they still fit there, or move them with ``moves`` (``--move``), under their
   claims (:class:`~placer.dispatch.update.Updater`): ``updated``, ``moved``, or ``failed``
   with the reason and nothing changed; the fleet is then charged with what they take now;
4. decide the rest in one batch (:func:`placer.solver.solve`) and dispatch the decision
   (:class:`~placer.dispatch.dispatcher.Dispatcher`), which claims each workload on the
   members first (:mod:`placer.dispatch.claims`): a workload another ``placer`` process is
   dispatching at the same moment is waited for (up to :data:`CLAIM_WAIT` seconds) and then
   reported ``unchanged`` where that process put it, or ``in-flight`` if it is still at it;
5. explain, for every newly placed workload, why each other cluster was not chosen
   (:func:`placer.solver.refusals.refusals`).

Snapshot-free mode (``--snapshot-free``): for users who may not list nodes and pods on the
members (namespace-scoped RBAC), or who want the members' own schedulers and queues (Kueue) to
do the fitting. No capacity is gathered: each cluster is probed with one ``/version`` request,
clusters are filtered by reachability, PlacementPolicy cluster selectors, pins, the clusters a
workload avoids (``placer.dev/avoid-clusters``) and cluster taints, and ranked by the policy's
preferred clusters and costs (then fleet order). The decision has no pod-to-node plan, writes
no in-flight entry (there is no capacity to charge) and says so in every reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from placer.dispatch.claims import CLAIM_TTL
from placer.dispatch.dependencies import references, refresh
from placer.dispatch.dispatcher import Dispatcher
from placer.dispatch.existing import find_existing, settle_existing
from placer.dispatch.handoff import gang_warnings
from placer.dispatch.ledger import DEFAULT_TTL, Ledger, charge_known, sync_cluster
from placer.dispatch.options import DispatchOptions, MoveOptions
from placer.dispatch.outcomes import (
    DRY_RUN,
    IN_FLIGHT,
    MOVED,
    UNCHANGED,
    UPDATED,
    Manifest,
    Outcome,
)
from placer.dispatch.record import new_decision_id
from placer.dispatch.spread import dispatch_spread, settle_spread, spreads
from placer.errors import ClusterUnreachableError, InputError, KubeError
from placer.fleet import ClusterSource, FleetConfig, gather_fleet
from placer.fleet.gather import unavailable
from placer.kube import KubeClient
from placer.model import (
    AVOIDED_REASON,
    Cluster,
    Decision,
    DecisionSummary,
    Fleet,
    Placement,
    PodAssignment,
    Unplaced,
    Workload,
    WorkloadRef,
)
from placer.podspec import taint_not_tolerated
from placer.policy import PlacementPolicy, policy_for
from placer.quantity import add
from placer.queues import QueueSet
from placer.solver import solve

if TYPE_CHECKING:
    from placer.dispatch.existing import ExistingCopies
    from placer.dispatch.update import Change
    from placer.solver.fairshare import Running
from placer.solver.refusals import refusals
from placer.stopwatch import Stopwatch

__all__ = ["CLAIM_WAIT", "SubmitReport", "gather_charged", "snapshot_free_decision", "submit"]

log = logging.getLogger(__name__)

#: states of workloads settled before the decision that stay placed where their outcome says.
SETTLED_PLACED = (UNCHANGED, UPDATED, MOVED, DRY_RUN)
#: seconds a submission waits for workloads another placer process is dispatching (longer
#: than a claim lives: the claim of a process that died is taken over within the wait).
CLAIM_WAIT = CLAIM_TTL + 5.0


@dataclass(frozen=True)
class SubmitReport:
    """Everything ``placer submit`` shows."""

    decision_id: str
    #: the decision as carried out: placements where workloads are (new and unchanged).
    decision: Decision
    #: one per manifest, in input order.
    outcomes: tuple[Outcome, ...]
    #: newly placed workload -> other cluster -> why it was not chosen.
    refused: Mapping[WorkloadRef, Mapping[str, str]]
    #: the fleet the decision was made on (in-flight placements charged).
    fleet: Fleet
    warnings: tuple[str, ...] = ()
    #: seconds per step: gather (the ledger read included), ledger (the slowest member's
    #: ledger read), existing, update (when a manifest changed), decide, dispatch, explain.
    timings: Mapping[str, float] = field(default_factory=dict)
    #: the in-flight ledger ``fleet`` was charged with (this dispatch's entries added): what a
    #: later dispatch on that fleet knows (:mod:`placer.dispatch.reclaim`).
    ledger: Ledger | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        """Every workload is placed, or being placed by a concurrent placer process."""
        return all(o.placed or o.state == IN_FLIGHT for o in self.outcomes)


def submit(
    manifests: Sequence[Manifest],
    config: FleetConfig,
    clients: Mapping[str, KubeClient],
    *,
    policies: Sequence[PlacementPolicy] = (),
    dry_run: bool = False,
    create_namespaces: bool = True,
    snapshot_free: bool = False,
    solver: str = "cpsat",
    time_limit: float = 1.0,
    seed: int = 0,
    in_flight_ttl: float = DEFAULT_TTL,
    explain: bool = True,
    claim_wait: float = CLAIM_WAIT,
    queues: QueueSet | None = None,
    running: Sequence[Running] = (),
    moves: MoveOptions | None = None,
    pin_nodes: bool = False,
) -> SubmitReport:
    """Place and dispatch ``manifests`` on the fleet of ``config`` (see the module docstring).

    With ``queues`` the decision honours them (:func:`placer.solver.fairshare.solve_fair`),
    ``running`` (the work placer placed on the members) booked to its queues first.

    ``moves``: whether a changed workload that no longer fits its cluster moves
    (:class:`~placer.dispatch.update.MoveOptions`; default: it does not).

    Never raises for cluster trouble: unreachable clusters are left out with their reason,
    dispatch failures are in the outcomes.
    """
    spread = {m.ref for m in manifests if spreads(m.workload, policies)}
    if spread and (snapshot_free or queues is not None):
        raise InputError(
            f"{min(spread, key=str)}: its policy spreads it over clusters (replicaScheduling), "
            f"which {'a snapshot-free decision' if snapshot_free else 'a decision with queues'} "
            "cannot do yet: the division needs every cluster's free capacity"
        )
    warnings: list[str] = []
    stopwatch = Stopwatch(digits=4)
    lap = stopwatch.lap
    ledger = Ledger()
    if snapshot_free:
        fleet = _probe_fleet(config, clients)
    else:
        fleet, ledger, problems, slowest = gather_charged(config, clients, delete=not dry_run)
        warnings += problems
    lap("gather")
    if not snapshot_free:
        stopwatch.record("ledger", slowest)
    reachable = {
        c.name: clients[c.name] for c in fleet.clusters if c.reachable and c.name in clients
    }
    existing = find_existing(reachable, [m.ref for m in manifests])
    for name, reason in existing.unknown.items():
        warnings.append(
            f"cluster {name}: could not check for existing copies ({reason}); a copy placed "
            "there earlier cannot be ruled out"
        )
    decision_id = new_decision_id()
    whole = [m for m in manifests if m.ref not in spread]
    todo, settled = settle_existing(whole, existing)
    changes = _changed_copies(whole, settled, existing)
    spread_todo: list[Manifest] = []
    for manifest in manifests:
        if manifest.ref in spread:
            found = settle_spread(manifest, existing.of(manifest.ref), list(reachable))
            if found is None:
                spread_todo.append(manifest)
            else:
                settled[manifest.ref] = found
    lap("existing")
    options = DispatchOptions(
        policies=tuple(policies),
        create_namespaces=create_namespaces,
        dry_run=dry_run,
        member_ledger=not snapshot_free,
        in_flight_ttl=in_flight_ttl,
        solver=solver,
        time_limit=time_limit,
        seed=seed,
        decide=(lambda w, f: snapshot_free_decision(w, f, policies)) if snapshot_free else None,
        claim_wait=claim_wait,
        schedulers=config.schedulers,
        pin_nodes=pin_nodes,
    )
    if changes:
        from placer.dispatch.update import Updater

        updater = Updater(reachable, options, ledger=ledger, moves=moves)
        updated = updater.update(changes, fleet, decision_id=decision_id)
        settled.update(updated.outcomes)
        fleet = updated.fleet
        warnings += updated.warnings
        lap("update")
    settled.update(_refresh_unchanged(manifests, settled, reachable, options))
    if snapshot_free:
        decision = snapshot_free_decision([m.workload for m in todo], fleet, policies)
    elif queues is not None:
        from placer.solver.fairshare import solve_fair  # OR-Tools, as solve

        decision = solve_fair(
            [m.workload for m in todo],
            fleet,
            queues,
            running=running,
            policies=policies,
            solver=solver,
            time_limit=time_limit,
            seed=seed,
        ).decision
    elif spread_todo:
        from placer.solver.spread import solve_spread

        decision = solve_spread(
            [m.workload for m in [*todo, *spread_todo]],
            fleet,
            policies=policies,
            solver=solver,
            time_limit=time_limit,
            seed=seed,
        )
    else:
        decision = solve(
            [m.workload for m in todo],
            fleet,
            policies=policies,
            solver=solver,
            time_limit=time_limit,
            seed=seed,
        )
    lap("decide")
    spread_outcomes: dict[WorkloadRef, Outcome] = {}
    whole_fleet = fleet
    if spread_todo:
        spread_outcomes, said = dispatch_spread(
            spread_todo,
            decision,
            fleet,
            reachable,
            options,
            ledger=ledger,
            decision_id=decision_id,
        )
        warnings += said
        decision = _without(decision, spread)
        # the copies placed take their room: the other workloads' re-decisions must see it
        whole_fleet = charge_known(fleet, _copy_placements(spread_outcomes.values()))
    if queues is not None and not snapshot_free:
        from placer.dispatch.redecide import queue_guard

        guard = queue_guard(queues, running, decision, [m.workload for m in todo])
        options = replace(options, guard=guard)
    dispatcher = Dispatcher(reachable, options, ledger=ledger)
    result = dispatcher.dispatch(todo, decision, whole_fleet, decision_id=decision_id)
    lap("dispatch")
    warnings += result.warnings
    warnings += gang_warnings(
        (
            o.placement
            for o in [*result.outcomes, *_copies(spread_outcomes.values())]
            if o.placed and o.placement is not None
        ),
        {m.ref: m.workload for m in manifests},
        fleet,
        config.schedulers,
        policies,
    )
    by_ref = {o.workload: o for o in result.outcomes}
    by_ref.update(settled)
    by_ref.update(spread_outcomes)
    outcomes = tuple(by_ref[m.ref] for m in manifests)
    refused: dict[WorkloadRef, dict[str, str]] = {}
    new = {
        o.workload: o.cluster
        for o in result.outcomes
        if o.placed
        and o.cluster
        and o.state != UNCHANGED  # not placed by another process
        and o.workload not in spread  # a copy per cluster: no cluster refused it alone
    }
    if explain and new and not snapshot_free:
        refused = refusals(
            [m.workload for m in todo if m.ref in new],
            fleet,
            {ref: cluster for ref, cluster in new.items() if cluster},
            policies=policies,
        )
    final = _merge(result.decision, outcomes, manifests, decision)
    lap("explain")
    return SubmitReport(
        decision_id,
        final,
        outcomes,
        refused,
        fleet,
        tuple(warnings),
        stopwatch.timings,
        None if snapshot_free else ledger,
    )


# --------------------------------------------------------------------------------------------


def _changed_copies(
    manifests: Sequence[Manifest],
    settled: Mapping[WorkloadRef, Outcome],
    existing: ExistingCopies,
) -> list[Change]:
    """:func:`placer.dispatch.update.changed_copies`, importing the updater only when a
    workload is already on a member (a first submit changes nothing)."""
    if not any(outcome.state == UNCHANGED for outcome in settled.values()):
        return []
    from placer.dispatch.update import changed_copies

    return changed_copies(manifests, settled, existing)


def _refresh_unchanged(
    manifests: Sequence[Manifest],
    settled: Mapping[WorkloadRef, Outcome],
    clients: Mapping[str, KubeClient],
    options: DispatchOptions,
) -> dict[WorkloadRef, Outcome]:
    """The unchanged workloads' outcomes after the objects their pods name were brought up to
    date beside their copies (:func:`placer.dispatch.dependencies.refresh`: a ConfigMap deleted
    on the member is restored by the next submission, one changed in the input is updated)."""
    out: dict[WorkloadRef, Outcome] = {}
    for manifest in manifests:
        outcome = settled.get(manifest.ref)
        if outcome is None or outcome.state != UNCHANGED or not outcome.uid:
            continue
        client = clients.get(outcome.cluster or "")
        if client is None or not references(manifest):
            continue
        ref = manifest.ref
        owner = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "metadata": {"name": ref.name, "namespace": ref.namespace, "uid": outcome.uid},
        }
        notes = refresh(
            client,
            manifest,
            owner,
            field_manager=options.field_manager,
            dry_run=options.dry_run,
        )
        if notes:
            out[ref] = replace(outcome, notes=(*outcome.notes, *notes))
    return out


def gather_charged(
    config: FleetConfig, clients: Mapping[str, KubeClient], *, delete: bool = True
) -> tuple[Fleet, Ledger, list[str], float]:
    """The fleet gathered and charged with the in-flight ledger, the ledger, warnings, and the
    longest a member's ledger read took (seconds).

    Each member's ledger is synced (:func:`~placer.dispatch.ledger.sync_cluster`) in that
    member's gathering thread, *before* its nodes and pods are listed: an entry retired
    because its pods were seen bound then finds those pods in the gathered capacity. The other
    way round, pods bound between the two reads would be in neither, and a decision would
    place onto their GPUs. A member whose ledger does not answer is reported unreachable;
    one that refuses it (403) is gathered, with a warning. ``delete=False`` reads only.
    """
    ledger = Ledger()
    warnings: list[str] = []
    slowest = 0.0

    def read(source: ClusterSource) -> None:
        nonlocal slowest
        client = clients.get(source.name)
        if client is None:
            return
        start = time.perf_counter()
        try:
            ledger.replace_cluster(source.name, sync_cluster(client, delete=delete))
        except ClusterUnreachableError:
            raise
        except KubeError as err:
            warnings.append(
                f"cluster {source.name}: in-flight ledger not read ({err.message}); "
                "placements dispatched there moments ago may not be accounted for"
            )
        slowest = max(slowest, time.perf_counter() - start)

    fleet = gather_fleet(config, before=read)
    return ledger.charge(fleet), ledger, sorted(warnings), slowest


def _merge(
    decision: Decision,
    outcomes: Sequence[Outcome],
    manifests: Sequence[Manifest],
    decided: Decision | None = None,
) -> Decision:
    """The dispatch's decision plus the workloads settled before it: unchanged, updated,
    moved (and their dry runs), refused as foreign; a spread workload's copies, one placement
    each (unplaced: its reasons in ``decided``, the decision before dispatch)."""
    placements: dict[WorkloadRef, list[Placement]] = {}
    for placement in decision.placements:
        placements.setdefault(placement.workload, []).append(placement)
    unplaced = {u.workload: u for u in decision.unplaced}
    reasons = {u.workload: u for u in decided.unplaced} if decided is not None else {}
    for outcome in outcomes:
        if outcome.copies:
            if outcome.placed:
                placements[outcome.workload] = [
                    c.placement for c in outcome.copies if c.placement is not None
                ]
            else:
                unplaced[outcome.workload] = Unplaced(
                    outcome.workload,
                    {c.cluster: c.error for c in outcome.copies if c.cluster}
                    or {outcome.cluster or "": outcome.error},
                )
        elif outcome.state in SETTLED_PLACED and outcome.placement is not None:
            placements[outcome.workload] = [outcome.placement]
        elif outcome.workload not in placements and outcome.workload not in unplaced:
            if outcome.workload in reasons:
                unplaced[outcome.workload] = reasons[outcome.workload]
                continue
            text = {outcome.cluster: outcome.error} if outcome.cluster else {}
            unplaced[outcome.workload] = Unplaced(outcome.workload, text)
    order = [m.ref for m in manifests]
    placed = tuple(p for r in order for p in placements.get(r, ()))
    total = add(*(p.requests for p in placed))
    demand = add(*(m.workload.total_requests() for m in manifests))
    summary = replace(
        decision.summary,
        workloads=len(manifests),
        placed=len({p.workload for p in placed}),
        placed_requests=total,
        demand=demand,
    )
    return Decision(placed, tuple(unplaced[r] for r in order if r in unplaced), summary)


def _without(decision: Decision, refs: set[WorkloadRef]) -> Decision:
    """``decision`` without the workloads ``refs`` (dispatched apart: spread workloads)."""
    return Decision(
        tuple(p for p in decision.placements if p.workload not in refs),
        tuple(u for u in decision.unplaced if u.workload not in refs),
        decision.summary,
    )


def _copies(outcomes: Iterable[Outcome]) -> list[Outcome]:
    """The copies' outcomes of spread workloads' outcomes."""
    return [c for o in outcomes for c in o.copies]


def _copy_placements(outcomes: Iterable[Outcome]) -> list[Placement]:
    """The placements of the copies that were applied."""
    return [c.placement for c in _copies(outcomes) if c.dispatched and c.placement is not None]


# --------------------------------------------------------------------------------------------
# snapshot-free


def _probe_fleet(config: FleetConfig, clients: Mapping[str, KubeClient]) -> Fleet:
    def probe(name: str) -> Cluster:
        source = next(s for s in config.clusters if s.name == name)
        client = clients.get(name)
        if client is None:
            problem = getattr(clients, "problems", {}).get(name)  # placer.fleet.MemberClients
            return unavailable(source, problem or source.problem or "no usable kubeconfig entry")
        try:
            client.server_version()
        except KubeError as err:
            text = err.message
            prefix = f"cluster {name}: "
            return unavailable(source, text[len(prefix) :] if text.startswith(prefix) else text)
        return Cluster(name=name, labels=dict(source.labels), taints=source.taints)

    names = [s.name for s in config.clusters]
    if not names:
        return Fleet(())
    with ThreadPoolExecutor(max_workers=min(16, len(names)), thread_name_prefix="probe") as pool:
        return Fleet(tuple(pool.map(probe, names)))


def snapshot_free_decision(
    workloads: Sequence[Workload], fleet: Fleet, policies: Sequence[PlacementPolicy]
) -> Decision:
    """Each workload (group) to its best allowed cluster, without capacity (module docstring).

    Pure: reachability, pins, avoided clusters (``placer.dev/avoid-clusters``), PlacementPolicy
    cluster selectors and cluster taints filter; preferred clusters, then costs, then fleet
    order rank. Pods get no node.
    """
    groups: dict[str, list[Workload]] = {}
    order: list[list[Workload]] = []
    for workload in workloads:
        if workload.group:
            if workload.group not in groups:
                groups[workload.group] = []
                order.append(groups[workload.group])
            groups[workload.group].append(workload)
        else:
            order.append([workload])
    placements: list[Placement] = []
    unplaced: list[Unplaced] = []
    for members in order:
        reasons: dict[str, str] = {}
        allowed: list[tuple[float, float, int, str]] = []
        pins = {w.pinned_cluster for w in members if w.pinned_cluster is not None}
        member_policies = [policy_for(w, policies) for w in members]
        policy = next((p for p in member_policies if p is not None), None)
        for position, cluster in enumerate(fleet.clusters):
            reason = _refusal(cluster, members, pins, member_policies)
            if reason is not None:
                reasons[cluster.name] = reason
                continue
            rank = float(policy.rank(cluster.name)) if policy else 0.0
            cost = policy.cost(cluster.name) if policy else 0.0
            allowed.append((rank, cost, position, cluster.name))
        if not allowed:
            for w in members:
                unplaced.append(Unplaced(w.ref, reasons))
            continue
        target = min(allowed)[3]
        for w in members:
            pods = tuple(
                PodAssignment(c.name, c.instance, i, "", dict(c.pod.requests))
                for c in w.components
                for i in range(c.replicas)
            )
            placements.append(Placement(w.ref, target, pods, w.total_requests()))
    demand = add(*(w.total_requests() for w in workloads))
    placed_requests = add(*(p.requests for p in placements))
    summary = DecisionSummary(
        solver="snapshot-free",
        mode="batch",
        status="feasible",
        seconds=0.0,
        workloads=len(workloads),
        placed=len(placements),
        demand=demand,
        placed_requests=placed_requests,
    )
    return Decision(tuple(placements), tuple(unplaced), summary)


def _refusal(
    cluster: Cluster,
    members: Sequence[Workload],
    pins: set[str],
    member_policies: Sequence[PlacementPolicy | None],
) -> str | None:
    if not cluster.reachable:
        return f"cluster unreachable: {cluster.reason or 'no answer'}"
    if len(pins) > 1:
        return f"members are pinned to different clusters ({', '.join(sorted(pins))})"
    if pins and cluster.name not in pins:
        return f"the workload is pinned to cluster {next(iter(pins))} (placer.dev/cluster)"
    if any(cluster.name in w.avoid_clusters for w in members):
        return AVOIDED_REASON
    for policy in member_policies:
        if policy is not None and not policy.admits(cluster):
            return f"excluded by policy {policy.name}'s cluster selector"
    for workload in members:
        for component in workload.components:
            taint = taint_not_tolerated(cluster.taints, component.pod.tolerations)
            if taint is not None:
                return (
                    f"cluster taint {taint.key}:{taint.effect} not tolerated by {component.label}"
                )
    return None
