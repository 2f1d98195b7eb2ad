"""Removing placed copies from the members, and what placer kept for them there.

``placer delete`` (:func:`delete_workloads`) and moves (:mod:`placer.dispatch.update`) share:

* :func:`remove_copy` — delete one copy; with ``wait``, ``Foreground`` propagation and a poll
  until the object is gone, so that "gone" means its dependents (Jobs, pods) were deleted
  before it, as ``kubectl delete --cascade=foreground --wait`` does;
* :func:`retire_entry` — take the copy's in-flight ledger entry out of its member;
* :func:`retire_namespace` — delete the namespace the copy was in when placer created it
  (label ``placer.dev/placed-by=placer``, written when a dispatch creates a missing namespace)
  and nothing is left in it: every namespaced kind the member serves is listed there, and only
  objects being deleted, objects the deleted copies own, Events, endpoints and what Kubernetes
  puts in every namespace (the ``default`` ServiceAccount, the ``kube-root-ca.crt`` ConfigMap)
  may remain. A namespace that cannot be shown empty (a kind it may not list) is kept.

``placer delete`` (:func:`delete_workloads`): the workloads' claims are taken first
(:mod:`placer.dispatch.claims`), so that a submit placing the same workload at that moment is
not raced; every copy on the reachable members is found (:func:`find_existing`); a copy
without placer's record is someone else's and is deleted only with ``force``, and so is a copy
the placement controller placed from a hub object (label ``placer.dev/hub``: deleting the hub
object removes it, and the controller would place a deleted copy again).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.dispatch.claims import Claims
from placer.dispatch.existing import Existing, find_existing
from placer.dispatch.ledger import delete_entry
from placer.dispatch.outcomes import attempt_error
from placer.dispatch.record import LABEL_HUB, LABEL_PLACED_BY, PLACED_BY, PlacementRecord
from placer.errors import KubeError, NotFoundError
from placer.kube import KubeClient, OwnerWalker
from placer.model import WorkloadRef

__all__ = [
    "DELETED",
    "DELETING",
    "FAILED",
    "IN_FLIGHT",
    "NOT_FOUND",
    "REFUSED",
    "Deletion",
    "Removal",
    "delete_workloads",
    "remove_copy",
    "retire_entry",
    "retire_namespace",
]

#: :attr:`Deletion.state` values.
DELETED = "deleted"
#: the delete was accepted but the copy was still there when the wait ended.
DELETING = "deleting"
NOT_FOUND = "not-found"
REFUSED = "refused"
FAILED = "failed"
IN_FLIGHT = "in-flight"

#: seconds between looks while waiting for a copy to be gone.
POLL = 0.25
#: what Kubernetes creates in every namespace, by (apiVersion, kind): names.
_AUTOMATIC: Mapping[tuple[str, str], frozenset[str]] = {
    ("v1", "ServiceAccount"): frozenset({"default"}),
    ("v1", "ConfigMap"): frozenset({"kube-root-ca.crt"}),
}
#: kinds that never hold anything of the user's: records of other objects.
_DERIVED = frozenset(
    {
        ("v1", "Event"),
        ("events.k8s.io/v1", "Event"),
        ("v1", "Endpoints"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
    }
)


@dataclass(frozen=True)
class Removal:
    """What :func:`remove_copy` achieved."""

    #: the API server accepted the delete (or the copy was gone already).
    accepted: bool
    #: the copy is gone (only known when waiting; without a wait, an accepted delete).
    gone: bool
    #: why not (empty when gone).
    problem: str = ""


def remove_copy(
    client: KubeClient, ref: WorkloadRef, *, uid: str = "", wait: float | None = None
) -> Removal:
    """Delete ``ref`` on ``client``'s cluster; with ``wait`` (seconds), in the foreground and
    until it is gone. An object of that name with another uid than ``uid`` counts as gone (it
    is not the copy)."""
    try:
        client.delete(
            ref.api_version,
            ref.kind,
            ref.name,
            namespace=ref.namespace,
            propagation_policy="Background" if wait is None else "Foreground",
        )
    except NotFoundError:
        return Removal(True, True)
    except KubeError as err:
        return Removal(False, False, attempt_error(err).error)
    if wait is None:
        return Removal(True, True)
    deadline = time.monotonic() + wait
    problem = ""
    while True:
        try:
            current = client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
        except NotFoundError:
            return Removal(True, True)
        except KubeError as err:  # asked again until the deadline
            problem = f" ({attempt_error(err).error})"
        else:
            if uid and str((current.get("metadata") or {}).get("uid", "")) != uid:
                return Removal(True, True)
        if time.monotonic() >= deadline:
            return Removal(True, False, f"still being deleted after {wait:g} s{problem}")
        time.sleep(POLL)


def retire_entry(client: KubeClient, ref: WorkloadRef) -> str:
    """Take ``ref``'s in-flight entry out of the member's ledger; why not, or ``""``."""
    try:
        delete_entry(client, ref)
    except NotFoundError:
        return ""
    except KubeError as err:
        return (
            f"its in-flight entry was not removed ({attempt_error(err).error}); it stops "
            "counting once its workload is seen gone"
        )
    return ""


def retire_namespace(client: KubeClient, namespace: str, gone: Collection[str]) -> str:
    """Delete ``namespace`` when placer created it and it is empty once the objects with uids
    ``gone`` (and what they own) are deleted (module docstring). Returns ``"deleted"``, or why
    it is kept."""
    try:
        obj = client.get("v1", "Namespace", namespace)
    except NotFoundError:
        return "gone already"
    except KubeError as err:
        return f"kept: not read ({attempt_error(err).error})"
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(LABEL_PLACED_BY) != PLACED_BY:
        return "kept: not created by placer"
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return "being deleted already"
    left = _left_in(client, namespace, gone)
    if left:
        return f"kept: it holds {left}"
    try:
        client.delete("v1", "Namespace", namespace, missing_ok=True)
    except KubeError as err:
        return f"kept: not deleted ({attempt_error(err).error})"
    return "deleted"


def _left_in(client: KubeClient, namespace: str, gone: Collection[str]) -> str:
    """The first object that keeps ``namespace`` (``kind/name``), or why it cannot be shown
    empty; ``""`` when it is empty."""
    owners = OwnerWalker(client)
    try:
        versions = client.group_versions()
    except KubeError as err:
        return f"what could not be listed ({attempt_error(err).error})"
    for api_version in versions:
        try:
            kinds = client.served_kinds(api_version)
        except KubeError as err:
            return f"what could not be listed ({attempt_error(err).error})"
        for kind, resource in sorted(kinds.items()):
            if not resource.namespaced or (api_version, kind) in _DERIVED:
                continue
            try:
                items = client.list(api_version, kind, namespace=namespace).items
            except KubeError as err:
                if err.code in (404, 405):  # a kind that cannot be listed (reviews, bindings)
                    continue
                return f"{kind} objects that could not be listed ({attempt_error(err).error})"
            for item in items:
                metadata = item.get("metadata") or {}
                name = str(metadata.get("name", ""))
                if name in _AUTOMATIC.get((api_version, kind), ()):
                    continue
                if metadata.get("deletionTimestamp") or str(metadata.get("uid", "")) in gone:
                    continue
                if any(owners.owned_by(item, uid) for uid in gone):
                    continue
                return f"{kind}/{name}"
    return ""


# --------------------------------------------------------------------------------------------
# placer delete


@dataclass(frozen=True)
class Deletion:
    """What ``placer delete`` did with one copy of a workload (or with a workload it did not
    find: state ``not-found``)."""

    workload: WorkloadRef
    state: str
    cluster: str = ""
    #: placer's record on the copy (``None``: someone else's object, or not found).
    record: PlacementRecord | None = None
    #: why it is not deleted (refused, failed, in-flight, deleting).
    error: str = ""
    #: what happened to its namespace, its ledger entry (remarks).
    notes: tuple[str, ...] = ()

    @property
    def done(self) -> bool:
        return self.state == DELETED

    def to_dict(self) -> dict[str, Any]:
        ref = self.workload
        return {
            "workload": {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "namespace": ref.namespace,
                "name": ref.name,
            },
            "cluster": self.cluster or None,
            "state": self.state,
            "record": self.record.to_dict() if self.record else None,
            "error": self.error or None,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class DeleteReport:
    """Every copy ``placer delete`` handled, and what it could not check."""

    deletions: tuple[Deletion, ...]
    #: cluster -> why it could not be searched (a copy there cannot be ruled out).
    unknown: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def delete_workloads(
    clients: Mapping[str, KubeClient],
    refs: Sequence[WorkloadRef],
    *,
    force: bool = False,
    wait: float | None = None,
    claim_wait: float = 0.0,
    holder: str | None = None,
    decision: str = "delete",
) -> DeleteReport:
    """Delete every copy of ``refs`` on the clusters of ``clients`` (module docstring).

    ``refs`` may name one workload under several versions (one object): each copy is handled
    once. ``wait``: seconds to wait for each copy to be gone. ``claim_wait``: seconds to wait
    for a workload another placer process is dispatching.
    """
    claims = Claims(clients, decision=decision, holder=holder)
    deletions: list[Deletion] = []
    warnings: list[str] = []
    unknown: dict[str, str] = {}
    deadline = time.monotonic() + claim_wait
    todo = list(dict.fromkeys(refs))
    with claims.renewing():
        while todo:
            acquired = claims.acquire(todo)
            won = [r for r in todo if r not in acquired.lost]
            if won:
                found = find_existing(clients, won)
                unknown.update(found.unknown)
                deletions += _delete_found(clients, won, found.copies, force=force, wait=wait)
                claims.release(won)
            todo = [r for r in todo if r in acquired.lost]
            if todo and time.monotonic() >= deadline:
                for ref in todo:
                    claim = acquired.lost[ref]
                    deletions.append(
                        Deletion(
                            ref,
                            IN_FLIGHT,
                            error=f"being placed by {claim.describe()}: not deleted, so that "
                            "it does not appear again right after; try again in a moment",
                        )
                    )
                break
            if todo:
                time.sleep(0.5)
    for name, reason in sorted(claims.skipped.items()):
        warnings.append(f"cluster {name}: workload claims not taken ({reason})")
    return DeleteReport(tuple(deletions), unknown, tuple(warnings))


def _delete_found(
    clients: Mapping[str, KubeClient],
    refs: Iterable[WorkloadRef],
    copies: Mapping[WorkloadRef, Sequence[Existing]],
    *,
    force: bool,
    wait: float | None,
) -> list[Deletion]:
    deletions: list[Deletion] = []
    seen: set[tuple[str, str]] = set()
    by_identity: dict[tuple[str, str, str, str], list[WorkloadRef]] = {}
    for ref in refs:
        group = ref.api_version.rpartition("/")[0]
        by_identity.setdefault((group, ref.kind, ref.namespace, ref.name), []).append(ref)
    for versions in by_identity.values():
        found = [(ref, copy) for ref in versions for copy in copies.get(ref, ())]
        if not found:
            deletions.append(Deletion(versions[0], NOT_FOUND, error="not found"))
            continue
        for ref, copy in found:
            if (copy.cluster, copy.uid) in seen:
                continue
            seen.add((copy.cluster, copy.uid))
            deletions.append(_delete_copy(clients[copy.cluster], ref, copy, force, wait))
    return deletions


def _delete_copy(
    client: KubeClient, ref: WorkloadRef, copy: Existing, force: bool, wait: float | None
) -> Deletion:
    labels = (copy.object.get("metadata") or {}).get("labels") or {}
    hub = labels.get(LABEL_HUB)
    if not force and copy.record is None:
        return Deletion(
            ref,
            REFUSED,
            copy.cluster,
            error="it has no placer placement record (placer did not place it): not deleted; "
            "--force deletes it anyway",
        )
    if not force and hub:
        return Deletion(
            ref,
            REFUSED,
            copy.cluster,
            copy.record,
            error=f"placed by the placement controller of hub {hub}: delete the workload on "
            "the hub (the controller removes this copy; deleted here, it would be placed "
            "again); --force deletes the copy anyway",
        )
    removal = remove_copy(client, ref, uid=copy.uid, wait=wait)
    if not removal.accepted:
        return Deletion(ref, FAILED, copy.cluster, copy.record, error=removal.problem)
    notes: list[str] = []
    problem = retire_entry(client, ref)
    if problem:
        notes.append(problem)
    namespace = retire_namespace(client, ref.namespace, {copy.uid})
    if namespace == "deleted":
        notes.append(f"namespace {ref.namespace} deleted (placer created it; nothing else in it)")
    if not removal.gone:
        return Deletion(ref, DELETING, copy.cluster, copy.record, removal.problem, tuple(notes))
    return Deletion(ref, DELETED, copy.cluster, copy.record, notes=tuple(notes))
