"""Queues and priority classes: who is entitled to what share of the fleet (pure data).

A :class:`Queue` (``placer.dev/v1alpha1``, kind ``Queue``) follows KAI Scheduler's queue
semantics (Run:ai's projects and departments), fleet-wide. Per resource it has:

``quota``
    what the queue *deserves* (KAI's and Run:ai's deserved quota): work within it is admitted
    before any over-quota work of the same priority, and is never reclaimed by other queues.
``limit``
    what the queue (with its children) may never exceed, quota and over-quota together.
``overQuotaWeight``
    the queue's share of the capacity left once every queue has had what it deserves: that
    capacity is divided in proportion to the weights (0: the queue never goes over its quota).
``clusterLimits``
    optional per-cluster caps: the queue's use of the resource in one cluster never exceeds
    them.

A resource the queue does not list is not counted by it (neither quota nor limit). For a listed
resource ``quota`` defaults to 0 (nothing deserved: every use is over quota), ``limit`` to none
and ``overQuotaWeight`` to 1. ``limit: -1`` is KAI's spelling of "no limit" and is accepted.

Hierarchy: a queue names its ``parent`` (a department above teams). A child's use counts toward
each ancestor's quota and limit, and the quotas of a parent's children may not add up to more
than the parent's own quota. Only the queues a workload names are leaves in practice, but a
parent may hold work too.

A :class:`QueueSet` is the validated whole: the queues by name (no cycle, no unknown parent,
children within their parent's quota) and the PriorityClasses that give ``priorityClassName`` a
number. Validation (:func:`queue_set`) raises :class:`~placer.errors.QueueError` naming the file,
the queue and the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from placer.errors import QueueError
from placer.quantity import format_quantity

__all__ = [
    "PriorityClass",
    "Queue",
    "QueueSet",
    "ResourceRule",
    "queue_set",
]


@dataclass(frozen=True)
class ResourceRule:
    """A queue's rule for one resource, amounts in canonical units (cpu in millicores)."""

    quota: int = 0
    #: ``None``: no limit.
    limit: int | None = None
    over_quota_weight: float = 1.0
    #: cluster name -> the most of this resource the queue may use there.
    cluster_limits: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Queue:
    """One parsed ``Queue`` (see the module docstring)."""

    name: str
    parent: str | None = None
    resources: Mapping[str, ResourceRule] = field(default_factory=dict)
    #: whether other queues may reclaim this queue's over-quota work (``spec.reclaimable``,
    #: Volcano's name; default true). In-quota work is never reclaimed.
    reclaimable: bool = True
    #: where the queue came from (file and document, or ``hub``), for messages.
    source: str = ""


@dataclass(frozen=True)
class PriorityClass:
    """A ``scheduling.k8s.io/v1`` PriorityClass: a name for a priority value."""

    name: str
    value: int
    #: the class of pods that name none (at most one per set).
    global_default: bool = False
    source: str = ""


@dataclass(frozen=True)
class QueueSet:
    """Validated queues and priority classes (build with :func:`queue_set`)."""

    queues: Mapping[str, Queue] = field(default_factory=dict)
    classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    #: where the set came from (a file, ``hub``), for messages.
    source: str = ""

    def __contains__(self, name: object) -> bool:
        return name in self.queues

    def __iter__(self) -> Iterator[Queue]:
        return iter(self.queues.values())

    def __len__(self) -> int:
        return len(self.queues)

    def chain(self, name: str) -> tuple[Queue, ...]:
        """The queue and its ancestors, the queue first."""
        out = []
        current: str | None = name
        while current is not None:
            queue = self.queues[current]
            out.append(queue)
            current = queue.parent
        return tuple(out)

    def children(self, name: str) -> tuple[Queue, ...]:
        return tuple(q for q in self.queues.values() if q.parent == name)

    @property
    def default_class(self) -> PriorityClass | None:
        return next((c for c in self.classes.values() if c.global_default), None)


def queue_set(
    queues: Sequence[Queue], classes: Sequence[PriorityClass] = (), *, source: str = ""
) -> QueueSet:
    """Check the queues as a whole and build the set.

    Raises :class:`~placer.errors.QueueError` on a name given twice, an unknown parent, a cycle
    of parents, children whose quotas add up to more than their parent's, or two global default
    priority classes; each names the queue (or class) and the field.
    """
    by_name: dict[str, Queue] = {}
    for queue in queues:
        if queue.name in by_name:
            raise QueueError(
                f"queue {queue.name!r} is defined twice (also in {by_name[queue.name].source})",
                source=queue.source or source,
                field="metadata.name",
            )
        by_name[queue.name] = queue
    for queue in queues:
        if queue.parent is not None and queue.parent not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            raise QueueError(
                f"queue {queue.name!r} names parent {queue.parent!r}, which is not defined "
                f"(queues: {known})",
                source=queue.source or source,
                field="spec.parent",
                hint="define the parent queue too, or remove spec.parent",
            )
    for queue in queues:
        seen = [queue.name]
        current = queue.parent
        while current is not None:
            if current in seen:
                loop = " -> ".join([*seen, current])
                raise QueueError(
                    f"queue {queue.name!r} is its own ancestor ({loop})",
                    source=queue.source or source,
                    field="spec.parent",
                    hint="queues form a tree: break the cycle",
                )
            seen.append(current)
            current = by_name[current].parent
    for parent in queues:
        kids = [q for q in queues if q.parent == parent.name]
        names = sorted({r for kid in kids for r in kid.resources})
        for resource in names:
            total = sum(k.resources[resource].quota for k in kids if resource in k.resources)
            if total == 0:
                continue
            rule = parent.resources.get(resource)
            if rule is None or total > rule.quota:
                deserved = format_quantity(resource, rule.quota) if rule else "none"
                raise QueueError(
                    f"the quotas of the children of queue {parent.name} add up to "
                    f"{format_quantity(resource, total)} {resource}, more than its own quota "
                    f"({deserved}): children: {', '.join(k.name for k in kids)}",
                    source=parent.source or source,
                    field=f"spec.resources.{resource}.quota",
                    hint="a parent's quota bounds its children's: raise it or lower theirs",
                )
    class_names: dict[str, PriorityClass] = {}
    for item in classes:
        if item.name in class_names:
            raise QueueError(
                f"priority class {item.name!r} is defined twice",
                source=item.source or source,
                field="metadata.name",
            )
        class_names[item.name] = item
    defaults = [c.name for c in classes if c.global_default]
    if len(defaults) > 1:
        raise QueueError(
            f"more than one priority class is the global default ({', '.join(defaults)})",
            source=source,
            field="globalDefault",
        )
    return QueueSet(queues=by_name, classes=class_names, source=source)
