"""Reconciling a member's entries with what it shows: observation and retirement.

:func:`observe` (pure) retires an entry's planned pods as its pods are seen bound;
:func:`sync_cluster` reads a member's entries, claims, workloads and pods, in that order, and
keeps the entries that still count (the rules are in the package docstring,
:mod:`placer.dispatch.ledger`, "When an entry stops counting").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from placer.dispatch.claims import Claim, Succession, claim_key, live_claims
from placer.dispatch.ledger.entry import InFlight
from placer.dispatch.ledger.store import read_entries, remove_entries
from placer.dispatch.record import PlacementRecord
from placer.errors import KubeError, NotFoundError
from placer.kube import KubeClient, OwnerWalker
from placer.model import PodAssignment, WorkloadRef
from placer.objects import name_of, uid_of
from placer.podspec import pod_requests

__all__ = ["APPLY_GRACE", "OBSERVED_KEEP", "LedgerReads", "ListedReads", "observe", "sync_cluster"]

log = logging.getLogger(__name__)

#: seconds an entry may exist before its workload does (reserve, then apply), when it was not
#: written under a claim (a member refusing claims, or an older placer).
APPLY_GRACE = 120.0
#: seconds a fully observed entry stays stored (charging nothing), so that the read-back of a
#: concurrent decision made before its pods were bound still finds it.
OBSERVED_KEEP = 120.0


def observe(entry: InFlight, observed: Sequence[tuple[str, Mapping[str, int]]]) -> InFlight:
    """``entry`` with one planned pod retired per observed pod ``(node, requests)``.

    Matching order per observed pod: same node and requests, same requests, same node, any
    (see the module docstring). The placement's total ``requests`` shrink with the pods.

    An update's entry (:attr:`InFlight.update`: a changed workload applied over its running
    copy) is charged the difference: an observed pod retires only what its requests cover of
    the planned pod it matches, and what it does not cover (the copy's old pod asked for 4
    GPUs, the changed one plans 8) stays charged on the planned node until a pod that covers
    it is observed.
    """
    left = list(entry.placement.pods)
    retired: list[PodAssignment] = []
    remainders: list[PodAssignment] = []
    pending = list(observed)
    for match in (_same_node_and_requests, _same_requests, _same_node, _any):
        still = []
        for node, requests in pending:
            index = next((i for i, pod in enumerate(left) if match(pod, node, requests)), None)
            if index is None:
                still.append((node, requests))
                continue
            pod = left.pop(index)
            retired.append(pod)
            uncovered = {
                name: amount - requests.get(name, 0)
                for name, amount in pod.requests.items()
                if amount > requests.get(name, 0)
            }
            if entry.update and uncovered:
                remainders.append(replace(pod, requests=uncovered, devices=()))
        pending = still
        if not pending or not left:
            break
    if not retired:
        return entry
    total = dict(entry.placement.requests)
    for pod in retired:
        for name, amount in pod.requests.items():
            total[name] = max(0, total.get(name, 0) - amount)
    for pod in remainders:
        for name, amount in pod.requests.items():
            total[name] = total.get(name, 0) + amount
    placement = replace(entry.placement, pods=(*left, *remainders), requests=total)
    return replace(entry, placement=placement)


def _same_node_and_requests(pod: PodAssignment, node: str, requests: Mapping[str, int]) -> bool:
    return pod.node == node and dict(pod.requests) == dict(requests)


def _same_requests(pod: PodAssignment, node: str, requests: Mapping[str, int]) -> bool:
    return dict(pod.requests) == dict(requests)


def _same_node(pod: PodAssignment, node: str, requests: Mapping[str, int]) -> bool:
    return pod.node == node


def _any(pod: PodAssignment, node: str, requests: Mapping[str, int]) -> bool:
    return True


class LedgerReads(Protocol):
    """Where :func:`sync_cluster` reads a member's entries, claims, workloads and pods.

    :class:`ListedReads` lists them from the member; the controller reads its watch caches
    (:mod:`placer.controller.capacity`). Each method may raise :class:`KubeError`.
    """

    def entries(self) -> list[InFlight]:
        """Every readable entry stored on the member."""
        ...

    def claims(self, now: float) -> Mapping[str, Claim]:
        """The member's live claims, by key."""
        ...

    def workload(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> Mapping[str, Any] | None:
        """A workload root (``None``: not there, or its kind is not served)."""
        ...

    def pods(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        """Every pod of ``namespace``, finished ones included."""
        ...

    def owners(self) -> OwnerWalker:
        """Where the pods' owner chains are followed."""
        ...

    def requests(self, pod: Mapping[str, Any]) -> Mapping[str, int]:
        """A pod's effective requests (:func:`placer.podspec.pod_requests`)."""
        ...


class ListedReads:
    """:class:`LedgerReads` by listing: one list of entries, one of claims, then per kind and
    namespace one list of workloads and per namespace one of pods (each listed once)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._roots: dict[tuple[str, str, str], dict[str, Mapping[str, Any]]] = {}
        self._pods: dict[str, list[Mapping[str, Any]]] = {}

    def entries(self) -> list[InFlight]:
        return read_entries(self.client)

    def claims(self, now: float) -> Mapping[str, Claim]:
        return live_claims(self.client, now=now)

    def workload(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> Mapping[str, Any] | None:
        key = (api_version, kind, namespace)
        if key not in self._roots:
            self._roots[key] = _list_by_name(self.client, *key)
        return self._roots[key].get(name)

    def pods(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        if namespace not in self._pods:
            self._pods[namespace] = _list_pods(self.client, namespace)
        return self._pods[namespace]

    def owners(self) -> OwnerWalker:
        return OwnerWalker(self.client)

    def requests(self, pod: Mapping[str, Any]) -> Mapping[str, int]:
        return pod_requests(pod["spec"], strict=False)


def sync_cluster(
    client: KubeClient,
    *,
    now: float | None = None,
    delete: bool = True,
    succession: Succession | None = None,
    reads: LedgerReads | None = None,
) -> list[InFlight]:
    """The entries of ``client``'s cluster, reconciled with what it shows (module docstring,
    "When an entry stops counting"): the ones that still count, and fully observed ones kept
    for :data:`OBSERVED_KEEP` (they charge nothing; they are *known*, for the read-back).

    One list of entries; one of claims when an entry was written under a claim; then per
    namespace holding entries one list of the workload kinds' roots and one of pods (skipped
    when nothing is in flight) — in this order, so that a claim released after its apply is
    never missed together with the object it was released for. Retired entries are deleted
    from the cluster (``delete=False`` leaves them, e.g. for dry runs). ``succession``: the
    caller is an elected controller; claims of its predecessors protect nothing. ``reads``:
    where they are read (default: :class:`ListedReads`, listing them from ``client``).
    """
    when = time.time() if now is None else now
    source = reads if reads is not None else ListedReads(client)
    entries = source.entries()
    keep: list[InFlight] = []
    done: list[InFlight] = []
    live: list[InFlight] = []
    for entry in entries:
        (done if entry.expired(when) else live).append(entry)
    claims: Mapping[str, Claim] | None = None
    if any(entry.claimed for entry in live):
        try:
            claims = source.claims(when)
        except KubeError as err:  # the grace rule decides for them
            log.info("cluster %s: claims not read: %s", client.name, err)
    owners = source.owners()
    #: namespace -> owner uid -> (node, requests) of the counted pods it owns, in pod order.
    by_owner: dict[str, dict[str, list[tuple[str, Mapping[str, int]]]]] = {}
    roots = {
        id(entry): source.workload(
            entry.workload.api_version,
            entry.workload.kind,
            entry.workload.namespace,
            entry.workload.name,
        )
        for entry in live
    }
    root_uids = {uid_of(root) for root in roots.values() if root is not None} - {""}
    for entry in live:
        ref = entry.workload
        root = roots[id(entry)]
        record = PlacementRecord.from_object(root) if root is not None else None
        if record is None or record.decision != entry.decision:
            # not applied (yet), deleted, or superseded by another decision's placement
            if _may_still_apply(entry, claims, succession, when):
                keep.append(entry)
            else:
                done.append(entry)
            continue
        assert root is not None
        if not entry.placement.pods:  # fully observed: nothing left to retire
            (keep if when - entry.created < OBSERVED_KEEP else done).append(entry)
            continue
        uid = uid_of(root)
        if ref.namespace not in by_owner:
            pods = source.pods(ref.namespace)
            by_owner[ref.namespace] = _pods_by_owner(pods, owners, root_uids, source.requests)
        seen = by_owner[ref.namespace].get(uid, []) if uid else []
        updated = observe(entry, seen) if seen else entry
        if updated.placement.pods or when - entry.created < OBSERVED_KEEP:
            keep.append(updated)
        else:
            done.append(updated)
    if delete:
        by_store: dict[str, list[WorkloadRef]] = {}
        for entry in done:
            by_store.setdefault(entry.store, []).append(entry.workload)
        for store, refs in by_store.items():
            try:
                remove_entries(client, store, refs)
            except KubeError as err:  # someone else's cleanup, or no right to delete: harmless
                log.info("cluster %s: in-flight entries not deleted: %s", client.name, err)
    return keep


def _pods_by_owner(
    pods: Sequence[Mapping[str, Any]],
    owners: OwnerWalker,
    roots: set[str],
    requests: Callable[[Mapping[str, Any]], Mapping[str, int]],
) -> dict[str, list[tuple[str, Mapping[str, int]]]]:
    """``(node, requests)`` of each pod gathering accounts for (:func:`_counted`), under its
    own uid and every uid of its owner chain up to a root of ``roots``
    (:meth:`OwnerWalker.owner_uids`): one walk per pod, however many entries look for their
    pods there."""
    index: dict[str, list[tuple[str, Mapping[str, int]]]] = {}
    for pod in pods:
        if not _counted(pod):
            continue
        seen = (str(pod["spec"].get("nodeName", "")), requests(pod))
        uids = owners.owner_uids(pod, roots)
        uids.add(uid_of(pod))
        for uid in uids:
            if uid:
                index.setdefault(uid, []).append(seen)
    return index


def _may_still_apply(
    entry: InFlight,
    claims: Mapping[str, Claim] | None,
    succession: Succession | None,
    now: float,
) -> bool:
    """Whether the decider of an entry whose workload is not (or no longer) there may still
    apply it: it holds the workload's claim for that decision (entries written under a claim,
    claims read); otherwise, the entry is younger than :data:`APPLY_GRACE`."""
    if entry.claimed and claims is not None:
        claim = claims.get(claim_key(entry.workload))
        if claim is None or claim.decision != entry.decision:
            return False
        return succession is None or not succession.succeeds(claim)
    return now - entry.created <= APPLY_GRACE


def _counted(pod: Mapping[str, Any]) -> bool:
    """A pod gathering already accounts for: bound to a node, or finished."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return False
    phase = (pod.get("status") or {}).get("phase")
    return bool(spec.get("nodeName")) or phase in ("Succeeded", "Failed")


def _list_by_name(
    client: KubeClient, api_version: str, kind: str, namespace: str
) -> dict[str, Mapping[str, Any]]:
    try:
        items = client.list(api_version, kind, namespace=namespace).items
    except NotFoundError:  # the kind is not served (any more): nothing of it exists
        return {}
    return {name_of(o): o for o in items}


def _list_pods(client: KubeClient, namespace: str) -> list[Mapping[str, Any]]:
    return list(client.list("v1", "Pod", namespace=namespace).items)
