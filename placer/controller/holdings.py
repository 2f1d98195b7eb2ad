"""What placed work holds on its member's nodes, as the member shows it.

Preemption (which victims free room where) and reservations (when room frees, from the running
work's expected ends) both need, per hub object holding capacity on a member, the pods it holds
there and on which nodes: :func:`held_pods_of` — the pods its copy owns as the member shows them
(through the owner chain, :func:`placer.dispatch.eviction.held_pods`, read from the capacity
watches' caches or listed) plus what is still in flight for it (the in-flight ledger's planned
pods not observed yet). Together they count each pod once: the ledger retires a planned pod
when it observes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from placer.controller.members import MembersView
from placer.dispatch import Ledger
from placer.dispatch.eviction import held_pods
from placer.dispatch.ledger.sync import LedgerReads
from placer.errors import KubeError
from placer.kube import KubeClient
from placer.model import PodAssignment, WorkloadRef
from placer.objects import uid_of

if TYPE_CHECKING:
    from placer.controller.preemption import Held

__all__ = ["held_pods_of", "observed_pods"]

log = logging.getLogger(__name__)


def held_pods_of(
    held: Sequence[Held],
    members: MembersView,
    ledger: Ledger,
    reads: Callable[[str, KubeClient], LedgerReads],
) -> dict[WorkloadRef, list[PodAssignment]]:
    """Per held hub object, the pods it holds on its member (module docstring); objects on a
    member without a client, or holding nothing known, are left out."""
    by_cluster: dict[str, list[Held]] = {}
    for item in held:
        by_cluster.setdefault(item.cluster, []).append(item)
    found: dict[WorkloadRef, list[PodAssignment]] = {}
    for cluster, items in sorted(by_cluster.items()):
        client = members.clients.get(cluster)
        if client is None:
            continue
        observed = observed_pods(members, reads, cluster, client, items)
        for item in items:
            pods = list(observed.get(item.ref, ()))
            entry = ledger.get(cluster, item.ref)
            if entry is not None:
                pods += entry.placement.pods
            if pods:
                found[item.ref] = pods
    return found


def observed_pods(
    members: MembersView,
    reads: Callable[[str, KubeClient], LedgerReads],
    cluster: str,
    client: KubeClient,
    items: Sequence[Held],
) -> dict[WorkloadRef, list[PodAssignment]]:
    """The pods each held object's copy owns on ``cluster``, as the member shows them
    (:func:`placer.dispatch.eviction.held_pods`; none when they cannot be read)."""
    copies: dict[str, WorkloadRef] = {}
    for item in items:
        found, _ = members.view(item.ref, uid_of(item.obj))
        copy = found.get(cluster)
        if copy is not None and uid_of(copy):
            copies[uid_of(copy)] = item.ref
    if not copies:
        return {}
    try:
        return held_pods(reads(cluster, client), copies, [i.ref.namespace for i in items])
    except KubeError as err:
        log.info("cluster %s: pods not read: %s", cluster, err)
        return {}
