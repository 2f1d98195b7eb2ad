"""The best over-quota split any single decision could reach: an oracle for bench_fairshare.

``bench_fairshare`` measures, at every decision of a stream, how far the over-quota GPUs are
from the weight split (:func:`split_gap`). This module answers, on each decision's *input* (the
fleet node by node, what runs, what waits — recorded by :data:`placer.simulate.engine.Observer`),
how close to the weight split that one decision could possibly have come, so that a contender's
gap can be read against the best achievable one ("placer X pp, best achievable Y pp").

Readings of the split (:func:`split_gap`, ``G`` in percentage points of the over-quota GPUs):

``asking``
    the queues over their quota that still have work waiting (``C``); their over-quota GPUs
    ``o_q`` against the weights' split of their sum ``O``:
    ``G = 100 · max_{q ∈ C} |o_q / O − ω_q / Σ_{C} ω|``, counted when ``|C| ≥ 2``.
``demand``
    KAI Scheduler's and Run:ai's division: every queue whose demand (held + waiting GPUs) exceeds
    its quota takes part (``D``; a queue at its quota whose over-quota work all waits is owed a
    share too), and the over-quota GPUs in use ``O = Σ_D o_q`` are divided by weight, none given
    more than it asks (``u_q`` = demand − quota; water-filling, :func:`water_fill`):
    ``G = 100 · max_{q ∈ D} |o_q − f_q(O)| / O``, counted when ``|D| ≥ 2``, ``O > 0`` and some
    queue of ``D`` still waits.

The oracle (:func:`best_split`): one CP-SAT model per decision and reading, over

* ``x_{g,c} ∈ {0,1}``: start waiting gang ``g`` on cluster ``c`` (``Σ_c x_{g,c} ≤ 1``);
* with ``evict``: ``e_v ∈ {0,1}``: evict running gang ``v`` of a queue over its quota, at most
  its surplus per queue (``Σ_{v ∈ q} a_v e_v ≤ H_q − Q_q``: never below the quota); evicted work
  waits again;
* capacity node by node, *relaxed* (necessary conditions only, :func:`node_rows`): the
  started gangs' pods, grouped by shape (identical requests), are spread over the nodes of the
  gang's cluster, ``z_{s,n}`` pods of shape ``s`` on node ``n``, and per node and resource
  (cores, memory, pods, whole GPUs, GPU thousandths) ``Σ_s a_{s,r} z_{s,n}`` fits what is free
  plus what the evictions there free — relaxed in that a gang's pods are not tied to each
  other beyond their cluster, devices count both whole and in thousandths, and selectors,
  affinities and taints (which the benchmark's gangs do not use) are ignored;
* the contender's own evictions at that decision happen in every decision weighed (they are
  the decision's, not its input's);
* no worse than the contender's decision elsewhere: every queue holds at least
  ``min(P_q, Q_q)`` (its in-quota service) and the fleet at least ``Σ_q P_q`` GPUs (``P``: what
  the contender held after the decision) — so the split is not bought with idle GPUs;
* minimise ``G`` (hundredths of a point; products ``O · Σ ω`` and ``G · O`` as CP-SAT
  multiplication constraints; ``f_q(O)`` as an element table).

The relaxation makes the optimum a **lower bound** ``Y_lb`` of what any decision on that input
could reach. The optimum's gangs are then packed on the real nodes by placer's solver
(:func:`placer.solver.solve`, the evicted gangs released first); when they pack, the split is
achievable and ``Y_ub = Y_lb``; when not, the set is cut off (``Σ`` over its complement ``≥ 1``)
and the model solved again, a few rounds; ``Y_ub`` is the best split found that packs, never
worse than the contender's own decision (which packs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from placer.model import GPU_SHARE, Fleet, Node, Placement, Workload
from placer.quantity import GPU, PODS
from placer.solver import release, solve
from placer.solver.rebalance import water_fill
from placer.solver.state import node_devices

__all__ = [
    "READINGS",
    "Moment",
    "OracleResult",
    "Shares",
    "best_split",
    "gap_pp",
    "node_rows",
    "split_gap",
    "split_shares",
    "water_fill",
]

READINGS = ("asking", "demand")
#: resources whose cluster totals bound what starts.
RESOURCES = (GPU, GPU_SHARE, "cpu", "memory", PODS)
#: gaps in hundredths of a percentage point inside the model.
SCALE = 10000


@dataclass(frozen=True)
class Moment:
    """A decision's input: the fleet as it saw it, what ran and what waited."""

    time_s: float
    fleet: Fleet
    running: Mapping[int, Placement]
    queue: tuple[int, ...]


@dataclass(frozen=True)
class Shares:
    """A counted moment of a reading: each taking part queue's over-quota GPUs and its share
    of the weight split of their sum ``pool``."""

    over: dict[str, int]
    fair: dict[str, float]
    pool: int


def split_shares(
    reading: str,
    held: Mapping[str, int],
    *counts: Mapping[str, int],
) -> Shares | None:
    """The over-quota GPUs and the weight split of the queues taking part under ``reading``
    (module docstring); ``None`` when the moment does not count. ``held``: GPUs per queue,
    then ``counts``: the GPUs of its waiting gangs, their number, the quotas and the weights
    (:func:`split_gap`'s arguments)."""
    waiting, waiting_gangs, quota, weight = counts
    over = {q: max(0, held[q] - quota[q]) for q in held}
    if reading == "asking":
        taking = [q for q in held if over[q] > 0 and waiting_gangs[q] > 0]
        pool = sum(over[q] for q in taking)
        weights = sum(weight[q] for q in taking)
        if len(taking) < 2:
            return None
        fair = {q: pool * weight[q] / weights for q in taking}
        return Shares(over, fair, pool)
    if reading != "demand":
        raise ValueError(f"unknown reading {reading!r}; one of {', '.join(READINGS)}")
    asked = {q: held[q] + waiting[q] - quota[q] for q in held}
    taking = [q for q in held if asked[q] > 0]
    pool = sum(over[q] for q in taking)
    if len(taking) < 2 or pool <= 0 or not any(waiting[q] > 0 for q in taking):
        return None
    fair = water_fill(pool, {q: asked[q] for q in taking}, weight)
    return Shares(over, fair, pool)


def split_gap(
    reading: str,
    held: Mapping[str, int],
    waiting: Mapping[str, int],
    waiting_gangs: Mapping[str, int],
    quota: Mapping[str, int],
    weight: Mapping[str, int],
) -> float | None:
    """The split gap in percentage points under ``reading`` (:func:`split_shares`, same
    arguments); ``None`` when the moment does not count."""
    return gap_pp(split_shares(reading, held, waiting, waiting_gangs, quota, weight))


def gap_pp(shares: Shares | None) -> float | None:
    """The largest gap of :class:`Shares`, in points of the pool (``None``: no moment)."""
    if shares is None:
        return None
    return max(abs(shares.over[q] - f) / shares.pool * 100 for q, f in shares.fair.items())


@dataclass(frozen=True)
class OracleResult:
    """The best split one decision could reach (module docstring)."""

    #: proven lower bound (relaxed capacity), percentage points; ``None``: not a moment.
    lower_pp: float | None
    #: the best split found that packs on the real nodes (≤ the contender's).
    upper_pp: float | None
    #: the contender's own split on the same moment.
    contender_pp: float | None
    #: CP-SAT status of the lower bound ("OPTIMAL": exact bound).
    status: str
    #: the packed optimum: gangs started and evicted (input indices).
    started: tuple[int, ...] = ()
    evicted: tuple[int, ...] = ()
    rounds: int = 0
    notes: dict[str, Any] = field(default_factory=dict)


def _shape_key(requests: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((k, v) for k, v in requests.items() if v > 0))


def _free(node: Node) -> dict[str, int]:
    """A node's free resources, with its devices' free thousandths as ``GPU_SHARE``; GPUs by
    the devices or by ``allocatable − requested``, whichever leaves more (a relaxation: a
    device may count both whole and in thousandths)."""
    free = dict(node.free)
    by_requests = node.allocatable.get(GPU, 0) - node.requested.get(GPU, 0)
    free[GPU] = max(free.get(GPU, 0), by_requests)
    free[GPU_SHARE] = max(sum(node_devices(node)), 1000 * by_requests)
    return free


def _demand(workload: Workload) -> dict[str, int]:
    total = dict(workload.total_requests())
    total[PODS] = sum(c.replicas for c in workload.components)
    return total


def best_split(
    moment: Moment,
    workloads: Sequence[Workload],
    queue_of: Sequence[str],
    quota: Mapping[str, int],
    weight: Mapping[str, int],
    contender_held: Mapping[str, int],
    contender_waiting: Mapping[str, int],
    contender_waiting_gangs: Mapping[str, int],
    *,
    reading: str,
    forced_evictions: Sequence[int] = (),
    hint: Mapping[int, str] | None = None,
    evict: bool,
    never: frozenset[int] = frozenset(),
    time_limit: float = 2.0,
    rounds: int = 4,
    seed: int = 0,
) -> OracleResult:
    """The best split ``reading`` one decision on ``moment`` could reach (module docstring).

    ``contender_held``, ``contender_waiting``, ``contender_waiting_gangs``: GPUs held, GPUs
    waiting and gangs waiting per queue after the contender's own decision (the oracle serves
    quotas and the fleet no worse). ``evict``: the decision may also evict over-quota work
    (within each queue's surplus). ``hint``: the contender's started gangs and their clusters
    (a first solution for CP-SAT)."""
    names = list(quota)
    gpus = [w.gpus for w in workloads]
    held = dict.fromkeys(names, 0)
    for i in moment.running:
        held[queue_of[i]] += gpus[i]
    pending = [i for i in moment.queue if i not in never and i not in moment.running]
    wait_gpus = dict.fromkeys(names, 0)
    wait_count = dict.fromkeys(names, 0)
    for i in pending:
        wait_gpus[queue_of[i]] += gpus[i]
        wait_count[queue_of[i]] += 1
    contender_pp = split_gap(
        reading, contender_held, contender_waiting, contender_waiting_gangs, quota, weight
    )
    # the contender's own evictions at this moment happen in every decision the oracle weighs
    forced = [i for i in forced_evictions if i in moment.running]
    fleet = release(moment.fleet, [moment.running[i] for i in forced])
    for i in forced:
        held[queue_of[i]] -= gpus[i]
        if i not in never:
            pending.append(i)
            wait_gpus[queue_of[i]] += gpus[i]
            wait_count[queue_of[i]] += 1
    running = {i: p for i, p in moment.running.items() if i not in forced}
    victims: list[int] = []
    if evict:
        victims = [i for i in running if held[queue_of[i]] > quota[queue_of[i]] and gpus[i] > 0]
    model = cp_model.CpModel()
    x: dict[tuple[int, str], cp_model.IntVar] = {}
    e = {i: model.new_bool_var(f"e{i}") for i in victims}
    for q in names:
        mine = [i for i in victims if queue_of[i] == q]
        if mine:
            model.add(sum(gpus[i] * e[i] for i in mine) <= held[q] - quota[q])
    node_rows(model, fleet, workloads, pending, running, victims, e, x)
    top = sum(gpus[i] for i in range(len(workloads)))
    alloc = {}
    over = {}
    for q in names:
        started = [gpus[i] * v for (i, _), v in x.items() if queue_of[i] == q]
        lost = [gpus[i] * e[i] for i in victims if queue_of[i] == q]
        alloc[q] = model.new_int_var(0, top, f"alloc{q}")
        model.add(alloc[q] == held[q] + sum(started) - sum(lost))
        model.add(alloc[q] >= min(contender_held[q], quota[q]))
        over[q] = model.new_int_var(0, top, f"over{q}")
        model.add_max_equality(over[q], [0, alloc[q] - quota[q]])
    model.add(sum(alloc.values()) >= sum(contender_held.values()))
    gap = model.new_int_var(0, 100 * SCALE // 100, "gap")  # hundredths of a point
    if reading == "asking":
        _asking_objective(model, names, over, x, e, victims, wait_count, queue_of, weight, gap)
    else:
        asked = {q: held[q] + wait_gpus[q] - quota[q] for q in names}
        wanting = [q for q in names if asked[q] > 0]
        _demand_objective(model, wanting, over, asked, weight, gap, top)
    model.minimize(gap)
    for (i, c), v in x.items():
        model.add_hint(v, hint is not None and hint.get(i) == c)
    for v in e.values():
        model.add_hint(v, False)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    status = solver.solve(model)
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return OracleResult(None, contender_pp, contender_pp, name)
    lower = solver.best_objective_bound / 100
    # the relaxation's optimum, packed on the real nodes; cut off and solved again when not
    best_upper = contender_pp
    started_best: tuple[int, ...] = ()
    evicted_best: tuple[int, ...] = ()
    done = 0
    for attempt in range(1, rounds + 1):
        done = attempt
        chosen = tuple(sorted(i for (i, _), v in x.items() if solver.value(v)))
        gone = tuple(sorted(i for i in victims if solver.value(e[i])))
        value = solver.objective_value / 100
        if _packs(fleet, running, workloads, chosen, gone, seed):
            if best_upper is None or value < best_upper:
                best_upper, started_best, evicted_best = value, chosen, gone
            break
        literals = [v for (i, _), v in x.items() if i not in chosen]
        literals += [e[i] for i in victims if i not in gone]
        if not literals:
            break
        model.add_bool_or(literals)
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break
        if best_upper is not None and solver.objective_value / 100 >= best_upper:
            break  # no set left that beats what is already known to pack
    return OracleResult(
        lower_pp=lower if contender_pp is not None else None,
        upper_pp=best_upper,
        contender_pp=contender_pp,
        status=name,
        started=started_best,
        evicted=evicted_best,
        rounds=done,
    )


def node_rows(
    model: cp_model.CpModel,
    fleet: Fleet,
    workloads: Sequence[Workload],
    pending: Sequence[int],
    running: Mapping[int, Placement],
    victims: Sequence[int],
    e: Mapping[int, cp_model.IntVar],
    x: dict[tuple[int, str], cp_model.IntVar],
) -> None:
    """Capacity, node by node: the started gangs' pods, by shape (identical requests), are
    spread over the nodes of their cluster, ``z_{s,n}`` pods of shape ``s`` on node ``n``, with
    ``Σ_s z_{s,n} a_{s,r} ≤ F_{n,r} + Σ_v h_{v,n,r} e_v`` per resource (``pods`` 1 a pod) — the
    pods fit the nodes one by one (devices counted whole; selectors, affinities and taints,
    which the stream's gangs do not use, ignored: a relaxation)."""
    held: dict[tuple[str, str], dict[int, dict[str, int]]] = {}
    for i in victims:
        placement = running[i]
        for pod in placement.pods:
            into = held.setdefault((placement.cluster, pod.node), {}).setdefault(i, {})
            for r, amount in pod.requests.items():
                into[r] = into.get(r, 0) + amount
            into[PODS] = into.get(PODS, 0) + 1
    for cluster in fleet.clusters:
        if not cluster.reachable:
            continue
        nodes = [n for n in cluster.nodes if n.usable]
        most = {r: 0 for r in RESOURCES}
        for node in nodes:
            free = _free(node)
            gain: dict[str, int] = {}
            for amounts in held.get((cluster.name, node.name), {}).values():
                for r, amount in amounts.items():
                    gain[r] = gain.get(r, 0) + amount
            for r in RESOURCES:
                most[r] += max(0, free.get(r, 0) + gain.get(r, 0))
        shapes: dict[tuple[tuple[str, int], ...], list[Any]] = {}
        for i in pending:
            demand = _demand(workloads[i])
            if any(demand.get(r, 0) > most[r] for r in RESOURCES):
                continue
            var = model.new_bool_var(f"x{i}{cluster.name}")
            x[i, cluster.name] = var
            for component in workloads[i].components:
                shapes.setdefault(_shape_key(component.pod.requests), []).append(
                    component.replicas * var
                )
        rows: dict[str, dict[str, list[Any]]] = {n.name: {} for n in nodes}
        for key, terms in shapes.items():
            spread: list[cp_model.IntVar] = []
            need = dict(key)
            for node in nodes:
                free = _free(node)
                victims_here = held.get((cluster.name, node.name), {})
                for amounts in victims_here.values():
                    for r, amount in amounts.items():
                        free[r] = free.get(r, 0) + amount
                fit = min(
                    [free.get(r, 0) // a for r, a in need.items()] + [free.get(PODS, 1 << 20)]
                )
                if fit <= 0:
                    continue
                z = model.new_int_var(0, fit, f"z{cluster.name}{node.name}{len(spread)}")
                spread.append(z)
                for r, a in need.items():
                    rows[node.name].setdefault(r, []).append(a * z)
                rows[node.name].setdefault(PODS, []).append(z)
            model.add(sum(spread) == sum(terms))
        for node in nodes:
            free = _free(node)
            victims_here = held.get((cluster.name, node.name), {})
            for r, row in rows[node.name].items():
                extra = [amounts.get(r, 0) * e[i] for i, amounts in victims_here.items()]
                limit = free.get(r, 0) if r != PODS or PODS in free else 1 << 20
                model.add(sum(row) <= limit + sum(extra))
    for i in pending:
        choices = [v for (j, _), v in x.items() if j == i]
        if len(choices) > 1:
            model.add_at_most_one(choices)


def _asking_objective(
    model: cp_model.CpModel,
    names: Sequence[str],
    over: Mapping[str, cp_model.IntVar],
    x: Mapping[tuple[int, str], cp_model.IntVar],
    e: Mapping[int, cp_model.IntVar],
    victims: Sequence[int],
    wait_count: Mapping[str, int],
    queue_of: Sequence[str],
    weight: Mapping[str, int],
    gap: cp_model.IntVar,
) -> None:
    """The ``asking`` reading: ``C`` chosen by the model (over quota and still waiting)."""
    total_weight = sum(weight.values())
    top = 1 << 16
    in_c = {}
    counted_over = []
    for q in names:
        starts = [v for (i, _), v in x.items() if queue_of[i] == q]
        back = [e[i] for i in victims if queue_of[i] == q]
        left = model.new_int_var(0, 1 << 16, f"left{q}")
        model.add(left == wait_count[q] - sum(starts) + sum(back))
        waits = model.new_bool_var(f"waits{q}")
        model.add(left >= 1).only_enforce_if(waits)
        model.add(left == 0).only_enforce_if(waits.Not())
        positive = model.new_bool_var(f"pos{q}")
        model.add(over[q] >= 1).only_enforce_if(positive)
        model.add(over[q] == 0).only_enforce_if(positive.Not())
        c = model.new_bool_var(f"c{q}")
        model.add_bool_and([waits, positive]).only_enforce_if(c)
        model.add_bool_or([waits.Not(), positive.Not()]).only_enforce_if(c.Not())
        in_c[q] = c
        oc = model.new_int_var(0, top, f"oc{q}")
        model.add(oc == over[q]).only_enforce_if(c)
        model.add(oc == 0).only_enforce_if(c.Not())
        counted_over.append(oc)
    total = model.new_int_var(0, top, "O")
    model.add(total == sum(counted_over))
    weights = model.new_int_var(0, total_weight, "W")
    model.add(weights == sum(weight[q] * in_c[q] for q in names))
    product = model.new_int_var(0, top * total_weight, "OW")
    model.add_multiplication_equality(product, [total, weights])
    bound = model.new_int_var(0, SCALE * top * total_weight, "Z")
    model.add_multiplication_equality(bound, [gap, product])
    for q in names:
        scaled = model.new_int_var(0, top * total_weight, f"oW{q}")
        model.add_multiplication_equality(scaled, [over[q], weights])
        diff = scaled - weight[q] * total
        model.add(SCALE * diff <= bound).only_enforce_if(in_c[q])
        model.add(-SCALE * diff <= bound).only_enforce_if(in_c[q])


def _demand_objective(
    model: cp_model.CpModel,
    wanting: Sequence[str],
    over: Mapping[str, cp_model.IntVar],
    asked: Mapping[str, int],
    weight: Mapping[str, int],
    gap: cp_model.IntVar,
    top: int,
) -> None:
    """The ``demand`` reading: ``D`` fixed by the input (GPUs conserved by the decision)."""
    if len(wanting) < 2:
        return
    limit = sum(asked[q] for q in wanting)
    total = model.new_int_var(0, limit, "O")
    model.add(total == sum(over[q] for q in wanting))
    bound = model.new_int_var(0, SCALE * limit, "Z")
    model.add_multiplication_equality(bound, [gap, total])
    fills = [water_fill(o, {q: asked[q] for q in wanting}, weight) for o in range(limit + 1)]
    for q in wanting:
        table = [round(100 * fill[q]) for fill in fills]
        fair = model.new_int_var(0, 100 * limit, f"f{q}")
        model.add_element(total, table, fair)
        diff = 100 * over[q] - fair
        # gap (hundredths of a point) · O ≥ 10000 · |o − f| = 100 · |100 o − 100 f|
        model.add(100 * diff <= bound)
        model.add(-100 * diff <= bound)


def _packs(
    fleet: Fleet,
    running: Mapping[int, Placement],
    workloads: Sequence[Workload],
    started: Sequence[int],
    evicted: Sequence[int],
    seed: int,
) -> bool:
    """Whether ``started`` all pack on the real nodes with ``evicted`` gone (placer's solver)."""
    if not started:
        return True
    fleet = release(fleet, [running[i] for i in evicted])
    decision = solve(
        [workloads[i] for i in started], fleet, solver="cpsat", time_limit=2.0, seed=seed
    )
    return len(decision.placements) == len(started)
