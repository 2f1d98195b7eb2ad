"""What a dispatch takes and what it reports: manifests in, one outcome per workload out.

A :class:`Manifest` is a workload as the user (or the hub) has it, with its decomposition. A
dispatch reports an :class:`Outcome` per workload — its state (:data:`DISPATCHED`,
:data:`DRY_RUN`, :data:`UNCHANGED`, :data:`UPDATED`, :data:`MOVED`, :data:`IN_FLIGHT`,
:data:`FAILED`, :data:`UNPLACED`), the
cluster, the placement and record applied, and every failed :class:`Attempt` with the server's
Status — and the decision as carried out (:class:`DispatchResult`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from placer.definitions import Decomposition
from placer.dispatch.claims import Claim
from placer.dispatch.record import PlacementRecord
from placer.errors import KubeError, PlacerError
from placer.model import Decision, Placement, Workload, WorkloadRef

__all__ = [
    "DISPATCHED",
    "DRY_RUN",
    "FAILED",
    "IN_FLIGHT",
    "MOVED",
    "UNCHANGED",
    "UNPLACED",
    "UPDATED",
    "Attempt",
    "DispatchResult",
    "Manifest",
    "Outcome",
    "attempt_error",
    "in_flight_outcome",
    "unplaced_text",
]

#: outcome states (:attr:`Outcome.state`).
DISPATCHED = "dispatched"
DRY_RUN = "dry-run"
UNCHANGED = "unchanged"
UPDATED = "updated"
MOVED = "moved"
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
    #: objects given with it that its pods may name (ConfigMaps, Secrets, ...; matched by
    #: kind, namespace and name: :mod:`placer.dispatch.dependencies`).
    dependencies: tuple[Mapping[str, Any], ...] = ()

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
    ``unchanged`` (already placed by placer on ``cluster``; nothing was sent), ``updated`` (its
    changed manifest applied over the copy on ``cluster``; ``changes`` says what changed),
    ``moved`` (the changed workload no longer fit its cluster and was placed on ``cluster``
    instead; ``moved_from`` names the old one), ``in-flight``
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
    #: what a changed manifest changes (updates and moves, and their dry runs).
    changes: tuple[str, ...] = ()
    #: the record the copy carried before an update or a move.
    previous: PlacementRecord | None = None
    #: the cluster a moved workload left.
    moved_from: str = ""
    #: how it was handed to the member's scheduler (:attr:`~placer.dispatch.handoff.HandOff.
    #: summary`; empty for ``default`` without pinning).
    handoff: Mapping[str, Any] = field(default_factory=dict)
    #: a workload spread over clusters (:mod:`placer.dispatch.spread`): the outcome of each
    #: copy, one per cluster (empty otherwise).
    copies: tuple[Outcome, ...] = ()

    def copy_on(self, cluster: str) -> Outcome:
        """The outcome of the copy on ``cluster`` (this one for a workload not spread)."""
        return next((c for c in self.copies if c.cluster == cluster), self)

    @property
    def dispatched(self) -> bool:
        """Applied now (a dry run or an unchanged workload is not)."""
        return self.state in (DISPATCHED, UPDATED, MOVED)

    @property
    def placed(self) -> bool:
        """It runs (or would run, in a dry run) on ``cluster``."""
        return self.state in (DISPATCHED, DRY_RUN, UNCHANGED, UPDATED, MOVED)


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


def in_flight_outcome(ref: WorkloadRef, claim: Claim) -> Outcome:
    """The outcome of a workload another decider holds the claim of."""
    return Outcome(
        ref,
        IN_FLIGHT,
        error=(
            f"being placed by {claim.describe()} (it holds the workload's claim); nothing "
            "was sent from here, so that it cannot run twice"
        ),
    )


def unplaced_text(reasons: Mapping[str, str]) -> str:
    """The error of an unplaced workload: the reason of each cluster."""
    if not reasons:
        return "not placed"
    return "not placed: " + "; ".join(f"{c}: {t}" for c, t in reasons.items())
