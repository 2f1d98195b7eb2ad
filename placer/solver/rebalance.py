"""Fair-share rebalancing: evictions that bring the queues' over-quota use to the weight split.

Reclaim (:mod:`placer.solver.preempt`) gives a queue back its *deserved quota*; what is left
once the quotas are served is divided by ``overQuotaWeight`` only as capacity frees up, so
over-quota gangs started earlier, which hold GPUs for hours, keep the division off the
weights. KAI Scheduler's reclaim compares the queues' *saturation ratio* (allocated / fair
share) and lets a queue take from another only while its ratio stays below the other's;
Kueue's fair sharing preempts with ``LessThanOrEqualToFinalShare``. Rebalancing applies the
same idea to the over-quota part alone, with a tolerance so that it does not evict for every
gang's worth of difference.

Model, for one resource ``r`` (GPUs, ``nvidia.com/gpu``, by default), per leaf queue ``q``
with a rule for ``r`` and a weight ``ω_q > 0``:

* ``H_q`` held (running work), ``W_q`` waiting (what its pending work asks), ``Q_q`` quota;
* ``O_q = max(0, H_q − Q_q)`` its over-quota use; ``A_q = H_q + W_q − Q_q`` its over-quota
  demand; the queue *takes part* when ``A_q > 0``;
* the pool ``P = Σ O_q`` over the queues taking part, and their fair shares of it
  ``T = water_fill(P, A, ω)`` (:func:`water_fill`: by weight, none given more than it asks —
  KAI's and Run:ai's division of what is left after the quotas);
* the gap ``g_q = (O_q − T_q) / P``; the split is within tolerance ``τ`` when
  ``max_q |g_q| ≤ τ``.

A *move* (:func:`rebalance_move`) starts one waiting gang ``w`` of a queue ``p`` with
``g_p < −τ`` by evicting running over-quota gangs of queues ``q`` with ``g_q > 0``:

* ``w`` takes ``p`` over its quota (in-quota work is reclaim's) and passes no limit of ``p``;
* ``w`` has the highest priority still waiting (priorities before fair share: nothing of a
  lower priority starts while a higher one waits) and every victim a priority no higher;
* victims are whole workloads, ``reclaimable`` queues' and not ``placer.dev/preemptible:
  "false"``, started at most ``max_age_s`` ago when set (the cheapest to throw away);
* from each victim queue at most ``⌊O_q − T_q + τ P⌋`` of ``r`` (it ends no more than ``τ``
  below its share, so it cannot take the room back by the same rule: no ping-pong);
* the victim set is :func:`placer.solver.preempt.evict_among`'s, with the least work thrown
  away first (``Σ`` GPU-minutes run), then the fewest GPUs, workloads, priorities and ages,
  checked on the real nodes;
* the move is kept only when it lowers ``max_q |g_q|`` (the victims wait again, so every
  ``A_q`` is unchanged; ``P`` and ``T`` are taken again after the move): each move makes
  progress, and a decision makes at most ``max_evictions`` of them;
* the gangs are tried in the order of the largest gap their move would leave, estimated with
  the room taken from the queues furthest above their shares first (:func:`_estimate`; the
  victims' real sizes decide), only those whose estimate lowers it, at most ``max_tries``
  victim searches per move. A gang bigger than its queue's deficit may start when the gap it
  leaves is smaller than the one it closes: whole gangs of 30–117 GPUs in a pool of a few
  hundred cannot be divided finer.

Leaf queues are compared fleet-wide (an ancestor's own over-quota share is not balanced).
Pure: reads its arguments, returns new objects.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from placer.model import Fleet, Workload
from placer.policy import PlacementPolicy
from placer.quantity import GPU
from placer.queues import QueueSet, Usage, membership
from placer.solver.preempt import LABEL_PREEMPTIBLE, Eviction, Victim, evict_among

__all__ = [
    "REBALANCE",
    "RebalancePolicy",
    "Split",
    "over_quota_split",
    "rebalance_move",
    "water_fill",
]

#: the reason of a rebalancing eviction (``Victimised.reason``).
REBALANCE = "rebalance"


@dataclass(frozen=True)
class RebalancePolicy:
    """When and how much fair-share rebalancing evicts (module docstring)."""

    #: ``τ``: the largest gap left alone, as a fraction of the over-quota pool.
    tolerance: float = 0.05
    #: moves per decision, at most.
    max_evictions: int = 4
    #: victim searches per decision, at most (each is a small CP-SAT model per cluster).
    max_tries: int = 8
    #: only work started at most this many seconds ago may be evicted (``None``: any).
    max_age_s: float | None = None
    #: the resource divided.
    resource: str = GPU

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"rebalance tolerance {self.tolerance} is not in [0, 1)")
        if self.max_evictions < 1 or self.max_tries < 1:
            raise ValueError("rebalance needs max_evictions and max_tries of at least 1")
        if self.max_age_s is not None and self.max_age_s < 0:
            raise ValueError(f"rebalance max_age_s {self.max_age_s} is negative")


def water_fill(
    amount: float, asked: Mapping[str, float], weight: Mapping[str, float]
) -> dict[str, float]:
    """``amount`` divided by weight among those who ask, none given more than it asks (what
    one gives up goes to the others)."""
    share = dict.fromkeys(asked, 0.0)
    left = float(amount)
    for _ in range(len(asked) + 1):
        wanting = [n for n in asked if asked[n] - share[n] > 1e-9]
        if left <= 1e-9 or not wanting:
            break
        total = sum(weight[n] for n in wanting)
        given = 0.0
        for name in wanting:
            more = min(left * weight[name] / total, asked[name] - share[name])
            share[name] += more
            given += more
        left -= given
    return share


@dataclass(frozen=True)
class Split:
    """The over-quota split of one moment: per queue taking part, its over-quota use ``O_q``
    and fair share ``T_q`` of the pool ``P`` (module docstring)."""

    over: Mapping[str, int]
    target: Mapping[str, float]
    pool: int

    def gap(self, queue: str) -> float:
        """``g_q``: above (> 0) or below its share, as a fraction of the pool."""
        return (self.over[queue] - self.target[queue]) / self.pool

    @property
    def worst(self) -> float:
        """``max_q |g_q|``."""
        return max(abs(self.gap(q)) for q in self.target)


def over_quota_split(
    queues: QueueSet,
    held: Mapping[str, int],
    waiting: Mapping[str, int],
    resource: str = GPU,
) -> Split | None:
    """The split of the over-quota pool among the leaf queues taking part (module docstring),
    ``held`` and ``waiting`` per queue name; ``None`` when fewer than two take part or the pool
    is empty."""
    over: dict[str, int] = {}
    asked: dict[str, float] = {}
    weight: dict[str, float] = {}
    for queue in queues:
        rule = queue.resources.get(resource)
        if rule is None or rule.over_quota_weight <= 0 or queues.children(queue.name):
            continue
        h = held.get(queue.name, 0)
        a = h + waiting.get(queue.name, 0) - rule.quota
        if a > 0:
            over[queue.name] = max(0, h - rule.quota)
            asked[queue.name] = float(a)
            weight[queue.name] = rule.over_quota_weight
    pool = sum(over.values())
    if len(over) < 2 or pool <= 0:
        return None
    return Split(over, water_fill(pool, asked, weight), pool)


def _amount(workload: Workload, resource: str) -> int:
    return workload.total_requests().get(resource, 0)


def _held_and_waiting(
    queues: QueueSet, usage: Usage, waiting: Sequence[Workload], resource: str
) -> tuple[dict[str, int], dict[str, int]]:
    held = {q.name: usage.used(q.name, resource) for q in queues}
    asked = dict.fromkeys(held, 0)
    for workload in waiting:
        name = membership(workload, queues).queue
        if name in asked:
            asked[name] += _amount(workload, resource)
    return held, asked


def rebalance_move(
    waiting: Sequence[Workload],
    candidates: Sequence[Workload],
    fleet: Fleet,
    running: Sequence[Victim],
    queues: QueueSet,
    usage: Usage,
    policy: RebalancePolicy,
    now: float,
    *,
    policies: Sequence[PlacementPolicy] = (),
    seed: int = 0,
    time_limit: float = 0.5,
) -> Eviction | None:
    """One move of the module docstring, or ``None``: ``waiting`` is every pending workload
    (their requests are the queues' waiting demand), ``candidates`` those that may start now
    (in the order to try them: arrival), ``running`` the running work as victims (``fleet``
    charged with it, ``usage`` booking it), ``now`` on the victims' ``started`` clock."""
    resource = policy.resource
    held, asked = _held_and_waiting(queues, usage, waiting, resource)
    split = over_quota_split(queues, held, asked, resource)
    if split is None or split.worst <= policy.tolerance:
        return None
    top = max((membership(w, queues).priority for w in waiting), default=0)
    options: list[tuple[float, int, Workload]] = []
    for position, workload in enumerate(candidates):
        member = membership(workload, queues)
        name = member.queue
        if name is None or name not in split.target or member.priority < top:
            continue
        if split.gap(name) >= -policy.tolerance:
            continue  # not below its share by more than the tolerance
        demand = workload.total_requests()
        amount = demand.get(resource, 0)
        if amount <= 0 or held[name] + amount <= queues.queues[name].resources[resource].quota:
            continue  # asks nothing of the pool, or in quota (reclaim's)
        if usage.limit_problem(name, demand) is not None:
            continue
        estimate = _estimate(split, held, asked, name, amount, policy, queues)
        if estimate < split.worst - 1e-9:
            options.append((estimate, position, workload))
    options.sort(key=lambda option: option[:2])
    for _, _, workload in options[: policy.max_tries]:
        found = _evict_for(
            workload,
            fleet,
            running,
            queues,
            usage,
            split,
            policy,
            now,
            (policies, seed, time_limit),
        )
        if found is None:
            continue
        name = membership(workload, queues).queue
        assert name is not None
        amount = _amount(workload, resource)
        held_after, asked_after = dict(held), dict(asked)
        held_after[name] += amount
        asked_after[name] -= amount
        gone = {v.workload for v in found.victims}
        for victim in running:
            theirs = membership(victim.workload, queues).queue
            if victim.workload.ref in gone and theirs is not None:
                held_after[theirs] -= _amount(victim.workload, resource)
                asked_after[theirs] += _amount(victim.workload, resource)
        moved = over_quota_split(queues, held_after, asked_after, resource)
        if moved is None or moved.worst < split.worst - 1e-9:
            return found
    return None


def _caps(split: Split, policy: RebalancePolicy) -> dict[str, int]:
    """Per over-share queue, the most its evicted work may give up: ``⌊O_q − T_q + τ P⌋``,
    never more than its over-quota use."""
    slack = policy.tolerance * split.pool
    return {
        q: min(split.over[q], math.floor(split.over[q] - split.target[q] + slack))
        for q in split.target
        if split.gap(q) > 0
    }


def _estimate(
    split: Split,
    held: Mapping[str, int],
    asked: Mapping[str, int],
    name: str,
    amount: int,
    policy: RebalancePolicy,
    queues: QueueSet,
) -> float:
    """``max_q |g_q|`` after queue ``name`` starts ``amount`` on room taken from the queues
    furthest above their shares first (within :func:`_caps`): the order in which moves are
    tried (the victims' real sizes decide, :func:`rebalance_move`)."""
    held_after, asked_after = dict(held), dict(asked)
    held_after[name] += amount
    asked_after[name] -= amount
    left = amount
    caps = _caps(split, policy)
    for q in sorted(caps, key=split.gap, reverse=True):
        taken = max(0, min(left, caps[q]))
        held_after[q] -= taken
        asked_after[q] += taken
        left -= taken
    moved = over_quota_split(queues, held_after, asked_after, policy.resource)
    return moved.worst if moved is not None else 0.0


def _evict_for(
    preemptor: Workload,
    fleet: Fleet,
    running: Sequence[Victim],
    queues: QueueSet,
    usage: Usage,
    split: Split,
    policy: RebalancePolicy,
    now: float,
    knobs: tuple[Sequence[PlacementPolicy], int, float],
) -> Eviction | None:
    """The least costly eviction of over-share work that lets ``preemptor`` start (module
    docstring), or ``None``."""
    policies, seed, time_limit = knobs
    mine = membership(preemptor, queues)
    most = _caps(split, policy)
    caps: dict[str, dict[str, int]] = {}
    allowed: list[tuple[Victim, str]] = []
    for victim in running:
        workload = victim.workload
        theirs = membership(workload, queues)
        name = theirs.queue
        if name is None or name == mine.queue or name not in split.target:
            continue
        if split.gap(name) <= 0 or theirs.priority > mine.priority:
            continue
        if not queues.queues[name].reclaimable:
            continue
        if workload.labels.get(LABEL_PREEMPTIBLE, "").lower() == "false":
            continue
        if policy.max_age_s is not None and now - victim.started > policy.max_age_s:
            continue
        caps[name] = {policy.resource: most[name]}
        allowed.append((victim, REBALANCE))
    if not allowed:
        return None
    return evict_among(
        preemptor,
        fleet,
        allowed,
        queues=queues,
        usage=usage,
        policies=policies,
        seed=seed,
        time_limit=time_limit,
        lost_at=now,
        caps=caps,
    )
