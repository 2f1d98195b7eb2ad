"""The concurrent-decision check: read a member's ledger back after reserving on it.

The in-flight ledger (:mod:`placer.dispatch.ledger`) closes the gap between an apply and the
moment its pods are visible, but two processes that gather in the same instant still decide on
the same free room. So after writing its entries on a member (:mod:`placer.dispatch.reservation`)
a dispatch lists the member's ledger again (one call) and takes the entries it did not know when
deciding (not in its ``ledger``, not its own decision). If there are any, its units are checked
in order against the decision's fleet charged with those entries (and with the units that
passed): a unit whose planned nodes no longer have room releases its entries and is planned
again on that cluster's remaining nodes (entries rewritten, ledger read back again, at most
:data:`CONCURRENCY_CHECKS` times), or, when it no longer fits there, fails on that cluster with
``409 Conflict`` and is decided again elsewhere like any other failure.

Of two dispatches that overlap, the later one to read back always sees the earlier one's entry
(each writes before it reads, and readers keep even a fully observed entry stored for
:data:`~placer.dispatch.ledger.OBSERVED_KEEP`; an entry unknown when deciding is charged whole,
whether or not its pods were gathered: conservative), so contested room is never taken twice:
one of them re-plans or steps back. The check needs the ``ledger`` the decision was charged
with; without one it is skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from placer.dispatch.ledger import InFlight, Ledger, charge_known, read_entries
from placer.dispatch.outcomes import Attempt, Manifest
from placer.dispatch.redecide import Redecider
from placer.dispatch.reservation import release_reserved, reserve
from placer.dispatch.units import ClusterRun, Unit
from placer.errors import KubeError
from placer.model import Decision, DecisionSummary, Fleet, Placement, WorkloadRef
from placer.quantity import GPU
from placer.solver.charging import whole_devices
from placer.solver.state import node_devices

__all__ = ["CONCURRENCY_CHECKS", "settle_concurrent"]

log = logging.getLogger(__name__)

#: how many times a dispatch reads a member's ledger back (re-planning in between) before
#: it goes ahead with what it has.
CONCURRENCY_CHECKS = 3


def settle_concurrent(
    run: ClusterRun,
    cluster: str,
    units: Sequence[Unit],
    by_ref: Mapping[WorkloadRef, Manifest],
    fleet: Fleet,
    success: Sequence[Placement],
    decision_id: str,
    *,
    ledger: Ledger | None,
    redecider: Redecider,
    ttl: float,
    field_manager: str,
) -> tuple[list[Unit], list[tuple[Unit, Attempt]]]:
    """Check ``units`` (reserved on ``cluster``) against entries a concurrent decision wrote
    since this one was made (see the module docstring).

    Returns the units to apply — re-planned on the cluster's nodes where their planned nodes
    were taken, with their entries rewritten — and the units that no longer fit there, each
    with the attempt that fails it.
    """
    if ledger is None or run.ledger_problem or not run.reserved:
        return list(units), []
    base = replace(fleet, clusters=tuple(c for c in fleet.clusters if c.name == cluster))
    mine = {ref for unit in units for ref in unit.refs}
    ours = [p for p in success if p.cluster == cluster and p.workload not in mine]
    todo = list(units)
    failed: list[tuple[Unit, Attempt]] = []
    for _ in range(CONCURRENCY_CHECKS):
        meanwhile = _written_meanwhile(run, cluster, decision_id, ledger)
        if not meanwhile:
            return todo, failed
        decisions = ", ".join(sorted({e.decision for e in meanwhile}))
        charged = charge_known(base, [e.placement for e in meanwhile] + ours)
        keep: list[Unit] = []
        taken: list[Unit] = []
        for unit in todo:
            placements = _idle_devices(charged, unit.placements)
            if _fits(unit, placements, by_ref, charged):
                keep.append(unit)
                charged = charge_known(charged, placements)
            else:
                taken.append(unit)
        if not taken:
            return todo, failed
        replanned: list[Unit] = []
        for unit in taken:
            release_reserved(run, unit)
            again = redecider.on_cluster(unit, by_ref, charged)
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
            replanned.append(Unit(again, unit.excluded))
            charged = charge_known(charged, again)
        if replanned:
            reserve(run, replanned, decision_id, ttl=ttl, field_manager=field_manager)
        todo = keep + replanned
    return todo, failed


def _written_meanwhile(
    run: ClusterRun, cluster: str, decision_id: str, ledger: Ledger
) -> list[InFlight]:
    """Live entries on ``cluster`` that neither this decision nor its ledger knew."""
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
        known = ledger.get(cluster, entry.workload)
        if known is None or known.decision != entry.decision:
            meanwhile.append(entry)
    return meanwhile


def _fits(
    unit: Unit,
    placements: Sequence[Placement],
    by_ref: Mapping[WorkloadRef, Manifest],
    fleet: Fleet,
) -> bool:
    from placer.solver import verify  # here: only when another decision wrote meanwhile

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
