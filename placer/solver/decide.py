"""``solve``: one placement decision, from workloads and fleet to a :class:`Decision`.

Orchestrates the parts: problem building, bounds, the chosen solver in the chosen mode, the
explanations of every refusal, and the assembly of the model's Decision. Pure: reads its
arguments only, returns a new object.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from placer.model import (
    Decision,
    DecisionSummary,
    Fleet,
    Placement,
    PodAssignment,
    PodDemand,
    Unplaced,
    Workload,
    pods_requests,
)
from placer.policy import PlacementPolicy
from placer.solver import MODES, SOLVERS
from placer.solver.bounds import BOUND_KEYS, gpu_class_lp, lp_bounds
from placer.solver.classlp import ClassLP
from placer.solver.clock import Clock
from placer.solver.elastic import elastic_slack
from placer.solver.elastic import grow as grow_elastic
from placer.solver.explain import RunReasons, why_not
from placer.solver.heuristics import Placed, failure_basis, run_rule
from placer.solver.master import solve_level
from placer.solver.packer import Packed, pack
from placer.solver.problem import Problem, Unit, build_problem, identical_units
from placer.solver.state import ClusterState

__all__ = ["MODES", "SOLVERS", "solve"]

#: share of the time limit the search leaves unused, a margin for the clocks' granularity and
#: for what the reserve below does not count (the verifier is not part of a decision).
SAFETY = 0.02
#: what runs after the search, kept from its time: the explanations — a fixed part, then per
#: (unplaced unit, cluster) pair, less per pair beyond ``EXPLAIN_PAIRS`` as their caches
#: fill — and the Decision's assembly, per pod (the measured costs behind these values:
#: simulations/README.md, "Behind the code's constants").
EXPLAIN_SECONDS = 0.01
EXPLAIN_SECONDS_PER_PAIR = 2e-5
EXPLAIN_PAIRS = 2000
EXPLAIN_SECONDS_PER_MORE_PAIR = 5e-6
ASSEMBLY_SECONDS_PER_POD = 3e-6
#: the LP bounds (cluster, node-aware and node-class LPs) are solved when their estimated
#: cost, per (group of identical units, allowed cluster) pair, fits in ``LP_SHARE`` of the
#: time limit (GLOP's simplex grows faster than the pairs; the measured costs:
#: simulations/README.md, "Behind the code's constants"). Otherwise a decision reports
#: ``capacity_gpu`` only and the batch search goes without the LP's guidance.
LP_SECONDS_PER_PAIR = 5e-5
LP_SHARE = 0.3
#: candidate nodes per pod for fragmentation scoring in batch mode (online: the mix default).
BATCH_FGD_CANDIDATES = 48


def solve(
    workloads: Sequence[Workload],
    fleet: Fleet,
    *,
    policies: Sequence[PlacementPolicy] = (),
    solver: str = "cpsat",
    mode: str = "batch",
    time_limit: float = 1.0,
    seed: int = 0,
    pod_mix: Sequence[tuple[PodDemand, float]] = (),
    exclusions: Mapping[int, Mapping[str, str]] | None = None,
    grow: bool = True,
) -> Decision:
    """Decide where each workload goes (see :mod:`placer.solver`).

    Args:
        workloads: decomposed workloads, in arrival order (online mode follows it).
        fleet: node-level free capacity of the member clusters.
        policies: PlacementPolicies; the first one selecting a workload applies to it.
        solver: one of ``SOLVERS``.
        mode: ``batch`` (jointly) or ``online`` (one at a time, in order).
        time_limit: seconds for the whole decision, on the process's CPU clock with the wall
            clock as a safety net at 3 x the limit (:mod:`placer.solver.clock`); the search
            gets most of it.
        seed: CP-SAT's random seed; identical input and seed give identical decisions.
        pod_mix: typical pod shapes and weights for fragmentation-aware node scoring
            (online mode); default: the pods of ``workloads``.
        exclusions: per workload (index in ``workloads``), clusters it may not use and why,
            beyond policies and pins (:mod:`placer.solver.fairshare`'s cluster limits).
        grow: raise elastic components above their minimum on what the decision left (term
            (3') of the model, :mod:`placer.solver.elastic`); ``False`` for a caller that grows
            them itself after several calls (fair share's tiers).

    Raises:
        ValueError: an unknown solver or mode, or a time limit that is not positive.
    """
    # the cyclic garbage collector waits until the decision is made: a full collection of a
    # large process (tens of milliseconds) would otherwise land anywhere in the time limit,
    # the explanations and the Decision's assembly included. Reference counting still frees
    # what the decision drops; the collector's state is restored whatever happens.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _solve(
            workloads, fleet, policies, solver, mode, time_limit, seed, pod_mix, exclusions, grow
        )
    finally:
        if collecting:
            gc.enable()


def _solve(
    workloads: Sequence[Workload],
    fleet: Fleet,
    policies: Sequence[PlacementPolicy],
    solver: str,
    mode: str,
    time_limit: float,
    seed: int,
    pod_mix: Sequence[tuple[PodDemand, float]],
    exclusions: Mapping[int, Mapping[str, str]] | None,
    grow: bool,
) -> Decision:
    started = time.perf_counter()
    clock = Clock()
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose batch or online")
    if not time_limit > 0:
        raise ValueError(f"the time limit must be positive, got {time_limit!r}")
    problem = build_problem(workloads, fleet, policies, mix=pod_mix, exclusions=exclusions)
    pristine = {name: state.copy() for name, state in problem.states.items()}
    if problem.mix is not None and mode == "batch":
        # the portfolio's fragmentation-scored pass scores many pods: fewer candidates
        problem.mix = replace(problem.mix, candidates=BATCH_FGD_CANDIDATES)
    for unit in problem.units:
        # node choice: spread when the policy asks; otherwise FGD's fragmentation scoring
        # online (pods arrive one by one) and best-fit in batch (the decision chooses the
        # whole set; see the package docstring)
        unit.scoring = (
            "spread" if unit.objective == "spread" else "fgd" if mode == "online" else "bestfit"
        )
    live = [u for u in problem.units if u.rank]
    failures: dict[int, dict[str, str]] = {}
    bounds = DecisionBounds(pristine, live, time_limit)
    cpsat_bound: float | None = None
    if not live:
        placed: Placed = []
        status = "trivial"
    elif mode == "online":
        placed = _online(problem, live, solver, failures)
        status = "feasible"
    elif solver == "cpsat":
        placed, status, cpsat_bound = _batch_cpsat(problem, live, clock, time_limit, seed, bounds)
    else:
        placed = _batch_rule(problem, live, solver, failures)
        status = "feasible"
    if grow and any(w.elastic for w in workloads):
        placed = grow_elastic(problem, placed, relocate=True)  # term (3') of the model
    bound = bounds.report(problem, placed)
    proven_empty = (
        bool(live) and not placed and bound["tightest_gpu"] * 1000 < min(u.milli for u in live)
    )
    if solver == "cpsat" and mode == "batch" and status != "optimal" and proven_empty:
        # a valid bound below every unit's GPUs: no unit can be placed, so placing none is
        # proven optimal (not a hint the search could not improve)
        status = "optimal"
    if cpsat_bound is not None:
        bound["cpsat_value"] = round(cpsat_bound, 3)
    # a decision whose limit is spent (a busy machine, a huge batch) explains without trial
    # packings, which can cost many times the limit when thousands of units are refused
    tried = clock() < time_limit
    reasons = _explain(problem, pristine, placed, failures, solver, mode, try_pack=tried)
    return _decision(problem, placed, reasons, solver, mode, status, started, bound)


class DecisionBounds:
    """The decision's GPU bounds (:mod:`placer.solver.bounds`), on the capacity before it,
    each solved at most once: the node-class LP when the batch search first needs it (it
    guides the search, and is the ``class_lp_gpu`` bound when there is one priority level),
    the cluster and node-aware LPs before the search starts with units left unplaced (else
    they are not needed: see ``report``), at the latest when the decision is reported. The
    LPs are solved only when affordable (``LP_SHARE``)."""

    def __init__(
        self, pristine: dict[str, ClusterState], live: list[Unit], time_limit: float
    ) -> None:
        self.pristine = pristine
        self.live = live
        pairs = sum(len(u.rank) for u in identical_units(live)[0])
        self.affordable = pairs * LP_SECONDS_PER_PAIR <= LP_SHARE * time_limit
        self.values: dict[str, float] | None = None
        self.classes: ClassLP | None = None

    def solve(self) -> ClassLP | None:
        """The node-class LP over every live unit on the capacity before the decision, or
        ``None`` when the LPs are not affordable."""
        if self.affordable and self.classes is None:
            self.classes = gpu_class_lp(self.pristine, self.live)
        return self.classes

    def complete(self) -> None:
        """Every LP bound (when affordable)."""
        if self.affordable and self.values is None:
            self.values, self.classes = lp_bounds(self.pristine, self.live, classes=self.solve())

    def report(self, problem: Problem, placed: Placed) -> dict[str, float]:
        """``summary.bound``. When every live unit is placed and the LPs were not solved, each
        LP bound is exactly the placed GPUs (an LP bound is at least any placement and at
        most the demand), so none is solved."""
        bound: dict[str, float] = {}
        if self.live:
            if self.values is not None:
                bound = dict(self.values)
            elif len(placed) == len(self.live):
                milli = sum(u.milli for u in self.live)
                bound = dict.fromkeys(
                    ("cluster_lp_gpu", "node_lp_gpu", "class_lp_gpu"), milli / 1e3
                )
            elif self.affordable:
                self.complete()
                bound = dict(self.values or {})
        # the LPs see elastic runs at their minimum: what their extra pods can take is added to
        # every bound (a placement less its extra pods is one the LPs bound)
        slack = elastic_slack(problem, self.pristine)
        if slack:
            for key in ("cluster_lp_gpu", "node_lp_gpu", "class_lp_gpu"):
                if key in bound:
                    bound[key] = round(bound[key] + slack / 1000.0, 3)
        free_milli = sum(int(s.devfree[s.usable].sum()) for s in self.pristine.values())
        demand_milli = sum(u.milli for u in problem.units) + slack
        bound["capacity_gpu"] = min(free_milli, demand_milli) / 1000.0
        bound["tightest_gpu"] = min(bound[k] for k in BOUND_KEYS if k in bound)
        return bound


# --------------------------------------------------------------------------------------------
# modes


def _online(
    problem: Problem, live: list[Unit], solver: str, failures: dict[int, dict[str, str]]
) -> Placed:
    if solver != "cpsat":
        return _by_rule(problem, live, solver, failures)
    placed: Placed = []
    for unit in live:
        found = _best_cluster(problem, unit)
        if found is not None:
            placed.append((unit, *found))
    return placed


def _best_cluster(problem: Problem, unit: Unit) -> tuple[str, Packed] | None:
    """The single-unit master, solved exactly: the best-ranked clusters where the unit packs,
    and among equally ranked ones the lowest packing score (least fragmentation added)."""
    by_rank: dict[int, list[str]] = {}
    for name in unit.allowed():
        if name in problem.states:
            by_rank.setdefault(unit.rank[name], []).append(name)
    for rank in sorted(by_rank):
        best: tuple[float, str, Packed] | None = None
        for name in by_rank[rank]:
            state = problem.states[name]
            mark = state.mark()
            result = pack(state, unit.runs, scoring=unit.scoring, mix=problem.mix)
            state.undo(mark)
            if isinstance(result, Packed) and (best is None or result.score < best[0]):
                best = (result.score, name, result)
        if best is not None:
            _, name, packed = best
            state = problem.states[name]
            state.apply([packed.replay])
            return name, packed
    return None


def _batch_rule(
    problem: Problem, live: list[Unit], solver: str, failures: dict[int, dict[str, str]]
) -> Placed:
    """A baseline over all levels: units by priority, then the rule's batch order."""
    placed: Placed = []
    for level in sorted({u.priority for u in live}, reverse=True):
        members = [u for u in live if u.priority == level]
        placed += run_rule(solver, members, problem.states, mix=problem.mix, failures=failures)
    return placed


def _by_rule(
    problem: Problem, ordered: list[Unit], solver: str, failures: dict[int, dict[str, str]]
) -> Placed:
    """Units one at a time in ``ordered`` by a baseline rule; records the rules' refusals."""
    return run_rule(
        solver, ordered, problem.states, mix=problem.mix, failures=failures, ordered=True
    )


def _batch_cpsat(
    problem: Problem,
    live: list[Unit],
    clock: Clock,
    time_limit: float,
    seed: int,
    bounds: DecisionBounds,
) -> tuple[Placed, str, float | None]:
    """All levels, highest priority first; returns the placements, the status and CP-SAT's
    value bound (one level only)."""
    levels = sorted({u.priority for u in live}, reverse=True)
    end = time_limit * (1 - SAFETY)
    clusters = len(problem.states)
    pods = sum(u.pods for u in live)

    def reserve(unplaced: int) -> float:
        """Seconds to keep for what runs after the search, with ``unplaced`` units left."""
        pairs = unplaced * clusters
        return (
            EXPLAIN_SECONDS
            + EXPLAIN_SECONDS_PER_PAIR * min(pairs, EXPLAIN_PAIRS)
            + EXPLAIN_SECONDS_PER_MORE_PAIR * max(0, pairs - EXPLAIN_PAIRS)
            + ASSEMBLY_SECONDS_PER_POD * pods
        )

    placed: Placed = []
    statuses = []
    value_bound: float | None = None
    remaining_units = len(live)
    for level in levels:
        members = [u for u in live if u.priority == level]
        now = clock()
        left = end - now
        deadline = now + max(0.0, left) * len(members) / remaining_units
        remaining_units -= len(members)
        result = solve_level(
            members,
            problem.states,
            deadline=deadline,
            clock=clock,
            seed=seed,
            mix=problem.mix,
            guide=_guide(bounds, members, problem.states, single=len(levels) == 1),
            reserve=reserve,
            before_search=bounds.complete,
        )
        placed += result.placed
        statuses.append(result.status)
        if len(levels) == 1:
            value_bound = result.bound
    if all(s == "optimal" for s in statuses):
        status = "optimal"
    elif any(s in ("optimal", "feasible") for s in statuses):
        status = "feasible"
    else:
        status = "fallback"
    return placed, status, value_bound


def _guide(
    bounds: DecisionBounds,
    members: list[Unit],
    states: dict[str, ClusterState],
    *,
    single: bool,
) -> Callable[[], ClassLP | None]:
    """The node-class LP a level's search asks for, solved when first asked: with one
    priority level the decision's own (solved with its bounds), else the level's on the
    capacity the levels above left (and the decision's bounds with it, first)."""
    solved: list[ClassLP | None] = []

    def guide() -> ClassLP | None:
        if not solved:
            decision = bounds.solve()
            if single or decision is None:
                solved.append(decision)
            else:
                solved.append(gpu_class_lp(states, members))
        return solved[0]

    return guide


# --------------------------------------------------------------------------------------------
# explanations and the Decision


def _explain(
    problem: Problem,
    pristine: dict[str, ClusterState],
    placed: Placed,
    failures: dict[int, dict[str, str]],
    solver: str,
    mode: str,
    *,
    try_pack: bool = True,
) -> dict[int, dict[str, str]]:
    """Reasons per unplaced unit and cluster (fleet order); see :mod:`placer.solver.explain`.
    ``try_pack=False``: no trial packings (the decision's time limit is spent)."""
    done = {u.index for u, _, _ in placed}
    unplaced = [u for u in problem.units if u.index not in done]
    if not unplaced:
        return {}
    where: dict[str, list[Unit]] = {}
    for unit, name, _ in placed:
        where.setdefault(name, []).append(unit)
    final: dict[int, dict[str, str | None]] = {}
    cache: RunReasons = {}
    for unit in unplaced:
        final[unit.index] = {
            name: why_not(problem.states[name], unit, try_pack=try_pack, cache=cache)
            for name in unit.rank
            if name in problem.states
        }
    reasons: dict[int, dict[str, str]] = {}
    #: (cluster, priority) -> the units placed there with a higher priority
    above: dict[tuple[str, int], list[Unit]] = {}
    for unit in unplaced:
        texts: dict[str, str] = {}
        for cluster in problem.fleet.clusters:
            name = cluster.name
            if name in unit.excluded:
                texts[name] = unit.excluded[name]
                continue
            now = final[unit.index].get(name)
            if name in failures.get(unit.index, {}):
                failure = failures[unit.index][name]
                texts[name] = f"{failure_basis(failure)}, but {now}" if now else failure
                continue
            if name not in problem.states:
                texts[name] = "the cluster has no nodes"
                continue
            before = why_not(pristine[name], unit, try_pack=False, cache=cache)
            if before is not None:
                texts[name] = before
                continue
            key = (name, unit.priority)
            higher = above.get(key)
            if higher is None:
                higher = above[key] = [u for u in where.get(name, []) if u.priority > unit.priority]
            if higher:
                names = ", ".join(u.label for u in higher[:3])
                more = f" and {len(higher) - 3} more" if len(higher) > 3 else ""
                texts[name] = f"displaced by higher-priority workloads ({names}{more})"
            elif now is None and not try_pack:
                texts[name] = (
                    f"{solver} did not choose this cluster; whether the workload packs on its "
                    "nodes was not checked (the decision's time limit ran out)"
                )
            elif now is None:
                texts[name] = f"fits, but {solver} did not choose this cluster"
            elif mode == "online":
                texts[name] = f"capacity taken by workloads placed before it: {now}"
            else:
                texts[name] = f"capacity went to other workloads of this decision: {now}"
        if not problem.fleet.clusters:
            texts["(fleet)"] = unit.problem or "the fleet has no clusters"
        reasons[unit.index] = texts
    return reasons


def _decision(
    problem: Problem,
    placed: Placed,
    reasons: dict[int, dict[str, str]],
    solver: str,
    mode: str,
    status: str,
    started: float,
    bound: dict[str, float],
) -> Decision:
    workloads = problem.workloads
    placements: list[Placement] = []
    for unit, cluster, packed in sorted(placed, key=lambda item: item[0].index):
        node_names = problem.states[cluster].node_names
        pods: dict[int, list[PodAssignment]] = {i: [] for i in unit.members}
        for run, index, node, devices in packed.pods:
            component = run.component
            pods[run.workload].append(
                PodAssignment(
                    component=component.name,
                    instance=component.instance,
                    index=index,
                    node=node_names[node],
                    requests=component.pod.requests,
                    devices=devices,
                )
            )
        for member in unit.members:
            workload = workloads[member]
            assigned = tuple(sorted(pods[member], key=lambda p: (p.component, p.instance, p.index)))
            placements.append(
                Placement(
                    workload=workload.ref,
                    cluster=cluster,
                    pods=assigned,
                    requests=(
                        pods_requests(assigned) if workload.elastic else workload.total_requests()
                    ),
                )
            )
    position: dict[object, int] = {}
    for i, workload in enumerate(workloads):
        position.setdefault(workload.ref, i)
    placements.sort(key=lambda p: position.get(p.workload, 0))
    done = {u.index for u, _, _ in placed}
    unplaced = []
    for unit in problem.units:
        if unit.index in done:
            continue
        texts = reasons.get(unit.index, {})
        prefix = f"{unit.label}: " if len(unit.members) > 1 else ""
        for member in unit.members:
            unplaced.append(
                Unplaced(
                    workload=workloads[member].ref,
                    reasons={c: prefix + t for c, t in texts.items()},
                )
            )
    unplaced.sort(key=lambda u: position.get(u.workload, 0))
    demand: dict[str, int] = {}
    placed_total: dict[str, int] = {}
    placed_by_ref = {p.workload: p for p in placements}
    for workload in workloads:
        for name, amount in workload.largest_requests().items():
            demand[name] = demand.get(name, 0) + amount
        placement = placed_by_ref.get(workload.ref)
        if placement is not None:
            for name, amount in placement.requests.items():
                placed_total[name] = placed_total.get(name, 0) + amount
    summary = DecisionSummary(
        solver=solver,
        mode=mode,
        status=status,
        seconds=round(time.perf_counter() - started, 4),
        workloads=len(workloads),
        placed=len(placements),
        demand=demand,
        placed_requests=placed_total,
        bound=bound,
    )
    return Decision(placements=tuple(placements), unplaced=tuple(unplaced), summary=summary)
