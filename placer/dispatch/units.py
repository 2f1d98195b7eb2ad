"""The working state of one dispatch, shared by its steps (internal to :mod:`placer.dispatch`).

* :class:`Unit` — placements dispatched together, all or nothing: the workloads of one
  ``placer.dev/group`` on one cluster, or one workload (:func:`group_units`), with the clusters
  that already failed it;
* :class:`ClusterRun` — what a dispatch knows and has done on one member (namespaces, ledger
  entries reserved, claims);
* :class:`DispatchError` — a unit could not be dispatched to a cluster, and what it left there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from placer.dispatch.claims import Claim, Claims
from placer.dispatch.ledger import InFlight
from placer.dispatch.outcomes import Attempt, Manifest, Outcome
from placer.kube import KubeClient
from placer.model import Placement, WorkloadRef

__all__ = ["ClusterRun", "DispatchError", "Unit", "UnitResult", "group_units"]


@dataclass
class Unit:
    """Placements dispatched together (a ``placer.dev/group``, or one workload)."""

    placements: list[Placement]
    #: clusters where dispatching the unit failed, with why.
    excluded: dict[str, Attempt] = field(default_factory=dict)

    @property
    def refs(self) -> list[WorkloadRef]:
        return [p.workload for p in self.placements]

    def failure_text(self) -> str:
        """The error of a unit that failed on every cluster it was tried on."""
        parts = [f"{a.cluster}: {a.error}" for a in self.excluded.values()]
        return "dispatch failed on every cluster that fits: " + "; ".join(parts)


def group_units(
    placements: Sequence[Placement], by_ref: Mapping[WorkloadRef, Manifest]
) -> list[Unit]:
    """``placements`` as units: one per (cluster, ``placer.dev/group``), else one per workload."""
    groups: dict[tuple[str, str], Unit] = {}
    units: list[Unit] = []
    for placement in placements:
        group = by_ref[placement.workload].workload.group
        if group:
            key = (placement.cluster, group)
            if key in groups:
                groups[key].placements.append(placement)
                continue
            unit = groups[key] = Unit([placement])
        else:
            unit = Unit([placement])
        units.append(unit)
    return units


@dataclass
class ClusterRun:
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
    #: workloads whose placement here is a changed manifest applied over their running copy:
    #: their ledger entries are updates (:attr:`placer.dispatch.ledger.InFlight.update`).
    updates: set[WorkloadRef] = field(default_factory=set)


class DispatchError(Exception):
    """A unit could not be dispatched to a cluster (everything created was removed)."""

    def __init__(self, attempt: Attempt, *, leftover: str = "", taken: Claim | None = None) -> None:
        super().__init__(attempt.error)
        self.attempt = attempt
        #: what may be left on the cluster because the clean-up failed (empty: clean).
        self.leftover = leftover
        #: another decider took the unit's claim over (it is not tried elsewhere).
        self.taken = taken


#: what dispatching one unit gives: its outcomes, or the failure.
UnitResult = DispatchError | list[Outcome]
