"""Queues as rows: quota, limit, allocated, pending and over quota per queue and resource, for
``placer plan -o json`` (the queues after the decision) and ``placer get queues``; with the
workloads waiting in each queue in its order (``pendingOrder``, :mod:`placer.queues.order`).

Amounts are in base units (cpu in cores, memory in bytes, counts), as everywhere in placer's
JSON; ``limit`` is ``None`` when the queue has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from placer.model import Workload
from placer.quantity import to_base
from placer.queues.accounting import Membership, Usage
from placer.queues.model import QueueSet
from placer.queues.order import OrderKey, order_key

__all__ = ["pending_demand", "pending_order", "queue_rows"]


def pending_demand(
    queues: QueueSet, waiting: Iterable[tuple[Workload, Membership]]
) -> dict[str, dict[str, int]]:
    """What the ``waiting`` workloads ask, per queue (each ancestor counts its children's) and
    resource; work in no queue, or refused by its queues as written, is left out."""
    pending: dict[str, dict[str, int]] = {}
    for workload, member in waiting:
        if member.queue is None or member.refusal:
            continue
        for queue in queues.chain(member.queue):
            into = pending.setdefault(queue.name, {})
            for name, amount in workload.total_requests().items():
                into[name] = into.get(name, 0) + amount
    return pending


def pending_order(
    waiting: Sequence[tuple[Workload, Membership]],
) -> dict[str, list[str]]:
    """Per queue, its own ``waiting`` workloads (``namespace/name``) in the queue's order:
    priority, then creation time, then the position in ``waiting``, then name."""
    keyed: dict[str, list[tuple[OrderKey, str]]] = {}
    for position, (workload, member) in enumerate(waiting):
        if member.queue is None or member.refusal:
            continue
        key = order_key(workload, member.priority, position)
        keyed.setdefault(member.queue, []).append((key, key[3]))
    return {queue: [name for _, name in sorted(items)] for queue, items in keyed.items()}


def queue_rows(
    queues: QueueSet,
    usage: Usage,
    pending: Mapping[str, Mapping[str, int]] | None = None,
    preempted: Mapping[str, int] | None = None,
    order: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """One row per queue (in the set's order) with, per resource it lists (in name order, as the
    hub's API server returns a Queue's map, so a file and the hub print alike): ``quota``,
    ``limit``, ``overQuotaWeight``, ``allocated``, ``overQuota`` (allocated beyond the quota)
    and, when ``pending`` is given, ``pending`` (demand of its workloads not placed, children
    included); with ``preempted``, the row's ``preempted``: its workloads waiting after an
    eviction; with ``order`` (:func:`pending_order`), the row's ``pendingOrder``: its own
    waiting workloads, first to start first."""
    rows = []
    for queue in queues:
        resources: dict[str, Any] = {}
        waiting = (pending or {}).get(queue.name, {})
        for resource, rule in sorted(queue.resources.items()):
            used = usage.used(queue.name, resource)
            resources[resource] = {
                "quota": to_base(resource, rule.quota),
                "limit": None if rule.limit is None else to_base(resource, rule.limit),
                "overQuotaWeight": rule.over_quota_weight,
                "allocated": to_base(resource, used),
                "overQuota": to_base(resource, max(0, used - rule.quota)),
            }
            if pending is not None:
                resources[resource]["pending"] = to_base(resource, waiting.get(resource, 0))
        row: dict[str, Any] = {"name": queue.name, "parent": queue.parent, "resources": resources}
        if preempted is not None:
            row["preempted"] = preempted.get(queue.name, 0)
        if order is not None:
            row["pendingOrder"] = list(order.get(queue.name, ()))
        rows.append(row)
    return rows
