"""Queues: quotas, limits, over-quota weights and priorities shared across the fleet (#14).

Pure core: :mod:`placer.queues.model` (the Queue and PriorityClass objects and their validation
as a set), :mod:`placer.queues.reader` (queues files and hub objects, strictly parsed),
:mod:`placer.queues.accounting` (a workload's queue and priority; what each queue uses) and
:mod:`placer.queues.order` (the order of a queue's workloads: priority, then creation time). The
decision that honours them is :mod:`placer.solver.fairshare`.
"""

from placer.queues.accounting import DEFAULT_QUEUE, Membership, Usage, membership
from placer.queues.model import PriorityClass, Queue, QueueSet, ResourceRule, queue_set
from placer.queues.order import OrderKey, order_key
from placer.queues.reader import (
    load_queues,
    priority_class_from_dict,
    queue_from_dict,
    queues_from_yaml,
)

__all__ = [
    "DEFAULT_QUEUE",
    "Membership",
    "OrderKey",
    "PriorityClass",
    "Queue",
    "QueueSet",
    "ResourceRule",
    "Usage",
    "load_queues",
    "membership",
    "order_key",
    "priority_class_from_dict",
    "queue_from_dict",
    "queue_set",
    "queues_from_yaml",
]
