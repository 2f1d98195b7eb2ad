"""Queues: quotas, limits, over-quota weights and priorities shared across the fleet (#14).

Pure core: :mod:`placer.queues.model` (the Queue and PriorityClass objects and their validation
as a set), :mod:`placer.queues.reader` (queues files and hub objects, strictly parsed) and
:mod:`placer.queues.accounting` (a workload's queue and priority; what each queue uses). The
decision that honours them is :mod:`placer.solver.fairshare`.
"""

from placer.queues.accounting import DEFAULT_QUEUE, Membership, Usage, membership
from placer.queues.model import PriorityClass, Queue, QueueSet, ResourceRule, queue_set
from placer.queues.reader import (
    load_queues,
    priority_class_from_dict,
    queue_from_dict,
    queues_from_yaml,
)

__all__ = [
    "DEFAULT_QUEUE",
    "Membership",
    "PriorityClass",
    "Queue",
    "QueueSet",
    "ResourceRule",
    "Usage",
    "load_queues",
    "membership",
    "priority_class_from_dict",
    "queue_from_dict",
    "queue_set",
    "queues_from_yaml",
]
