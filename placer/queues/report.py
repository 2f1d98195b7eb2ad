"""Queues as rows: quota, limit, allocated, pending and over quota per queue and resource, for
``placer plan -o json`` (the queues after the decision) and ``placer get queues``.

Amounts are in base units (cpu in cores, memory in bytes, counts), as everywhere in placer's
JSON; ``limit`` is ``None`` when the queue has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placer.quantity import to_base
from placer.queues.accounting import Usage
from placer.queues.model import QueueSet

__all__ = ["queue_rows"]


def queue_rows(
    queues: QueueSet,
    usage: Usage,
    pending: Mapping[str, Mapping[str, int]] | None = None,
) -> list[dict[str, Any]]:
    """One row per queue (in the set's order) with, per resource it lists: ``quota``,
    ``limit``, ``overQuotaWeight``, ``allocated``, ``overQuota`` (allocated beyond the quota)
    and, when ``pending`` is given, ``pending`` (demand of its workloads not placed, children
    included)."""
    rows = []
    for queue in queues:
        resources: dict[str, Any] = {}
        waiting = (pending or {}).get(queue.name, {})
        for resource, rule in queue.resources.items():
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
        rows.append({"name": queue.name, "parent": queue.parent, "resources": resources})
    return rows
