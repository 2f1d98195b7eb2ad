"""Which queue and priority a workload has, and what its queues use (pure arithmetic).

:func:`membership` reads a workload's queue (the ``placer.dev/queue`` label; without it the
queue named ``default`` when there is one, else none) and its priority (the
``placer.dev/priority`` label or annotation when set, else its ``priorityClassName``'s value,
else the global default class's, else 0). A queue or class the set does not define is a
refusal in words, never a guess.

:class:`Usage` books what placed work uses per queue and resource, fleet-wide and per cluster;
a workload's use counts toward its queue and every ancestor. It answers the admission
questions of :mod:`placer.solver.fairshare` in the words users see: would this demand pass a
limit (``limit_problem``, ``cluster_problem``), would it stay within every quota of its chain
(``quota_problem``), and how far over its quota is a queue, per unit of weight
(``over_share``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from placer.model import LABEL_PRIORITY, LABEL_QUEUE, Workload
from placer.quantity import format_quantity
from placer.queues.model import Queue, QueueSet, ResourceRule

__all__ = ["DEFAULT_QUEUE", "Membership", "Usage", "membership"]

#: the queue of workloads without a ``placer.dev/queue`` label, when the set defines it.
DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class Membership:
    """A workload's queue (``None``: in no queue) and effective priority, or why it cannot be
    admitted at all."""

    queue: str | None
    priority: int
    refusal: str | None = None


def membership(workload: Workload, queues: QueueSet) -> Membership:
    """The queue and priority of ``workload`` under ``queues`` (see the module docstring)."""
    name = workload.labels.get(LABEL_QUEUE)
    refusal = None
    if name is None:
        name = DEFAULT_QUEUE if DEFAULT_QUEUE in queues else None
    elif name not in queues:
        known = ", ".join(sorted(queues.queues)) or "none"
        refusal = (
            f"queue {name} (label {LABEL_QUEUE}) is not defined in {queues.source or 'the queues'}"
            f" (queues: {known}); create the Queue or fix the label"
        )
    priority = 0
    explicit = LABEL_PRIORITY in workload.labels or LABEL_PRIORITY in workload.annotations
    if explicit:
        priority = workload.priority
    elif workload.priority_class:
        found = queues.classes.get(workload.priority_class)
        if found is None:
            known = ", ".join(sorted(queues.classes)) or "none"
            refusal = refusal or (
                f"priority class {workload.priority_class} (priorityClassName) is not defined "
                f"in {queues.source or 'the queues'} (classes: {known})"
            )
        else:
            priority = found.value
    elif queues.default_class is not None:
        priority = queues.default_class.value
    return Membership(queue=name, priority=priority, refusal=refusal)


def _amount(resource: str, amount: int) -> str:
    return format_quantity(resource, amount)


class Usage:
    """What placed work uses, per queue (ancestors included) and resource, fleet-wide and per
    cluster. Mutable: :meth:`add` books a workload's requests, :meth:`remove` gives them back."""

    def __init__(self, queues: QueueSet) -> None:
        self.queues = queues
        self.total: dict[str, dict[str, int]] = {}
        self.by_cluster: dict[tuple[str, str], dict[str, int]] = {}

    def copy(self) -> Usage:
        other = Usage(self.queues)
        other.total = {q: dict(v) for q, v in self.total.items()}
        other.by_cluster = {k: dict(v) for k, v in self.by_cluster.items()}
        return other

    def _chain(self, queue: str | None) -> tuple[Queue, ...]:
        return self.queues.chain(queue) if queue is not None else ()

    def add(
        self, queue: str | None, requests: Mapping[str, int], cluster: str, sign: int = 1
    ) -> None:
        names = [q.name for q in self._chain(queue)] if queue is not None else [""]
        for name in names:
            total = self.total.setdefault(name, {})
            here = self.by_cluster.setdefault((name, cluster), {})
            for resource, amount in requests.items():
                total[resource] = total.get(resource, 0) + sign * amount
                here[resource] = here.get(resource, 0) + sign * amount

    def remove(self, queue: str | None, requests: Mapping[str, int], cluster: str) -> None:
        self.add(queue, requests, cluster, -1)

    def used(self, queue: str, resource: str) -> int:
        return self.total.get(queue, {}).get(resource, 0)

    def used_in(self, queue: str, cluster: str, resource: str) -> int:
        return self.by_cluster.get((queue, cluster), {}).get(resource, 0)

    # ----------------------------------------------------------------------------------------
    # admission questions; ``demand`` is what the candidate adds (its total requests)

    def limit_problem(self, queue: str | None, demand: Mapping[str, int]) -> str | None:
        """Why ``demand`` would take the queue (or an ancestor) past a limit, else None."""
        for q in self._chain(queue):
            for resource, rule in q.resources.items():
                amount = demand.get(resource, 0)
                if not amount or rule.limit is None:
                    continue
                used = self.used(q.name, resource)
                if used + amount > rule.limit:
                    return (
                        f"queue {q.name} is at its limit for {resource}: "
                        f"{_amount(resource, used)} in use + {_amount(resource, amount)} "
                        f"requested > limit {_amount(resource, rule.limit)}"
                    )
        return None

    def cluster_problem(
        self, queue: str | None, demand: Mapping[str, int], cluster: str
    ) -> str | None:
        """Why ``demand`` in ``cluster`` would pass a queue's ``clusterLimits`` there."""
        for q in self._chain(queue):
            for resource, rule in q.resources.items():
                amount = demand.get(resource, 0)
                cap = rule.cluster_limits.get(cluster)
                if not amount or cap is None:
                    continue
                used = self.used_in(q.name, cluster, resource)
                if used + amount > cap:
                    return (
                        f"queue {q.name} is at its limit for {resource} in this cluster: "
                        f"{_amount(resource, used)} in use + {_amount(resource, amount)} "
                        f"requested > clusterLimits {_amount(resource, cap)}"
                    )
        return None

    def quota_problem(
        self, queue: str | None, demand: Mapping[str, int], *, ancestors: bool = True
    ) -> str | None:
        """Why ``demand`` would not be within the quota of its queue and (``ancestors``) every
        ancestor, in words naming the queue and the word quota; None: the demand is in quota."""
        if queue is None:
            return "in no queue (no placer.dev/queue label), so it has no quota"
        chain = self._chain(queue)
        for q in chain if ancestors else chain[:1]:
            for resource, rule in q.resources.items():
                amount = demand.get(resource, 0)
                if not amount:
                    continue
                used = self.used(q.name, resource)
                if used + amount > rule.quota:
                    return (
                        f"over the quota of queue {q.name} for {resource}: "
                        f"{_amount(resource, used)} in use + {_amount(resource, amount)} "
                        f"requested > quota {_amount(resource, rule.quota)}"
                    )
        return None

    def weight_problem(self, queue: str | None, demand: Mapping[str, int]) -> str | None:
        """Why the queue may not go over its quota with ``demand`` at all: a resource it would
        exceed the quota of has ``overQuotaWeight: 0``."""
        for q in self._chain(queue):
            for resource, rule in q.resources.items():
                amount = demand.get(resource, 0)
                if not amount or rule.over_quota_weight > 0:
                    continue
                used = self.used(q.name, resource)
                if used + amount > rule.quota:
                    return (
                        f"queue {q.name} is at its quota for {resource} "
                        f"({_amount(resource, used)} in use + {_amount(resource, amount)} "
                        f"requested > quota {_amount(resource, rule.quota)}) and its "
                        "overQuotaWeight is 0: it never goes over its quota"
                    )
        return None

    def rules(self, queue: str | None) -> Mapping[str, ResourceRule]:
        if queue is None:
            return {}
        return self.queues.queues[queue].resources

    def deserved_share(self, queue: str | None) -> float:
        """How much of its quota the queue uses: the largest ``used / quota`` over the
        resources it has a quota for (0 without any)."""
        if queue is None:
            return 0.0
        share = 0.0
        for resource, rule in self.rules(queue).items():
            if rule.quota > 0:
                share = max(share, self.used(queue, resource) / rule.quota)
        return share

    def over_share(self, queue: str | None, capacity: Mapping[str, int]) -> float:
        """The queue's weighted dominant over-quota share (the formula of
        :mod:`placer.solver.fairshare`): ``max_r max(0, used_r − quota_r) / (w_r · C_r)`` over
        the resources the queue lists (every resource, quota 0 and weight 1, for work in no
        queue) with fleet capacity ``C_r > 0``."""
        name = queue if queue is not None else ""
        rules = self.rules(queue)
        resources = rules if queue is not None else self.total.get("", {})
        share = 0.0
        for resource in resources:
            rule = rules.get(resource, ResourceRule())
            fleet = capacity.get(resource, 0)
            if fleet <= 0 or rule.over_quota_weight <= 0:
                continue
            over = max(0, self.used(name, resource) - rule.quota)
            share = max(share, over / (rule.over_quota_weight * fleet))
        return share
