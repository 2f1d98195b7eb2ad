"""``placer submit --queues``: what the workloads left unplaced would evict, and evicting it.

After a submission under queues (:func:`placer.dispatch.submit.submit`), each workload the
decision left unplaced may evict placed work by the rules of :mod:`placer.solver.preempt`
(reclaim: it is in its queue's quota and the victims' queues are over theirs; preempt: lower
priority work of its own queue), victims chosen by :func:`~placer.dispatch.eviction.evict_for`
on the members' nodes — each victim's pods as its member shows them, plus what is still in
flight for it (the member's ledger entry).

Copies a placement controller placed (label ``placer.dev/hub``) count toward their queues but are
never victims here: their hub object is what waits, and the controller evicts them itself.

Without ``allow`` nothing changes: the report says "would preempt X on cluster Y". With it,
each victim's copy is evicted (:func:`~placer.dispatch.eviction.evict_copy`: suspended where
its definition can, else deleted; its in-flight entry removed) and the preemptor is dispatched
at once onto what its victims free (the member's scheduler binds its pods as theirs go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.definitions import Definition
from placer.dispatch.dispatcher import Dispatcher
from placer.dispatch.eviction import evict_copy, evict_for, held_pods, victim_of
from placer.dispatch.ledger import Ledger, delete_entry, read_entries
from placer.dispatch.ledger.sync import ListedReads
from placer.dispatch.options import DispatchOptions
from placer.dispatch.outcomes import DISPATCHED, UNPLACED, Manifest, Outcome
from placer.dispatch.record import LABEL_HUB
from placer.errors import KubeError
from placer.kube import KubeClient
from placer.model import Decision, Fleet, PodAssignment, Workload, WorkloadRef
from placer.objects import labels_of, uid_of
from placer.queues import QueueSet, Usage, membership
from placer.solver.charging import charge, release
from placer.solver.fairshare import Running
from placer.solver.preempt import Eviction, Victim

__all__ = ["PlacedCopy", "Preempted", "preempt_unplaced"]


@dataclass(frozen=True)
class PlacedCopy:
    """Work placer placed on a member, as ``placer get`` lists it."""

    workload: Workload
    cluster: str
    #: the copy on the member.
    copy: Mapping[str, Any]
    definition: Definition
    #: when it was placed (epoch seconds; 0 when unknown): the youngest goes first on a tie.
    started: float = 0.0


@dataclass(frozen=True)
class Preempted:
    """One preemptor's eviction: done (``allowed``) or only said."""

    preemptor: WorkloadRef
    cluster: str
    #: (victim, rule, GPUs in thousandths, what happened to its copy: ``suspended``,
    #: ``deleted``, or ``""`` when not done).
    victims: tuple[tuple[WorkloadRef, str, int, str], ...]
    allowed: bool
    #: the preemptor's dispatch, when done.
    outcome: Outcome | None = None
    #: why an eviction was not carried out whole.
    errors: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "preemptor": _ref(self.preemptor),
            "cluster": self.cluster,
            "victims": [
                {"workload": _ref(ref), "rule": rule, "gpus": milli / 1000, "evicted": how}
                for ref, rule, milli, how in self.victims
            ],
            "done": self.allowed,
            "state": self.outcome.state if self.outcome else None,
            "errors": list(self.errors),
        }

    def describe(self) -> str:
        names = ", ".join(f"{ref} ({rule})" for ref, rule, _, _ in self.victims)
        if not self.allowed:
            return (
                f"{self.preemptor}: would preempt {names} on cluster {self.cluster} "
                "(add --allow-preemption to evict them)"
            )
        hows = ", ".join(f"{ref} {how}" for ref, _, _, how in self.victims if how)
        state = self.outcome.state if self.outcome else "not dispatched"
        return f"{self.preemptor}: preempted {hows} on cluster {self.cluster}; it is {state}"


def _ref(ref: WorkloadRef) -> dict[str, str]:
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "namespace": ref.namespace,
        "name": ref.name,
    }


def preempt_unplaced(
    manifests: Sequence[Manifest],
    outcomes: Sequence[Outcome],
    fleet: Fleet,
    placed: Sequence[PlacedCopy],
    clients: Mapping[str, KubeClient],
    queues: QueueSet,
    options: DispatchOptions,
    *,
    allow: bool,
    ledger: Ledger | None = None,
) -> tuple[list[Preempted], list[Outcome]]:
    """The evictions for the workloads ``outcomes`` left unplaced (module docstring), on
    ``fleet`` (the submission's, charged with ``ledger`` and what it dispatched). Returns them
    and the outcomes with each preemptor dispatched (``allow``) in place of its ``unplaced``
    one."""
    by_ref = {o.workload: o for o in outcomes}
    waiting = [m.workload for m in manifests if by_ref[m.ref].state == UNPLACED]
    if not waiting:
        return [], list(outcomes)
    dispatched = [o for o in outcomes if o.state == DISPATCHED and o.placement is not None]
    fleet = charge(fleet, [o.placement for o in dispatched if o.placement is not None])
    usage = Usage(queues)
    manifest_of = {m.ref: m for m in manifests}
    running = [Running(p.workload, p.cluster) for p in placed]
    running += [Running(manifest_of[o.workload].workload, o.cluster or "") for o in dispatched]
    for item in running:
        queue = membership(item.workload, queues).queue
        usage.add(queue, item.workload.total_requests(), item.cluster)
    victims = _victims(placed, clients)
    copies = {(p.cluster, p.workload.ref): p for p in placed}
    how: dict[WorkloadRef, str] = {}
    errors: dict[WorkloadRef, list[str]] = {}

    def carry(preemptor: Workload, eviction: Eviction) -> list[Victim]:
        chosen = [v for v in victims if v.workload.ref in {x.workload for x in eviction.victims}]
        if not allow:
            return chosen
        evicted = []
        for victim in chosen:
            copy = copies[(victim.placement.cluster, victim.workload.ref)]
            client = clients[victim.placement.cluster]
            try:
                how[victim.workload.ref] = evict_copy(
                    client, copy.copy, copy.definition, preemptor.ref
                ).how
            except KubeError as err:
                errors.setdefault(preemptor.ref, []).append(
                    f"{victim.workload.ref}: not evicted: {err.message}"
                )
                continue
            if ledger is not None:
                ledger.discard(victim.placement.cluster, victim.workload.ref)
            try:
                delete_entry(client, victim.workload.ref)
            except KubeError:
                pass  # an entry not removed only charges until it expires
            evicted.append(victim)
        return evicted if len(evicted) == len(chosen) else []

    done = evict_for(
        waiting,
        fleet,
        victims,
        queues,
        usage,
        carry,
        policies=options.policies,
        time_limit=options.time_limit,
    )
    results: list[Preempted] = []
    new_outcomes = dict(by_ref)
    freed = release(fleet, [v.placement for _, _, evicted in done for v in evicted])
    for preemptor, eviction, _ in done:
        outcome = None
        if allow:
            outcome = _dispatch(
                manifest_of[preemptor.ref], eviction, freed, clients, options, ledger
            )
            if outcome.placed and outcome.placement is not None:
                freed = charge(freed, [outcome.placement])
            new_outcomes[preemptor.ref] = outcome
        results.append(
            Preempted(
                preemptor=preemptor.ref,
                cluster=eviction.cluster,
                victims=tuple(
                    (v.workload, v.reason, v.gpu_milli, how.get(v.workload, ""))
                    for v in eviction.victims
                ),
                allowed=allow,
                outcome=outcome,
                errors=tuple(errors.get(preemptor.ref, ())),
            )
        )
    return results, [new_outcomes[o.workload] for o in outcomes]


def _victims(placed: Sequence[PlacedCopy], clients: Mapping[str, KubeClient]) -> list[Victim]:
    """Each placed copy with the pods it holds on its member (bound pods, and what its ledger
    entry still plans); one holding nothing known is no candidate."""
    by_cluster: dict[str, list[PlacedCopy]] = {}
    for item in placed:
        if LABEL_HUB in labels_of(item.copy):
            continue  # a placement controller's copy: its hub object is evicted by it, not here
        by_cluster.setdefault(item.cluster, []).append(item)
    victims: list[Victim] = []
    for cluster, items in sorted(by_cluster.items()):
        client = clients.get(cluster)
        if client is None:
            continue
        copies = {uid_of(i.copy): i.workload.ref for i in items if uid_of(i.copy)}
        try:
            observed = held_pods(
                ListedReads(client), copies, [i.workload.ref.namespace for i in items]
            )
            planned = {e.workload: e.placement.pods for e in read_entries(client)}
        except KubeError:
            continue  # a member that cannot be read offers no victims
        for item in items:
            pods: list[PodAssignment] = [
                *observed.get(item.workload.ref, ()),
                *planned.get(item.workload.ref, ()),
            ]
            victim = victim_of(item.workload, cluster, pods, item.started)
            if victim is not None:
                victims.append(victim)
    return victims


def _dispatch(
    manifest: Manifest,
    eviction: Eviction,
    fleet: Fleet,
    clients: Mapping[str, KubeClient],
    options: DispatchOptions,
    ledger: Ledger | None,
) -> Outcome:
    """The preemptor dispatched onto what its victims freed (``ledger``: what ``fleet`` was
    charged with, for the concurrent-decision check)."""
    from placer.model import DecisionSummary

    placement = eviction.placement
    summary = DecisionSummary(
        solver="preempt",
        mode="batch",
        status="optimal",
        seconds=0.0,
        workloads=1,
        placed=1,
        demand=dict(placement.requests),
        placed_requests=dict(placement.requests),
    )
    decision = Decision(placements=(placement,), unplaced=(), summary=summary)
    dispatcher = Dispatcher(dict(clients), options, ledger=ledger)
    result = dispatcher.dispatch([manifest], decision, fleet)
    return result.outcome(manifest.ref)
