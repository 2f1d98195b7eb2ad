"""Reserving a dispatch's placements in a member's in-flight ledger, and releasing them.

Before anything of a unit is applied on a member, its placements are written to that member's
ledger (:mod:`placer.dispatch.ledger`) — every placement of one cluster in one write, before the
first apply there — so that no concurrent decision sees the workload without its charge. A unit
that fails there has its entries taken out again (:func:`release_reserved`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from placer.dispatch.ledger import InFlight, remove_entries, write_entries
from placer.dispatch.outcomes import attempt_error
from placer.dispatch.record import label_value
from placer.dispatch.units import ClusterRun, Unit
from placer.errors import ClusterUnreachableError, KubeError
from placer.model import WorkloadRef

__all__ = ["release_reserved", "reserve"]

log = logging.getLogger(__name__)


def reserve(
    run: ClusterRun,
    units: Sequence[Unit],
    decision_id: str,
    *,
    ttl: float,
    field_manager: str,
) -> None:
    """Reserve every placement of ``units`` in the member's ledger, in one write.

    A cluster that refuses the ledger (403, ...) gets the workloads anyway, with a warning
    (``run.ledger_problem``); an unreachable one raises :class:`ClusterUnreachableError` (its
    units fail).
    """
    if run.ledger_problem:
        return
    claims = run.claims
    entries = [
        InFlight.new(
            placement,
            decision_id,
            ttl=ttl,
            claimed=claims is not None and run.name in claims.members_of(ref),
            update=ref in run.updates,
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
        stored = write_entries(run.client, entries, name=name, field_manager=field_manager)
    except ClusterUnreachableError:
        raise
    except KubeError as err:
        run.ledger_problem = attempt_error(err).error
        log.warning("cluster %s: in-flight ledger not written: %s", run.client.name, err)
        return
    run.reserved.update({entry.workload: entry for entry in stored})


def release_reserved(run: ClusterRun, unit: Unit) -> None:
    """Take the unit's entries out of the member's ledger (what could not be removed is left to
    expire, or to readers once its grace is over)."""
    by_store: dict[str, list[WorkloadRef]] = {}
    for ref in unit.refs:
        entry = run.reserved.pop(ref, None)
        if entry is not None:
            by_store.setdefault(entry.store, []).append(ref)
    client = run.client
    for store, refs in by_store.items():
        try:
            remove_entries(client, store, refs)
        except KubeError as err:  # left to expire, or to readers once its grace is over
            log.info("cluster %s: ledger entries %s not removed: %s", client.name, refs, err)
