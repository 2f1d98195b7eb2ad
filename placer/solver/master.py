"""Batch placement of one priority level: the hint portfolio, the CP-SAT master on small
models, and ruin and recreate on real node state until the deadline.

See the package docstring (:mod:`placer.solver`) for the model and how the parts run. The
caller charges each level's placements before solving the next, so a lower priority only
ever gets what the higher ones left (priorities are strictly lexicographic).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice

from placer._lazy import pandas_deferred
from placer.solver.bounds import gpu_class_lp
from placer.solver.capacity import cluster_rows, infeasible_alone
from placer.solver.classlp import ClassLP
from placer.solver.clock import Clock
from placer.solver.fragmentation import Mix
from placer.solver.heuristics import Placed, apply_placed, choose_and_pack, ffd_key
from placer.solver.packer import Packed, pack
from placer.solver.portfolio import (
    hint_order,
    run_portfolio,
    value_of,
)
from placer.solver.problem import Unit
from placer.solver.recreate import ruin_and_recreate
from placer.solver.state import ClusterState

with pandas_deferred():  # OR-Tools' CP-SAT wrapper, without the pandas it does not need here
    from ortools.sat.python import cp_model

__all__ = [
    "CPSAT_WORKERS",
    "DETERMINISTIC_PER_SECOND",
    "MASTER_SHARE",
    "MAX_ROUNDS",
    "PORTFOLIO_SHARE",
    "LevelResult",
    "model_pairs",
    "solve_level",
]

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
#: share of the level's time the hint portfolio may use for passes after its first (the
#: rest goes to ruin and recreate, which gains more per second once a hint exists; how the
#: value was chosen: simulations/README.md, "Behind the code's constants").
PORTFOLIO_SHARE = 0.3
#: share of the time left after the portfolio that the CP-SAT master may use on a small model
#: (it proves small instances optimal well within it; when it does not, ruin and recreate
#: gains more with the rest; simulations/README.md, "Behind the code's constants").
MASTER_SHARE = 0.3
#: master solve / realise / cut rounds at most.
MAX_ROUNDS = 4


@dataclass
class LevelResult:
    """The realised placements of one level and how they were found."""

    placed: Placed
    #: ``optimal`` (the master was proven optimal and fully realised, or a hint placed every
    #: unit in its first-choice cluster, or the one unit of the level is in the best-ranked
    #: cluster where it packs), ``feasible`` (CP-SAT or the search improved on the hint),
    #: ``fallback`` (the portfolio's best hint was kept).
    status: str
    #: CP-SAT's proven bound on the level's placed value, from the first (cut-free) master.
    bound: float | None = None
    rounds: int = 0
    cuts: int = 0
    notes: list[str] = field(default_factory=list)
    #: the node-class LP that guided the hint (GPU objective, on the level's capacity).
    guide: ClassLP | None = None


def solve_level(
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    deadline: float,
    clock: Clock,
    seed: int,
    mix: Mix | None,
    guide: Callable[[], ClassLP | None] | None = None,
    reserve: Callable[[int], float] | None = None,
    before_search: Callable[[], None] | None = None,
) -> LevelResult:
    """Place ``units`` (one priority level) on ``states``; leaves the placements applied.

    ``deadline`` is a reading of ``clock`` (seconds of the decision) at which to stop;
    ``guide`` gives the node-class LP of the level (solved when first asked; default: solved
    here), ``None`` when it is not to be used; ``reserve(n)``: seconds the search leaves
    before the deadline when ``n`` units are unplaced (for what runs after it);
    ``before_search``: called before ruin and recreate starts with units unplaced (the
    decision's remaining bounds are solved then, inside the limit).
    """
    if guide is None:
        solved: list[ClassLP] = []

        def guide() -> ClassLP | None:
            if not solved:
                solved.append(gpu_class_lp(states, units))
            return solved[0]

    marks = {name: state.mark() for name, state in states.items()}

    def reset() -> None:
        for name, state in states.items():
            state.undo(marks[name])

    start = clock()
    hints = run_portfolio(
        units,
        states,
        mix=mix,
        clock=clock,
        deadline=start + PORTFOLIO_SHARE * (deadline - start),
        passes=hint_order(units, states),
        guide=guide,
        hard_deadline=deadline - (reserve(0) if reserve is not None else 0.0),
    )
    best = hints.best
    result = LevelResult(placed=best, status="fallback", notes=hints.notes, guide=hints.guide)
    if len(best) == len(units) and all(u.rank[c] == 0 for u, c, _ in best):
        apply_placed(states, best)
        result.status = "optimal"
        result.notes.append("a hint placed every unit in its first-choice cluster")
        return result
    if len(units) == 1 and hints.winner == "greedy":
        # one unit: greedy tried its clusters best preference first and kept the first where
        # it packs (or found none): no answer ranks better
        apply_placed(states, best)
        result.status = "optimal" if best else "fallback"
        result.notes.append("one unit, in the best-ranked cluster where it packs")
        return result
    # past the deadline (a busy machine) neither the master nor the search runs: no pairs
    late = clock() >= deadline
    pairs = model_pairs((() if late else units), states)
    if not late and len(pairs) <= SMALL_MODEL:
        now = clock()
        margin = 1.5 * hints.pass_seconds
        until = min(deadline - margin, now + MASTER_SHARE * (deadline - now))
        _global_master(result, pairs, units, states, reset, until, clock, seed, mix)
    if result.status != "optimal":
        # the search stops at the GPU bound: the LP's (solved now if the portfolio did not)
        result.guide = guide()
        if before_search is not None and len(result.placed) < len(units):
            before_search()
        _improve(
            result,
            units,
            states,
            deadline=deadline,
            clock=clock,
            seed=seed,
            mix=mix,
            reserve=reserve,
        )
    apply_placed(states, result.placed)
    return result


def model_pairs(
    units: Sequence[Unit], states: dict[str, ClusterState], *, limit: int = SMALL_MODEL
) -> list[tuple[Unit, str]]:
    """The master's (unit, cluster) pairs — each allowed cluster where the unit fits alone —
    or, when there are more than ``limit``, the first ``limit + 1`` of them: the master runs
    on small models only, and checking every pair of a big level took the search's time
    (openb-16: 11,000 pairs, 0.017 s of a 1-s decision, against 0.001 s for 401)."""
    found = (
        (unit, name)
        for unit in units
        for name in unit.allowed()
        if name in states and not infeasible_alone(states[name], unit)
    )
    return list(islice(found, limit + 1))


def _improve(
    result: LevelResult,
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    deadline: float,
    clock: Clock,
    seed: int,
    mix: Mix | None,
    reserve: Callable[[int], float] | None,
) -> None:
    """Node-realised improvement of ``result.placed`` until the deadline: ruin and recreate
    (:mod:`placer.solver.recreate`) from the best answer so far."""
    if clock() >= deadline:
        return
    searched, gains = ruin_and_recreate(
        result.placed,
        units,
        states,
        mix=mix,
        clock=clock,
        deadline=deadline,
        seed=seed,
        gpu_bound=result.guide.objective if result.guide is not None else None,
        reserve=reserve,
    )
    if value_of(searched) > value_of(result.placed):
        result.placed = searched
        result.status = "feasible"
        result.notes.append(f"improved by ruin and recreate ({gains} gains)")


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
            terms = zip(row.units.tolist(), row.coefs.tolist(), strict=True)
            model.add(sum(x[(u, name)] * a for u, a in terms) <= row.rhs)
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
