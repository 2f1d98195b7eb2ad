"""How a virtual cluster's scheduler binds pods: one at a time, or a gang at once.

A virtual cluster (:mod:`placer.virtual.realism`) plays the member's scheduler faithfully enough
to show what handing gangs over changes:

* **kube-scheduler** (pods without a ``schedulerName``, or ``default-scheduler``) binds pods one
  at a time, in the order they arrive; the pods of workloads arriving together interleave (their
  controllers create them side by side), so two gangs can each get some of their pods bound and
  both wait forever for the rest — the deadlock gang scheduling exists to prevent;
* a **gang scheduler** (any other ``schedulerName``: ``kai-scheduler``, ``volcano``, the
  scheduler-plugins coscheduling scheduler) binds the pods of a pod group together or not at
  all: at least its ``minMember`` (the PodGroup's, else the gang's) must fit at once, else every
  pod of the group waits, none holding room. Pods join a group as each project says (Volcano's
  annotation ``scheduling.k8s.io/group-name``, coscheduling's label
  ``scheduling.x-k8s.io/pod-group``; KAI groups the workload's gangs itself); KAI schedules only
  pods of a queue (label ``kai.scheduler/queue``).

:func:`assign` decides, for a batch of pods asking at the same time, the node of each (or why it
waits); the caller binds them. Pure: nodes are a :class:`Room` the caller provides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from placer.model import PodDemand

__all__ = ["DEFAULT_SCHEDULERS", "Ask", "Room", "assign"]

#: the names kube-scheduler answers to.
DEFAULT_SCHEDULERS = ("", "default-scheduler")


class Room(Protocol):
    """Free room on nodes (:class:`placer.virtual.realism` keeps one per pass): what ``bind``
    takes, saved and restored around a pod group that cannot start whole."""

    def save(self) -> object:
        """The room as it is now (for :meth:`restore`)."""
        ...

    def restore(self, saved: object) -> None:
        """Back to the room as it was when :meth:`save` returned ``saved``."""
        ...


@dataclass(frozen=True)
class Ask:
    """A pod asking to be bound."""

    #: the caller's key for the pod.
    key: str
    #: the workload it belongs to (pods of one workload arrive together).
    workload: str
    demand: PodDemand
    #: the node placer planned for it (tried first).
    planned: str = ""
    #: its ``schedulerName`` (``""``: the default scheduler).
    scheduler: str = ""
    #: its pod group (``""``: none: bound on its own, even by a gang scheduler).
    group: str = ""
    #: pods of the group that must start together.
    min_member: int = 1
    #: why its scheduler does not consider it at all (``""``: it does).
    blocked: str = ""


R = TypeVar("R", bound=Room)


def assign(
    room: R, asks: Sequence[Ask], bind: Callable[[R, PodDemand, str], str]
) -> dict[str, tuple[str, str]]:
    """``key -> (node, why it waits)`` for every ask (node ``""`` when it waits);
    ``bind(room, demand, planned)`` takes room for a pod and says where (``""``: nowhere).

    Workloads are served in the order of their first ask; default-scheduled pods interleave
    across workloads (one of each in turn), a pod group is tried whole at its workload's turn.
    """
    order: list[str] = []
    singles: dict[str, list[Ask]] = {}
    groups: dict[str, dict[str, list[Ask]]] = {}
    out: dict[str, tuple[str, str]] = {}
    for ask in asks:
        if ask.workload not in order:
            order.append(ask.workload)
        if ask.blocked:
            out[ask.key] = ("", ask.blocked)
        elif ask.scheduler not in DEFAULT_SCHEDULERS and ask.group:
            groups.setdefault(ask.workload, {}).setdefault(ask.group, []).append(ask)
        else:
            singles.setdefault(ask.workload, []).append(ask)
    for workload in order:
        for group, members in groups.get(workload, {}).items():
            out.update(_gang(room, group, members, bind))
    rounds = max((len(v) for v in singles.values()), default=0)
    for index in range(rounds):
        for workload in order:
            queue = singles.get(workload, [])
            if index < len(queue):
                ask = queue[index]
                node = bind(room, ask.demand, ask.planned)
                name = ask.scheduler or "default-scheduler"
                out[ask.key] = (node, "" if node else _no_node(name))
    return out


def _gang(
    room: R, group: str, members: Sequence[Ask], bind: Callable[[R, PodDemand, str], str]
) -> Mapping[str, tuple[str, str]]:
    saved = room.save()
    nodes = {ask.key: bind(room, ask.demand, ask.planned) for ask in members}
    placed = sum(1 for node in nodes.values() if node)
    need = max(1, min(members[0].min_member, len(members)))
    if placed >= need:
        why = _no_node(members[0].scheduler)
        return {key: (node, "" if node else why) for key, node in nodes.items()}
    room.restore(saved)
    why = (
        f"pod group {group}: {need} pod(s) must start together, {placed} fit now; the group "
        f"waits whole (virtual {members[0].scheduler})"
    )
    return {ask.key: ("", why) for ask in members}


def _no_node(scheduler: str) -> str:
    return f"0 nodes are available: no node fits the pod (virtual {scheduler})"
