"""How a :class:`~placer.dispatch.dispatcher.Dispatcher` carries decisions out: its options.

One frozen value with a documented default for every choice, so that a caller states only what
differs (``placer submit``: namespaces, dry run, re-decision settings, the wait for claims; the
controller: resume, the hub's mark, its Lease, its own copies) and a dispatch can be described
by its options alone. The Dispatcher's collaborators — the member clients and the in-process
ledger — are given to it beside the options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.dispatch.claims import CLAIM_TTL, Succession
from placer.dispatch.existing import OwnCopy
from placer.dispatch.ledger import DEFAULT_TTL
from placer.dispatch.outcomes import Manifest
from placer.dispatch.record import FIELD_MANAGER
from placer.model import Decision, Fleet, Workload
from placer.policy import PlacementPolicy
from placer.schedulers import SchedulerSpec

__all__ = ["REMOVAL_WAIT", "Decide", "DispatchOptions", "Guard", "MoveOptions", "Transform"]

#: seconds a move waits for the old copy to be gone (its pods terminated).
REMOVAL_WAIT = 300.0

#: ``transform(body, manifest)``: the body to apply instead of ``body`` (after the record).
Transform = Callable[[dict[str, Any], Manifest], Mapping[str, Any]]
#: ``decide(workloads, fleet)``: a decision for re-deciding units after a failed dispatch.
Decide = Callable[[Sequence[Workload], Fleet], Decision]
#: ``guard(workloads, clusters)``: the clusters of ``clusters`` a re-decision of ``workloads``
#: must leave out, each with the reason (their queues' ``clusterLimits``:
#: :func:`placer.dispatch.redecide.queue_guard`).
Guard = Callable[[Sequence[Workload], Sequence[str]], Mapping[str, str]]


@dataclass(frozen=True)
class DispatchOptions:
    """What a dispatch does, and how (every field has the default a one-off dispatch wants)."""

    # -- writing on the members ------------------------------------------------------------
    #: create a missing namespace (labelled ``placer.dev/placed-by=placer``); ``False``: a
    #: missing namespace fails the workload on that cluster.
    create_namespaces: bool = True
    #: ``dryRun=All`` on every write; nothing changes anywhere (no claim, no namespace, no
    #: ledger entry), and failures still move on to the next cluster.
    dry_run: bool = False
    #: dispatch suspended objects resumed (their definition's resume actions): the
    #: controller's hub objects are suspended.
    resume: bool = False
    #: the last change to each body before it is applied (after the placement record).
    transform: Transform | None = None
    #: the server-side apply field manager.
    field_manager: str = FIELD_MANAGER
    #: threads (default: one per cluster with work, at most 16).
    max_workers: int | None = None

    # -- handing over to the members' schedulers (:mod:`placer.dispatch.handoff`) -------------
    #: each member's scheduler as the fleet file says, by cluster (a member not listed: its
    #: ``placer.dev/scheduler`` label, else ``default``; a policy's ``scheduler`` wins).
    schedulers: Mapping[str, SchedulerSpec] = field(default_factory=dict)
    #: write the decision's node plan as required node affinity into the pod templates.
    pin_nodes: bool = False

    # -- the in-flight ledger ----------------------------------------------------------------
    #: reserve every placement in its member's ``placer-system`` ledger before applying (and
    #: read the ledger back: the concurrent-decision check, :mod:`placer.dispatch.readback`).
    member_ledger: bool = True
    #: seconds an in-flight entry counts at most.
    in_flight_ttl: float = DEFAULT_TTL

    # -- deciding again after a cluster refused ----------------------------------------------
    #: PlacementPolicies for re-decisions (the ones of the first decision).
    policies: tuple[PlacementPolicy, ...] = ()
    #: the solver of re-decisions, its time limit (seconds) and seed.
    solver: str = "cpsat"
    time_limit: float = 1.0
    seed: int = 0
    #: replaces the solver for re-decisions (snapshot-free decisions; the controller's parts).
    decide: Decide | None = None
    #: clusters re-decisions leave out (a decision under queues: :func:`~placer.dispatch.
    #: redecide.queue_guard`).
    guard: Guard | None = None

    # -- workload identity -------------------------------------------------------------------
    #: claim each workload's identity on every member before anything is written for it
    #: (:mod:`placer.dispatch.claims`), so that of two concurrent deciders exactly one
    #: dispatches it; the other reports it ``in-flight``, or ``unchanged`` once it finds the
    #: copy. Dry runs never claim.
    claims: bool = True
    #: seconds to wait for workloads another decider holds (their claims looked at again every
    #: 0.2-1 s; a claim that expires meanwhile is taken over) before reporting them
    #: ``in-flight``.
    claim_wait: float = 0.0
    #: seconds a claim lives without renewal.
    claim_ttl: float = CLAIM_TTL
    #: who claims, for people reading a claim (default: host and pid).
    holder: str | None = None
    #: the caller is elected through a leader Lease (the controller): its predecessors' claims
    #: are taken over at once (:class:`~placer.dispatch.claims.Succession`).
    succession: Succession | None = None

    # -- copies already on the members ---------------------------------------------------------
    #: look for copies of the placed workloads on every member before applying
    #: (:func:`~placer.dispatch.existing.find_existing`): one placed by placer stays where it
    #: is (``unchanged``), someone else's blocks it (``failed``). Always done, after claiming,
    #: when ``claims`` is on; this asks for it without claims.
    check_existing: bool = False
    #: ``own_copy(manifest, existing)``: whether a copy found with placer's record is this
    #: workload as this caller places it (``unchanged``); a copy it rejects is ``failed`` (the
    #: controller accepts only copies marked with its hub object's uid). Default: every copy
    #: with placer's record.
    own_copy: OwnCopy | None = None
    #: label selector for the lists of the copy check (the controller leaves out its own hub's
    #: copies, which its informers track and its reconcile adopts).
    copy_selector: str | None = None


@dataclass(frozen=True)
class MoveOptions:
    """Whether a change that no longer fits its cluster moves, and how
    (:mod:`placer.dispatch.update`; here so that a submit that changes nothing does not import
    the updater)."""

    #: decide it on the other clusters and move it there (``--move``).
    move: bool = False
    #: move kinds that cannot be suspended too, with a moment without the workload.
    allow_restart: bool = False
    #: seconds to wait for the old copy to be gone.
    removal_wait: float = REMOVAL_WAIT
