"""Dispatching one decision with several :class:`placer.dispatch.Dispatcher` calls at once.

Why: a ``Dispatcher`` applies the units of one cluster one after the other (one thread per
cluster). A batch decision with the ``pack`` objective puts most workloads on few clusters, so
a 1,000-workload cycle would wait on one cluster's round trips in a row. The controller splits
the decision into ``parts`` sub-decisions — units (a ``placer.dev/group``, or one workload) dealt
by the shard of their workload claim (:mod:`placer.dispatch.claims`), so each cluster's units
spread over the parts and the parts' claims never contend for the same shard ConfigMaps (dealt
round-robin, 1,000 workloads took four times the claim requests and twice the time) — and
dispatches them concurrently.

Safety, part by part, is the Dispatcher's own: apply, roll back on failure, decide again
without the failed cluster. What the split must add:

* **capacity**: each part gets the fleet charged with the *other* parts' placements, so a
  re-decision after a failed apply can never take capacity another part is using (the
  placements of the other parts are charged even if some of them fail: conservative); and
  the parts' re-decisions are made one at a time by :class:`Redecisions`, each on the fleet
  charged with what the other parts' re-decisions took — parts deciding again at once (a
  cluster refusing a whole decision) would otherwise all pick the same free nodes;
* **namespaces**: a Dispatcher removes a namespace it created when the unit that needed it
  fails — which would delete what another part just applied there. So the namespaces a
  decision needs are created beforehand (:func:`ensure_namespaces`, labelled like the
  Dispatcher's), and the parts only ever find them existing.

:func:`split_decision` is pure; :func:`ensure_namespaces` does the I/O for namespaces.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from placer.dispatch import LABEL_PLACED_BY, Manifest
from placer.dispatch.claims import claim_key, shard_of
from placer.dispatch.ledger import charge_known
from placer.dispatch.options import Decide
from placer.dispatch.record import PLACED_BY
from placer.errors import ConflictError, ForbiddenError, KubeError, NotFoundError
from placer.kube import KubeClient
from placer.model import Decision, Fleet, Placement, Workload, WorkloadRef
from placer.policy import PlacementPolicy
from placer.solver import charge, solve

__all__ = ["UNITS_PER_PART", "Part", "Redecisions", "ensure_namespaces", "split_decision"]

#: units a part gets at least: each part pays its own claims and copy check on every member,
#: which only a big decision's concurrency repays.
UNITS_PER_PART = 64

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Part:
    """One sub-decision: what to dispatch, with which manifests, on which fleet."""

    decision: Decision
    manifests: tuple[Manifest, ...]
    fleet: Fleet


def split_decision(
    decision: Decision, manifests: Sequence[Manifest], fleet: Fleet, parts: int
) -> list[Part]:
    """``decision`` as at most ``parts`` independent sub-decisions of at least
    :data:`UNITS_PER_PART` units each (see the module docstring).

    The first part also carries the unplaced workloads (so their outcomes are reported once).
    """
    by_ref = {m.ref: m for m in manifests}
    units: dict[tuple[str, str], list[Placement]] = {}
    order: list[tuple[str, str]] = []
    for placement in decision.placements:
        manifest = by_ref[placement.workload]
        group = manifest.workload.group or f"\0{placement.workload}"
        key = (placement.cluster, group)
        if key not in units:
            units[key] = []
            order.append(key)
        units[key].append(placement)
    count = max(1, min(parts, len(order) // UNITS_PER_PART))
    buckets: list[list[Placement]] = [[] for _ in range(count)]
    for key in order:
        first = units[key][0].workload
        buckets[shard_of(claim_key(first), count)].extend(units[key])
    buckets = [buckets[0]] + [b for b in buckets[1:] if b]
    placed = {p.workload for p in decision.placements}
    unplaced_refs = [m.ref for m in manifests if m.ref not in placed]
    result = []
    for index, bucket in enumerate(buckets):
        others = [p for i, b in enumerate(buckets) if i != index for p in b]
        refs: list[WorkloadRef] = [p.workload for p in bucket]
        unplaced = decision.unplaced if index == 0 else ()
        if index == 0:
            refs += unplaced_refs
        sub = replace(decision, placements=tuple(bucket), unplaced=tuple(unplaced))
        result.append(
            Part(
                decision=sub,
                manifests=tuple(by_ref[r] for r in refs),
                fleet=charge(fleet, others) if others else fleet,
            )
        )
    return result


class Redecisions:
    """The re-decisions of one decision's parts, one at a time (see the module docstring).

    Each part's :class:`placer.dispatch.Dispatcher` gets :meth:`for_part` as its ``decide``:
    the fleet it passes (charged with that part's own placements) is charged with the
    placements the other parts' re-decisions took, then solved under a lock.
    """

    def __init__(
        self, *, policies: Sequence[PlacementPolicy], solver: str, time_limit: float
    ) -> None:
        self.policies = tuple(policies)
        self.solver = solver
        self.time_limit = time_limit
        self._lock = threading.Lock()
        self._taken: list[tuple[int, Placement]] = []

    def for_part(self, index: int) -> Decide:
        """The ``decide`` hook of part ``index``."""

        def decide(workloads: Sequence[Workload], fleet: Fleet) -> Decision:
            with self._lock:
                others = [p for part, p in self._taken if part != index]
                decision = solve(
                    workloads,
                    charge_known(fleet, others),
                    policies=self.policies,
                    solver=self.solver,
                    time_limit=self.time_limit,
                )
                self._taken.extend((index, p) for p in decision.placements)
            return decision

        return decide


def ensure_namespaces(
    clients: Mapping[str, KubeClient], placements: Sequence[Placement]
) -> dict[str, str]:
    """Create the namespaces ``placements`` need where missing; cluster -> problem, if any.

    A cluster that refuses (or cannot be asked) is reported, not raised: its parts fail there
    and are decided again by the Dispatcher, as for any other refusal.
    """
    wanted: dict[str, set[str]] = {}
    for placement in placements:
        wanted.setdefault(placement.cluster, set()).add(placement.workload.namespace)
    problems: dict[str, str] = {}
    for cluster, namespaces in sorted(wanted.items()):
        client = clients.get(cluster)
        if client is None:
            continue
        for namespace in sorted(namespaces):
            try:
                client.get("v1", "Namespace", namespace)
            except NotFoundError:
                try:
                    client.ensure_namespace(namespace, labels={LABEL_PLACED_BY: PLACED_BY})
                except ConflictError:
                    pass
                except KubeError as err:
                    problems[cluster] = err.message
            except ForbiddenError:
                pass  # may not read namespaces: the apply will tell
            except KubeError as err:
                problems[cluster] = err.message
    for cluster, problem in problems.items():
        log.info("cluster %s: namespaces not prepared: %s", cluster, problem)
    return problems
