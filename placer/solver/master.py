"""Batch placement with CP-SAT: cluster choice on node-aware aggregated capacity (the master),
node packing per cluster (the realiser), and cuts back to the master when a packing fails.

See the package docstring (:mod:`placer.solver`) for the model. This module runs one priority
level: the caller charges each level's placements before solving the next, so a lower priority
only ever gets what the higher ones left (priorities are strictly lexicographic).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from placer.solver.capacity import cluster_rows, infeasible_alone
from placer.solver.classlp import ClassLP
from placer.solver.clock import Clock
from placer.solver.fragmentation import Mix
from placer.solver.heuristics import Placed, choose_and_pack, ffd_key
from placer.solver.packer import Packed, pack, pack_set
from placer.solver.portfolio import run_portfolio, value_of
from placer.solver.problem import Unit
from placer.solver.state import ClusterState

__all__ = ["CPSAT_WORKERS", "DETERMINISTIC_PER_SECOND", "MAX_ROUNDS", "LevelResult", "solve_level"]

#: CP-SAT threads. Fixed (not "all cores") so that a decision is reproducible: with
#: ``interleave_search`` the parallel search is deterministic for a fixed worker count.
CPSAT_WORKERS = 2
#: CP-SAT's deterministic time units granted per second of the time limit. The search is
#: stopped by deterministic time (reproducible), and by wall time only as a safety net.
DETERMINISTIC_PER_SECOND = 0.4
#: deterministic time of one global master solve, at most (proving the preference terms
#: optimal can take long; the value part is usually settled early).
MASTER_DETERMINISTIC_CAP = 0.5
#: masters with at most this many variables get CP-SAT's full (proving) search; larger ones
#: large-neighbourhood search from the hint only (full search is too slow to start there).
SMALL_MODEL = 400
#: sweeps of the per-cluster neighbourhood search, at most.
MAX_SWEEPS = 3
#: unplaced units offered to one cluster's master (largest first).
MAX_CANDIDATES = 120
#: master solves (each after a packing failure's no-good) per cluster visit.
SUB_ATTEMPTS = 3
#: deterministic time of one single-cluster master (single worker: reproducible).
SUB_DETERMINISTIC_TIME = 0.05
#: placed units tried as victims per unplaced unit and cluster in the ejection repair.
EJECT_CANDIDATES = 6
#: master solve / realise / cut rounds at most.
MAX_ROUNDS = 4


@dataclass
class LevelResult:
    """The realised placements of one level and how they were found."""

    placed: Placed
    #: ``optimal`` (the master was proven optimal and fully realised), ``feasible``,
    #: ``fallback`` (the greedy answer was kept).
    status: str
    #: CP-SAT's proven bound on the level's placed value, from the first (cut-free) master.
    bound: float | None = None
    rounds: int = 0
    cuts: int = 0
    notes: list[str] = field(default_factory=list)


def _apply(states: dict[str, ClusterState], placed: Placed) -> None:
    for _, cluster, packed in placed:
        state = states[cluster]
        for run, _, node, devices in packed.pods:
            state.place(run.shape, node, devices)


def solve_level(
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    deadline: float,
    clock: Clock,
    seed: int,
    mix: Mix | None,
    guide: ClassLP | None = None,
) -> LevelResult:
    """Place ``units`` (one priority level) on ``states``; leaves the placements applied.

    ``deadline`` is a reading of ``clock`` (seconds of the decision) at which to stop;
    ``guide`` is the node-class LP over exactly these units and states, if the caller has it.
    """
    marks = {name: state.mark() for name, state in states.items()}

    def reset() -> None:
        for name, state in states.items():
            state.undo(marks[name])

    hints = run_portfolio(units, states, mix=mix, clock=clock, deadline=deadline, guide=guide)
    reset()
    best = hints.best
    result = LevelResult(placed=best, status="fallback", notes=hints.notes)
    if len(best) == len(units) and all(u.rank[c] == 0 for u, c, _ in best):
        _apply(states, best)
        result.status = "optimal"
        result.notes.append("a hint placed every unit in its first-choice cluster")
        return result
    one_pass = hints.pass_seconds
    pairs = [
        (unit, name)
        for unit in units
        for name in unit.allowed()
        if name in states and not infeasible_alone(states[name], unit)
    ]
    if len(pairs) <= SMALL_MODEL:
        _global_master(
            result, pairs, units, states, reset, deadline - 1.5 * one_pass, clock, seed, mix
        )
    best = result.placed
    cuts = result.cuts
    if result.status != "optimal":
        # node-realised improvement: ejection repair, then the per-cluster masters
        improved = _eject(
            best, units, states, deadline=deadline - 0.5 * one_pass, clock=clock, mix=mix
        )
        reset()
        improved, sub_cuts = _improve_by_cluster(
            improved,
            units,
            states,
            marks,
            deadline=deadline - 0.5 * one_pass,
            clock=clock,
            mix=mix,
        )
        cuts += sub_cuts
        reset()
        if value_of(improved) > value_of(best):
            best = improved
            result.status = "feasible"
    result.cuts = cuts
    result.placed = best
    _apply(states, best)
    return result


def _global_master(
    result: LevelResult,
    pairs: list[tuple[Unit, str]],
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    reset: Callable[[], None],
    deadline: float,
    clock: Clock,
    seed: int,
    mix: Mix | None,
) -> None:
    """The master over all clusters (small models): CP-SAT's full search from the hint,
    realisation, cuts, up to ``MAX_ROUNDS`` rounds; updates ``result`` (states left reset)."""
    model = cp_model.CpModel()
    x = {(u.index, c): model.new_bool_var(f"x{u.index}_{c}") for u, c in pairs}
    by_cluster: dict[str, list[Unit]] = {name: [] for name in states}
    for unit, name in pairs:
        by_cluster[name].append(unit)
    options: dict[int, list[cp_model.IntVar]] = {}
    for (u, _), var in x.items():
        options.setdefault(u, []).append(var)
    for variables in options.values():
        if len(variables) > 1:
            model.add_at_most_one(variables)
    for name, members in by_cluster.items():
        for row in cluster_rows(states[name], members, node_aware=True):
            model.add(sum(x[(u, name)] * a for u, a in row.coef.items()) <= row.rhs)
    scale = sum(max(u.rank.values(), default=0) for u in units) + 1
    by_index = {u.index: u for u in units}
    model.maximize(
        sum(var * (by_index[u].value * scale - by_index[u].rank[c]) for (u, c), var in x.items())
    )
    best = result.placed
    chosen = {(u.index, c) for u, c, _ in best}
    for key, var in x.items():
        model.add_hint(var, 1 if key in chosen else 0)
    for round_index in range(MAX_ROUNDS):
        remaining = deadline - clock()
        if remaining <= 0.02:
            break
        # the first round gets most of what is left; later rounds share the rest
        budget = remaining * (0.7 if round_index == 0 else 1.0 / (MAX_ROUNDS - round_index))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = CPSAT_WORKERS
        solver.parameters.interleave_search = CPSAT_WORKERS > 1
        solver.parameters.random_seed = seed
        solver.parameters.max_deterministic_time = max(
            0.01, min(MASTER_DETERMINISTIC_CAP, budget * DETERMINISTIC_PER_SECOND)
        )
        solver.parameters.max_time_in_seconds = Clock.wall_seconds(remaining)
        status = solver.solve(model)
        result.rounds = round_index + 1
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break
        if round_index == 0:
            result.bound = solver.best_objective_bound / scale
        assignment: dict[str, list[Unit]] = {name: [] for name in states}
        for (u, c), var in x.items():
            if solver.value(var):
                assignment[c].append(by_index[u])
        realised, failures = _realise(assignment, units, states, mix)
        reset()
        if value_of(realised) > value_of(best):
            best = realised
            result.status = "feasible"
        if not failures:
            if status == cp_model.OPTIMAL and value_of(realised) >= value_of(best):
                best = realised
                result.status = "optimal"
            break
        for cluster, prefix in failures:
            state = states[cluster]
            mark = state.mark()
            last = prefix[-1]
            alone = isinstance(pack(state, last.runs, scoring=last.scoring, mix=mix), Packed)
            state.undo(mark)
            if not alone:
                prefix = prefix[-1:]
            if len(prefix) == 1:
                model.add(x[(prefix[0].index, cluster)] == 0)
            else:
                model.add(sum(x[(u.index, cluster)] for u in prefix) <= len(prefix) - 1)
            result.cuts += 1
        model.clear_hints()  # type: ignore[no-untyped-call]
        chosen = {(u.index, c) for u, c, _ in best}
        for key, var in x.items():
            model.add_hint(var, 1 if key in chosen else 0)
    result.placed = best


def _improve_by_cluster(
    best: Placed,
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    marks: dict[str, int],
    *,
    deadline: float,
    clock: Clock,
    mix: Mix | None,
) -> tuple[Placed, int]:
    """Large-neighbourhood search, one cluster at a time (see the package docstring).

    For cluster ``c``: the units now on ``c`` and the unplaced units ``c`` may take form a
    single-cluster master (CP-SAT on ``c``'s node-aware rows at the level's start, value
    objective, asked for more value than now). Its answer is realised incrementally: the
    units it drops leave their nodes, the units it adds are packed into what is then free; a
    packing failure adds a no-good and the master is solved again (``SUB_ATTEMPTS``). Sweeps
    over the clusters (most free GPU first) until one brings nothing or ``MAX_SWEEPS`` are
    done; the ``deadline`` is a safety net.
    """
    base = {name: state.copy() for name, state in states.items()}
    _apply(states, best)
    where: dict[int, tuple[str, Packed]] = {u.index: (c, p) for u, c, p in best}
    by_index = {u.index: u for u in units}
    cuts = 0
    for _ in range(MAX_SWEEPS):
        improved = False
        order = sorted(states, key=lambda c: (-states[c].totals()[1], c))
        for name in order:
            if clock() > deadline:
                break
            inside = [by_index[i] for i, (c, _) in where.items() if c == name]
            outside = [
                u
                for u in units
                if u.index not in where and name in u.rank and not infeasible_alone(base[name], u)
            ]
            if not outside:
                continue
            outside = sorted(outside, key=ffd_key)[:MAX_CANDIDATES]
            current = {u.index: where[u.index][1] for u in inside}
            found, tried = _cluster_master(
                states[name], base[name], inside, outside, current, deadline, clock, mix
            )
            cuts += tried
            if found is None:
                continue
            kept, added = found
            for unit in inside:
                if unit.index not in kept:
                    del where[unit.index]  # dropped, or repacked (then in ``added``)
            for unit, packed in added:
                where[unit.index] = (name, packed)
            improved = True
        if not improved or clock() > deadline:
            break
    placed = [(by_index[i], c, p) for i, (c, p) in where.items()]
    return placed, cuts


def _eject(
    best: Placed,
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    deadline: float,
    clock: Clock,
    mix: Mix | None,
) -> Placed:
    """Ejection repair, node-realised: an unplaced unit (largest first) takes the place of one
    placed unit of lower value on a cluster (its pods leave their nodes, the newcomer is
    packed), and the ejected unit tries every cluster again. Each accepted move raises the
    placed value; at most ``EJECT_CANDIDATES`` victims are tried per unit and cluster."""
    _apply(states, best)
    where: dict[int, tuple[str, Packed]] = {u.index: (c, p) for u, c, p in best}
    by_index = {u.index: u for u in units}
    waiting = sorted((u for u in units if u.index not in where), key=ffd_key)
    for unit in waiting:
        if clock() > deadline:
            break
        if unit.index in where:
            continue
        choice = choose_and_pack("greedy", unit, states, unit.allowed(), mix=mix)
        if choice.packed is not None and choice.cluster is not None:
            where[unit.index] = (choice.cluster, choice.packed)
            continue
        for name in unit.allowed():
            state = states.get(name)
            if state is None or unit.index in where:
                continue
            victims = sorted(
                (
                    by_index[i]
                    for i, (c, _) in where.items()
                    if c == name and by_index[i].value < unit.value
                ),
                key=lambda v: (-v.value, v.index),
            )[:EJECT_CANDIDATES]
            for victim in victims:
                mark = state.mark()
                for run, _, node, devices in where[victim.index][1].pods:
                    state.unplace(run.shape, node, devices)
                result = pack(state, unit.runs, scoring=unit.scoring, mix=mix)
                if not isinstance(result, Packed):
                    state.undo(mark)
                    continue
                del where[victim.index]
                where[unit.index] = (name, result)
                again = choose_and_pack("greedy", victim, states, victim.allowed(), mix=mix)
                if again.packed is not None and again.cluster is not None:
                    where[victim.index] = (again.cluster, again.packed)
                break
    return [(by_index[i], c, p) for i, (c, p) in where.items()]


def _cluster_master(
    state: ClusterState,
    base: ClusterState,
    inside: list[Unit],
    outside: list[Unit],
    current: dict[int, Packed],
    deadline: float,
    clock: Clock,
    mix: Mix | None,
) -> tuple[tuple[set[int], list[tuple[Unit, Packed]]] | None, int]:
    """A better realisable choice of units for one cluster: (kept, added), or ``None``."""
    members = inside + outside
    model = cp_model.CpModel()
    y = {u.index: model.new_bool_var(f"y{u.index}") for u in members}
    for row in cluster_rows(base, members, node_aware=True):
        model.add(sum(y[u] * a for u, a in row.coef.items()) <= row.rhs)
    now = sum(u.value for u in inside)
    model.add(sum(y[u.index] * u.value for u in members) >= now + 1)
    # prefer changes that keep most of what is placed (fewer moves, likelier to pack)
    model.maximize(sum(y[u.index] * u.value * 2 for u in members) + sum(y[u.index] for u in inside))
    for unit in members:
        model.add_hint(y[unit.index], 1 if unit.index in current else 0)
    cuts = 0
    for _ in range(SUB_ATTEMPTS):
        remaining = deadline - clock()
        if remaining <= 0.01:
            return None, cuts
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_deterministic_time = SUB_DETERMINISTIC_TIME
        solver.parameters.max_time_in_seconds = Clock.wall_seconds(remaining)
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, cuts
        dropped = [u for u in inside if not solver.value(y[u.index])]
        added = sorted((u for u in outside if solver.value(y[u.index])), key=ffd_key)
        mark = state.mark()
        for unit in dropped:
            for run, _, node, devices in current[unit.index].pods:
                state.unplace(run.shape, node, devices)
        packed: list[tuple[Unit, Packed]] = []
        for unit in added:
            result = pack(state, unit.runs, scoring=unit.scoring, mix=mix)
            if not isinstance(result, Packed):
                break
            packed.append((unit, result))
        kept = {u.index for u in inside} - {u.index for u in dropped}
        if len(packed) == len(added):
            return (kept, packed), cuts
        # incremental did not fit: repack the whole new choice, hardest pods first
        state.undo(mark)
        for unit in inside:
            for run, _, node, devices in current[unit.index].pods:
                state.unplace(run.shape, node, devices)
        chosen = [u for u in inside if u.index in kept] + added
        repacked, left = pack_set(state, [(u.index, u.runs, u.scoring) for u in chosen], mix=mix)
        if not left:
            return (set(), [(u, repacked[u.index]) for u in chosen]), cuts
        state.undo(mark)
        # no-good: not this exchange again
        model.add(
            sum(y[u.index] for u in added) - sum(y[u.index] for u in dropped) <= len(added) - 1
        )
        cuts += 1
    return None, cuts


def _realise(
    assignment: dict[str, list[Unit]],
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    mix: Mix | None,
) -> tuple[Placed, list[tuple[str, list[Unit]]]]:
    """Pack the master's choice cluster by cluster; then fill with whatever else fits."""
    placed: Placed = []
    failures: list[tuple[str, list[Unit]]] = []
    done: set[int] = set()
    for cluster, members in assignment.items():
        state = states[cluster]
        packed_here: list[Unit] = []
        for unit in sorted(members, key=ffd_key):
            result = pack(state, unit.runs, scoring=unit.scoring, mix=mix)
            if isinstance(result, Packed):
                placed.append((unit, cluster, result))
                packed_here.append(unit)
                done.add(unit.index)
            else:
                failures.append((cluster, [*packed_here, unit]))
    for unit in sorted((u for u in units if u.index not in done), key=ffd_key):
        choice = choose_and_pack("greedy", unit, states, unit.allowed(), mix=mix)
        if choice.packed is not None and choice.cluster is not None:
            placed.append((unit, choice.cluster, choice.packed))
    return placed, failures
