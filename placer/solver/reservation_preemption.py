"""Preemption for reservations: a reserved gang that would wait too long starts now.

A reservation (:mod:`placer.solver.reservations`) starts when the running work on its nodes is
expected to end, and that can be days away: a gang needing most of a cluster waits for the
longest job there. With ``ReservationPolicy.preempt_after_s`` set, a reservation whose gang
has waited that long since it arrived and whose start is still ahead is *forced*: running
gangs are evicted so that the reserved gang starts at once.

Model
=====
* **due** (:func:`due`): the gang of reservation ``R`` arrived at ``a``; at a decision at
  ``now`` with ``now ≥ a + preempt_after_s`` and ``R.start_s > now + preempt_slack_s`` it is
  due (a start that near is waited for: a gang queued right behind another reserved gang is
  not worth an eviction).
* **victims** (:func:`candidates`): running gangs ``v`` with priority ``p_v`` and GPUs ``g_v``
  may be evicted for the reserved gang ``r`` when ``p_v < p_r``, or ``p_v = p_r`` and
  ``g_v < g_r`` (at equal priority only smaller gangs: a gang is never evicted for its equal,
  so evictions cannot go round in circles — along any chain of evictions at one priority the
  gangs shrink); never a gang of higher priority, never one labelled
  ``placer.dev/preemptible: "false"`` (:data:`placer.solver.preempt.LABEL_PREEMPTIBLE`).
  Gangs are evicted whole.
* **which** (:func:`force`): among those, the victim model of :mod:`placer.solver.preempt`
  (:func:`placer.solver.preempt.evict_among`) on every cluster: the least work thrown away
  (``Σ_v g_v (now − started_v)``, GPU-minutes), then the fewest GPUs evicted, the fewest
  gangs, the lowest priorities, the youngest; the cluster with the least such set wins
  (least disruption, not necessarily the reservation's own cluster). The gang is placed on
  the fleet *as the decision sees it* (:func:`placer.solver.reservations.backfill_view`:
  the nodes of other reservations stay off limits unless it may backfill them), so forcing
  one reservation never takes another's nodes.
* **queues** (:func:`allowed`, the controller with Queues on the hub): a queue's quota is a
  guarantee no reservation breaks (KAI's and Run:ai's rule: in-quota work of one queue is not
  preempted for another queue's work). Work of the reserved gang's own queue may be evicted
  by the rule above; work of another queue only when that queue is over its quota and
  ``reclaimable``, only its over-quota part, and only when the reserved gang is within its
  own queue's quota — the reclaim rows of :mod:`placer.solver.preempt` (``RECLAIM``) on
  those victims, and the preemptor's limits, in the same model. Evicted either way, a victim
  records the reason ``reservation``.

What it costs is what the victims had run (no checkpoint: they start over when placed again;
the stream records it, ``PreemptionRecord.lost_gpu_seconds``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from placer.model import Fleet, Workload
from placer.policy import PlacementPolicy
from placer.queues import QueueSet, Usage, membership
from placer.solver.preempt import LABEL_PREEMPTIBLE, RECLAIM, Eviction, Victim, evict_among
from placer.solver.reservations import Reservation
from placer.solver.state import gpu_milli

__all__ = ["RESERVATION", "allowed", "candidates", "deadline", "due", "force"]

#: the reason a victim records when it was evicted for a reservation.
RESERVATION = "reservation"


def due(
    reservation: Reservation, arrival_s: float, now: float, after_s: float, slack_s: float
) -> bool:
    """Whether the reservation's gang, waiting since ``arrival_s``, is to start now by
    eviction: it waited ``after_s`` and its planned start is more than ``slack_s`` ahead."""
    return now >= arrival_s + after_s and reservation.start_s > now + slack_s


def deadline(reservation: Reservation, arrival_s: float, after_s: float, slack_s: float) -> float:
    """When the reservation becomes :func:`due` if nothing changes (``inf``: never, it starts
    before)."""
    at = arrival_s + after_s
    return at if reservation.start_s > at + slack_s else math.inf


def candidates(preemptor: Workload, running: Sequence[Victim]) -> list[Victim]:
    """The running gangs the rule allows to evict for ``preemptor`` (module docstring)."""
    mine = gpu_milli(preemptor.total_requests())
    out = []
    for victim in running:
        workload = victim.workload
        if workload.labels.get(LABEL_PREEMPTIBLE, "").lower() == "false":
            continue
        if workload.priority > preemptor.priority:
            continue
        if workload.priority == preemptor.priority and gpu_milli(workload.total_requests()) >= mine:
            continue
        out.append(victim)
    return out


def allowed(
    preemptor: Workload,
    running: Sequence[Victim],
    queues: QueueSet | None = None,
    usage: Usage | None = None,
) -> list[tuple[Victim, str]]:
    """The running gangs ``preemptor``'s reservation may evict, each with the rows its
    eviction obeys: ``RESERVATION`` (the rule of :func:`candidates`), or with ``queues``
    (``usage`` booking ``running``) ``RECLAIM`` for another queue's over-quota work (module
    docstring, *queues*). Priorities are the workloads' own: the caller gives them the ones
    their queues or priority classes say."""
    rule = candidates(preemptor, running)
    if queues is None:
        return [(victim, RESERVATION) for victim in rule]
    usage = usage if usage is not None else Usage(queues)
    mine = membership(preemptor, queues)
    if mine.refusal is not None:
        return []
    in_quota = usage.quota_problem(mine.queue, preemptor.total_requests(), ancestors=False) is None
    out: list[tuple[Victim, str]] = []
    for victim in rule:
        theirs = membership(victim.workload, queues).queue
        if theirs == mine.queue:
            out.append((victim, RESERVATION))
        elif (
            in_quota
            and theirs is not None
            and queues.queues[theirs].reclaimable
            and _over_quota(usage, theirs)
        ):
            out.append((victim, RECLAIM))
    return out


def _over_quota(usage: Usage, queue: str) -> bool:
    return any(usage.used(queue, r) > rule.quota for r, rule in usage.rules(queue).items())


def force(
    preemptor: Workload,
    fleet: Fleet,
    running: Sequence[Victim],
    now: float,
    *,
    policies: Sequence[PlacementPolicy] = (),
    seed: int = 0,
    time_limit: float = 0.5,
    queues: QueueSet | None = None,
    usage: Usage | None = None,
) -> Eviction | None:
    """The least disruptive eviction that starts ``preemptor`` at ``now``, or ``None`` when no
    set of allowed victims makes room.

    ``fleet`` and ``preemptor``: as the decision sees them (reservations applied,
    :func:`placer.solver.reservations.backfill_view`); ``running``: the placed gangs, whose
    placements ``fleet`` is charged with; ``queues`` and ``usage`` (booking ``running``):
    the queues' guarantee holds too (:func:`allowed`). Every victim's reason is
    :data:`RESERVATION`.
    """
    eviction = evict_among(
        preemptor,
        fleet,
        allowed(preemptor, running, queues, usage),
        queues=queues,
        usage=usage,
        policies=policies,
        seed=seed,
        time_limit=time_limit,
        lost_at=now,
    )
    if eviction is None:
        return None
    victims = tuple(replace(v, reason=RESERVATION) for v in eviction.victims)
    return replace(eviction, victims=victims)
