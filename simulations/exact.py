"""The node-level CP-SAT model (benchmark-design B.5, "B4"): an exact optimum, or a proven
upper bound, for small instances. Benchmark tooling only; the solver never runs it.

Model: ``z[u, c] ∈ {0, 1}`` for each unit and each cluster it may use; ``p[s, n] ∈ ℕ`` pods
of shape ``s`` (demand and eligibility) on node ``n``, only where ``s`` is eligible and fits
alone, at most the copies that fit. Pods of one shape are interchangeable between units,
so ``Σ_{n ∈ c} p[s, n] = Σ_{runs r of shape s} n_r z[u(r), c]`` says exactly that every pod of
a placed unit has a node of its cluster. Per node and resource, ``Σ_s a_s p[s, n] ≤ free``;
whole GPUs ``Σ_s g_s p[s, n] ≤`` idle devices; GPU thousandths ``Σ_s μ_s p[s, n] ≤`` free
thousandths. ``Σ_c z[u, c] ≤ 1``; maximise placed GPU thousandths.

For whole-GPU pods this is the node-level problem itself (which idle devices a pod gets does
not matter). Shared-GPU pods are pooled per node (a share may straddle devices), which
relaxes the problem: the optimum is then an upper bound and the solution may not be
realisable. Either way CP-SAT's best objective bound is a valid upper bound on what any
placement achieves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from placer.model import Decision, Fleet, Workload
from placer.solver.capacity import infeasible_alone
from placer.solver.classlp import shape_key
from placer.solver.problem import build_problem
from placer.solver.state import PodShape

__all__ = ["NodeLevel", "node_level"]


@dataclass(frozen=True)
class NodeLevel:
    """CP-SAT's answer on the node-level model, in GPUs."""

    status: str
    #: GPUs of the best solution found (a placement when no pod shares a GPU).
    best_gpu: float
    #: the proven upper bound.
    bound_gpu: float
    seconds: float
    #: whether the model is exact (no shared-GPU pods).
    exact: bool


def node_level(
    workloads: Sequence[Workload],
    fleet: Fleet,
    *,
    time_limit: float,
    seed: int = 0,
    hint: Decision | None = None,
    workers: int = 2,
) -> NodeLevel:
    """Solve the node-level model (see module docstring), from ``hint``'s placements."""
    problem = build_problem(workloads, fleet, ())
    units = [u for u in problem.units if u.rank]
    model = cp_model.CpModel()
    z: dict[tuple[int, str], cp_model.IntVar] = {}
    shapes: dict[tuple[bytes, int, int, object], int] = {}
    exact = True
    for unit in units:
        for run in unit.runs:
            shapes.setdefault(shape_key(run.shape), len(shapes))
            exact &= run.shape.share == 0
    by_ref = {w.ref: i for i, w in enumerate(workloads)}
    where = {by_ref[p.workload]: p.cluster for p in hint.placements} if hint else {}
    for name, state in problem.states.items():
        members = [u for u in units if name in u.rank and not infeasible_alone(state, u)]
        if not members:
            continue
        for unit in members:
            var = model.new_bool_var(f"z{unit.index}_{name}")
            z[(unit.index, name)] = var
            model.add_hint(var, all(where.get(m) == name for m in unit.members))
        demand: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
        first: dict[int, PodShape] = {}
        for unit in members:
            for run in unit.runs:
                sid = shapes[shape_key(run.shape)]
                demand.setdefault(sid, []).append((run.count, z[(unit.index, name)]))
                first.setdefault(sid, run.shape)
        usable = np.flatnonzero(state.usable)
        per_node: dict[int, list[tuple[PodShape, cp_model.IntVar]]] = {int(n): [] for n in usable}
        for sid, terms in demand.items():
            shape = first[sid]
            copies = state.copies_all(shape)
            pods = []
            for n in usable.tolist():
                if copies[n] > 0:
                    var = model.new_int_var(0, int(copies[n]), f"p{sid}_{n}")
                    pods.append(var)
                    per_node[n].append((shape, var))
            model.add(sum(pods) == sum(count * var for count, var in terms))
        for n, items in per_node.items():
            if not items:
                continue
            for k in range(len(state.names)):
                coef = [(int(s.req[k]), v) for s, v in items if int(s.req[k])]
                if coef:
                    model.add(sum(a * v for a, v in coef) <= int(state.free[n, k]))
            whole = [(s.gpus, v) for s, v in items if s.gpus]
            if whole:
                model.add(sum(g * v for g, v in whole) <= int(state.full[n]))
            milli = [(s.milli, v) for s, v in items if s.milli]
            if milli:
                model.add(sum(m * v for m, v in milli) <= int(state.devfree[n]))
    options: dict[int, list[cp_model.IntVar]] = {}
    for (u, _), var in z.items():
        options.setdefault(u, []).append(var)
    for variables in options.values():
        model.add_at_most_one(variables)
    milli_of = {u.index: u.milli for u in units}
    model.maximize(sum(milli_of[u] * var for (u, _), var in z.items()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    status = solver.solve(model)
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return NodeLevel(
        status=solver.status_name(status),
        best_gpu=solver.objective_value / 1000 if found else 0.0,
        bound_gpu=solver.best_objective_bound / 1000,
        seconds=solver.wall_time,
        exact=exact,
    )
