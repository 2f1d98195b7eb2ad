"""What one decision could pay a queue of its quota: the reclaim target's yardstick.

``bench_fairshare`` counts a queue *owed* at a decision when it waits for in-quota GPUs while
other queues hold at least as many over their quota (issue #14: it must then reach ≥ 95 % of
what it is owed within one decision interval). Whole gangs on real nodes do not always let a
decision pay that: the room a waiting gang needs may be held by other queues' *in-quota*
work — its cores and memory beside idle GPUs, no GPUs at all — which no reclaim may take.
This module bounds, on a decision's input (the fleet node by node, what runs, what waits —
:class:`simulations.split_oracle.Moment`), the in-quota GPUs one decision could start for a
queue ``p``:

* ``x_{g,c} ∈ {0,1}``: start ``p``'s waiting gang ``g`` (of at most its quota room
  ``R = Q_p − H_p`` GPUs) on cluster ``c``, ``Σ_c x_{g,c} ≤ 1``;
* ``e_v ∈ {0,1}``: evict running gang ``v`` of another queue ``q`` over its quota, of a
  priority no higher than ``p``'s highest waiting one and not protected
  (``placer.dev/preemptible: "false"``) — what reclaim may take (KAI's and placer's rule,
  :mod:`placer.solver.preempt`) — at most its surplus per queue:
  ``Σ_{v ∈ q} a_v e_v ≤ H_q − Q_q`` (never below its quota);
* capacity node by node, relaxed (:func:`simulations.split_oracle.node_rows`: the pods of a
  shape spread over their cluster's nodes, every resource — cores, memory, pods, whole GPUs,
  GPU thousandths — within what is free plus what the evictions there free);
* ``Σ_g a_g x_{g,c} ≤ R`` (in quota); maximise it.

The optimum's **upper bound** (CP-SAT's best bound, proven or not) is returned: no decision
on that input can start more in-quota GPUs for ``p``, whichever gangs it starts and evicts —
other queues' waiting work, which would only take room, is left out; so is ``p``'s own
lower-priority work (preempting it frees room but gives ``p`` nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ortools.sat.python import cp_model

from placer.model import Workload
from placer.solver.preempt import LABEL_PREEMPTIBLE
from simulations.split_oracle import Moment, node_rows

__all__ = ["reachable_in_quota"]


def reachable_in_quota(
    moment: Moment,
    workloads: Sequence[Workload],
    queue_of: Sequence[str],
    quota: Mapping[str, int],
    queue: str,
    waiting: Sequence[int],
    *,
    time_limit: float = 2.0,
    seed: int = 0,
) -> int | None:
    """The most in-quota GPUs one decision on ``moment`` could start for ``queue`` from its
    ``waiting`` gangs (module docstring; an upper bound), ``None`` when CP-SAT bounds
    nothing in ``time_limit`` seconds."""
    gpus = [w.gpus for w in workloads]
    held = dict.fromkeys(quota, 0)
    for i in moment.running:
        held[queue_of[i]] += gpus[i]
    room = quota[queue] - held[queue]
    gangs = [i for i in waiting if 0 < gpus[i] <= room]
    if not gangs:
        return 0
    top = max(workloads[i].priority for i in gangs)
    victims = [
        i
        for i in moment.running
        if queue_of[i] != queue
        and held[queue_of[i]] > quota[queue_of[i]]
        and workloads[i].priority <= top
        and workloads[i].labels.get(LABEL_PREEMPTIBLE, "").lower() != "false"
    ]
    model = cp_model.CpModel()
    e = {i: model.new_bool_var(f"e{i}") for i in victims}
    for name in quota:
        theirs = [i for i in victims if queue_of[i] == name]
        if theirs:
            model.add(sum(gpus[i] * e[i] for i in theirs) <= held[name] - quota[name])
    x: dict[tuple[int, str], cp_model.IntVar] = {}
    node_rows(model, moment.fleet, workloads, gangs, moment.running, victims, e, x)
    started = sum(gpus[i] * v for (i, _), v in x.items())
    model.add(started <= room)
    model.maximize(started)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return math.floor(solver.best_objective_bound + 1e-6)
