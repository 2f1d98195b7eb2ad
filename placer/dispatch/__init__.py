"""Dispatch: carry placement decisions out on the member clusters, safely.

Shared by ``placer submit`` and the placement controller. The pieces, by concept:

* :mod:`~placer.dispatch.record` — the placement record placer writes on every dispatched
  object (labels ``placer.dev/placed-by``, ``placer.dev/decision``,
  ``placer.dev/placed-cluster``; annotations with cluster, decision id, time and the
  pod-to-node plan) and the cleaned body it applies (:func:`dispatch_manifest`);
* :mod:`~placer.dispatch.ledger` — the in-flight ledger: placements not yet visible as bound
  pods, stored as one ConfigMap per placement in the member's ``placer-system`` namespace,
  charged to the fleet before every decision (:class:`Ledger`, :func:`sync_cluster`);
* :mod:`~placer.dispatch.claims` — fleet-wide claims of workload identity, taken on the
  members before anything is written for a workload, so that of concurrent deciders exactly
  one dispatches it (:class:`~placer.dispatch.claims.Claims`);
* :mod:`~placer.dispatch.existing` — copies of workloads already on the members
  (:func:`find_existing`), for idempotent re-submission;
* :mod:`~placer.dispatch.dispatcher` — :class:`Dispatcher`: claim, copy check, namespace,
  reservation, server-side apply (field manager ``placer``), dry run, roll-back and
  re-decision on the next best cluster when a cluster refuses;
* :mod:`~placer.dispatch.storage` — what the ledger and the claims share on a member
  (namespace ``placer-system``, ConfigMap creation, timestamps).

Typical use (what ``placer submit`` does)::

    fleet, ledger, warnings, _ = gather_charged(config, clients)  # placer.dispatch.submit
    decision = solve([m.workload for m in manifests], fleet, policies=policies)
    result = Dispatcher(clients, policies=policies, ledger=ledger).dispatch(
        manifests, decision, fleet
    )
    for outcome in result.outcomes:
        print(outcome.workload, outcome.state, outcome.cluster, outcome.error)

The controller keeps one :class:`Ledger` for its lifetime, passes it to every
:class:`Dispatcher`, and uses ``resume=True`` to dispatch objects suspended on the hub
unsuspended.
"""

from typing import TYPE_CHECKING

from placer._lazy import lazy_exports

__all__ = [
    "DEFAULT_TTL",
    "FIELD_MANAGER",
    "IN_FLIGHT",
    "LABEL_DECISION",
    "LABEL_PLACED_BY",
    "LABEL_PLACED_CLUSTER",
    "LEDGER_NAMESPACE",
    "Attempt",
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
    from placer.dispatch.dispatcher import (
        IN_FLIGHT,
        Attempt,
        Dispatcher,
        DispatchResult,
        Manifest,
        Outcome,
        Transform,
        attempt_error,
    )
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
            "placer.dispatch.dispatcher",
            "placer.dispatch.existing",
            "placer.dispatch.ledger",
            "placer.dispatch.record",
        ),
    )
