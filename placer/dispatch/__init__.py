"""Dispatch: carry placement decisions out on the member clusters, safely.

Shared by ``placer submit`` and the placement controller. The pieces, by concept:

* :mod:`~placer.dispatch.dispatcher` — :class:`Dispatcher`: claim, copy check, reservation,
  read-back, namespace, server-side apply (field manager ``placer``), dry run, roll-back and
  re-decision on the next best cluster when a cluster refuses; set by
  :class:`DispatchOptions` (:mod:`~placer.dispatch.options`);
* :mod:`~placer.dispatch.outcomes` — what a dispatch takes and reports (:class:`Manifest`,
  :class:`Outcome`, :class:`DispatchResult`);
* :mod:`~placer.dispatch.record` — the placement record placer writes on every dispatched
  object (labels ``placer.dev/placed-by``, ``placer.dev/decision``,
  ``placer.dev/placed-cluster``; annotations with cluster, decision id, time and the
  pod-to-node plan) and the cleaned body it applies (:func:`dispatch_manifest`);
* :mod:`~placer.dispatch.claims` — fleet-wide claims of workload identity, taken on the
  members before anything is written for a workload, so that of concurrent deciders exactly
  one dispatches it (:class:`~placer.dispatch.claims.Claims`);
* :mod:`~placer.dispatch.existing` — copies of workloads already on the members
  (:func:`find_existing`) and what they mean (:func:`~placer.dispatch.existing.
  settle_existing`), for idempotent re-submission;
* :mod:`~placer.dispatch.ledger` — the in-flight ledger: placements not yet visible as bound
  pods, stored on the members in ConfigMaps of their ``placer-system`` namespace, charged to
  the fleet before every decision (:class:`Ledger`, :func:`sync_cluster`);
* the Dispatcher's steps: :mod:`~placer.dispatch.reservation` (ledger entries before applying),
  :mod:`~placer.dispatch.readback` (the concurrent-decision check),
  :mod:`~placer.dispatch.rollback` (clean-up after a refusal), :mod:`~placer.dispatch.redecide`
  (deciding a unit again), :mod:`~placer.dispatch.units` (their shared working state);
* :mod:`~placer.dispatch.storage` — what the ledger and the claims share on a member
  (namespace ``placer-system``, ConfigMap creation, timestamps);
* :mod:`~placer.dispatch.submit` — one ``placer submit`` end to end (gather charged with the
  ledger, decide, dispatch); :mod:`~placer.dispatch.wait` — following a phase (``--wait``).

Typical use (what ``placer submit`` does)::

    fleet, ledger, warnings, _ = gather_charged(config, clients)  # placer.dispatch.submit
    decision = solve([m.workload for m in manifests], fleet, policies=policies)
    options = DispatchOptions(policies=tuple(policies))
    result = Dispatcher(clients, options, ledger=ledger).dispatch(manifests, decision, fleet)
    for outcome in result.outcomes:
        print(outcome.workload, outcome.state, outcome.cluster, outcome.error)

The controller keeps one :class:`Ledger` for its lifetime, passes it to every
:class:`Dispatcher`, and uses ``DispatchOptions(resume=True)`` to dispatch objects suspended
on the hub unsuspended.
"""

from typing import TYPE_CHECKING

from placer._lazy import lazy_exports

__all__ = [
    "DEFAULT_TTL",
    "DISPATCHED",
    "DRY_RUN",
    "FAILED",
    "FIELD_MANAGER",
    "IN_FLIGHT",
    "LABEL_DECISION",
    "LABEL_PLACED_BY",
    "LABEL_PLACED_CLUSTER",
    "LEDGER_NAMESPACE",
    "UNCHANGED",
    "UNPLACED",
    "Attempt",
    "DispatchOptions",
    "DispatchResult",
    "Dispatcher",
    "Existing",
    "ExistingCopies",
    "InFlight",
    "Ledger",
    "Manifest",
    "Outcome",
    "PlacementRecord",
    "Transform",
    "attempt_error",
    "dispatch_manifest",
    "find_existing",
    "new_decision_id",
    "observe",
    "read_entries",
    "sync_cluster",
]

if TYPE_CHECKING:
    from placer.dispatch.dispatcher import Dispatcher
    from placer.dispatch.existing import Existing, ExistingCopies, find_existing
    from placer.dispatch.ledger import (
        DEFAULT_TTL,
        LEDGER_NAMESPACE,
        InFlight,
        Ledger,
        observe,
        read_entries,
        sync_cluster,
    )
    from placer.dispatch.options import DispatchOptions, Transform
    from placer.dispatch.outcomes import (
        DISPATCHED,
        DRY_RUN,
        FAILED,
        IN_FLIGHT,
        UNCHANGED,
        UNPLACED,
        Attempt,
        DispatchResult,
        Manifest,
        Outcome,
        attempt_error,
    )
    from placer.dispatch.record import (
        FIELD_MANAGER,
        LABEL_DECISION,
        LABEL_PLACED_BY,
        LABEL_PLACED_CLUSTER,
        PlacementRecord,
        dispatch_manifest,
        new_decision_id,
    )
else:
    __getattr__ = lazy_exports(
        __name__,
        __all__,
        (
            "placer.dispatch.outcomes",
            "placer.dispatch.record",
            "placer.dispatch.existing",
            "placer.dispatch.options",
            "placer.dispatch.ledger",
            "placer.dispatch.dispatcher",
        ),
    )
