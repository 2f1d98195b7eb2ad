"""Evicting placed work on a member: what its copy holds there, and taking it away.

* :func:`held_pods` — the pods each of a member's copies owns (through the owner chain), bound
  to a node and not finished, as :class:`~placer.model.PodAssignment` rows: what an eviction
  of that copy frees on the member's nodes (:func:`placer.solver.preempt.find_victims` checks
  the preemptor on them).
* :func:`evict_for` — the evictions for pending work, highest priority first, each carried out
  (or only noted) by the caller before the next is chosen on what it freed: the controller's
  cycles and ``placer submit`` share it;
* :func:`evict_copy` — the eviction of ``placer submit --allow-preemption`` and of the
  controller: the copy is *suspended* where its definition says how (its pods go, the object
  stays on the member with the annotation :data:`ANNOTATION_PREEMPTED_BY` naming the
  preemptor: :func:`is_parked`, and can be resumed), else deleted;
* :func:`resume_parked` — the reverse, when the controller places the workload on that member
  again: the definition's resume actions, the annotation removed (one conditional PUT, by the
  same field manager as the suspension, so that the dispatch's server-side apply that follows
  sets the same values and meets no conflict).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from placer.definitions import Definition
from placer.definitions.suspend import can_suspend, resume, suspend
from placer.dispatch.ledger.sync import LedgerReads
from placer.kube import KubeClient
from placer.model import Fleet, Placement, PodAssignment, Workload, WorkloadRef
from placer.objects import annotations_of, name_key
from placer.policy import PlacementPolicy
from placer.queues import QueueSet, Usage, membership
from placer.solver.charging import release
from placer.solver.preempt import Eviction, Victim, find_victims

__all__ = [
    "ANNOTATION_PREEMPTED_BY",
    "DELETED",
    "SUSPENDED",
    "Carry",
    "Evicted",
    "evict_copy",
    "evict_for",
    "held_pods",
    "is_parked",
    "resume_parked",
    "victim_of",
]

#: ``carry(preemptor, eviction)``: carry ``eviction`` out (or note it); the victims evicted.
Carry = Callable[[Workload, Eviction], Sequence[Victim]]

#: on a copy suspended by an eviction: the workload it was evicted for.
ANNOTATION_PREEMPTED_BY = "placer.dev/preempted-by"
SUSPENDED = "suspended"
DELETED = "deleted"
#: pod phases that hold no capacity.
_DONE = ("Succeeded", "Failed")


def held_pods(
    reads: LedgerReads, copies: Mapping[str, WorkloadRef], namespaces: Iterable[str]
) -> dict[WorkloadRef, list[PodAssignment]]:
    """Per copy (``copies``: the copy's uid -> its workload), the pods it owns in
    ``namespaces``, bound and not finished, with their effective requests."""
    owners = reads.owners()
    out: dict[WorkloadRef, list[PodAssignment]] = {}
    for namespace in sorted(set(namespaces)):
        for pod in reads.pods(namespace):
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if not node or (pod.get("status") or {}).get("phase") in _DONE:
                continue
            uids = owners.owner_uids(pod, copies) & set(copies)
            if not uids:
                continue
            ref = copies[min(uids)]
            mine = out.setdefault(ref, [])
            _, name = name_key(pod)
            mine.append(
                PodAssignment(
                    component=name,
                    instance="",
                    index=len(mine),
                    node=node,
                    requests=dict(reads.requests(pod)),
                )
            )
    return out


def victim_of(
    workload: Workload, cluster: str, pods: Sequence[PodAssignment], started: float
) -> Victim | None:
    """``workload`` as a candidate victim holding ``pods`` on ``cluster`` (what its member
    shows and what is still in flight for it); ``None`` when it holds nothing known (evicting
    it could free nothing)."""
    if not pods:
        return None
    requests: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod.requests.items():
            requests[name] = requests.get(name, 0) + amount
    placement = Placement(workload.ref, cluster, tuple(pods), requests)
    return Victim(workload, placement, started)


class Evicted(NamedTuple):
    """What :func:`evict_copy` did: :data:`SUSPENDED` (with the copy as the member now has
    it) or :data:`DELETED` (``copy`` is ``None``)."""

    how: str
    copy: dict[str, Any] | None = None


def is_parked(copy: Mapping[str, Any]) -> bool:
    """Whether ``copy`` was suspended by an eviction and not resumed since (it holds no pods;
    it waits for its workload to be placed again)."""
    return bool(annotations_of(copy).get(ANNOTATION_PREEMPTED_BY))


def evict_copy(
    client: KubeClient,
    obj: Mapping[str, Any],
    definition: Definition,
    preemptor: WorkloadRef,
    *,
    field_manager: str = "placer",
) -> Evicted:
    """Suspend the copy ``obj`` on its member where ``definition`` can (:data:`SUSPENDED`: a
    PUT conditional on ``obj``'s resourceVersion), else delete it (:data:`DELETED`); raises
    :class:`~placer.errors.KubeError`."""
    namespace, name = name_key(obj)
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    if can_suspend(definition):
        body = _with_preemptor(suspend(obj, definition), str(preemptor))
        written = client.replace(body, namespace=namespace or None, field_manager=field_manager)
        return Evicted(SUSPENDED, dict(written))
    client.delete(api_version, kind, name, namespace=namespace or None, missing_ok=True)
    return Evicted(DELETED)


def resume_parked(
    client: KubeClient,
    copy: Mapping[str, Any],
    definition: Definition,
    *,
    field_manager: str = "placer",
) -> dict[str, Any]:
    """Resume a copy :func:`evict_copy` suspended (:func:`is_parked`): its definition's resume
    actions, the annotation removed, one PUT conditional on ``copy``'s resourceVersion; the
    copy as written. Raises :class:`~placer.errors.KubeError` (or
    :class:`~placer.errors.DefinitionError` when the definition cannot resume)."""
    namespace, _ = name_key(copy)
    body = _with_preemptor(resume(copy, definition), None)
    return dict(client.replace(body, namespace=namespace or None, field_manager=field_manager))


def _with_preemptor(body: dict[str, Any], preemptor: str | None) -> dict[str, Any]:
    """``body`` with :data:`ANNOTATION_PREEMPTED_BY` set to ``preemptor`` (``None``: removed)."""
    metadata = dict(body.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    if preemptor is None:
        annotations.pop(ANNOTATION_PREEMPTED_BY, None)
    else:
        annotations[ANNOTATION_PREEMPTED_BY] = preemptor
    metadata["annotations"] = annotations
    body["metadata"] = metadata
    return body


def evict_for(
    waiting: Sequence[Workload],
    fleet: Fleet,
    victims: Sequence[Victim],
    queues: QueueSet,
    usage: Usage,
    carry: Carry,
    *,
    policies: Sequence[PlacementPolicy] = (),
    time_limit: float = 0.5,
) -> list[tuple[Workload, Eviction, list[Victim]]]:
    """For each of ``waiting`` (highest priority first, then in order) the least disruptive
    eviction the rules allow among ``victims`` (:func:`~placer.solver.preempt.find_victims`,
    on ``fleet`` charged with them and ``usage`` booking them), handed to ``carry``; what it
    evicted is released before the next preemptor is looked at. Returns each preemptor with
    its eviction and the victims evicted."""
    order = sorted(waiting, key=lambda w: -membership(w, queues).priority)
    left = list(victims)
    done: list[tuple[Workload, Eviction, list[Victim]]] = []
    for preemptor in order:
        if not left:
            break
        eviction = find_victims(
            preemptor, fleet, left, queues, usage, policies=policies, time_limit=time_limit
        )
        if eviction is None or not eviction.victims:
            continue
        evicted = list(carry(preemptor, eviction))
        if not evicted:
            continue
        fleet = release(fleet, [v.placement for v in evicted])
        for victim in evicted:
            queue = membership(victim.workload, queues).queue
            usage.remove(queue, victim.workload.total_requests(), victim.placement.cluster)
        gone = {v.workload.ref for v in evicted}
        left = [v for v in left if v.workload.ref not in gone]
        done.append((preemptor, eviction, evicted))
    return done
