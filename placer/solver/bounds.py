"""Upper bounds on what any placement can achieve (benchmark-design B2 and B3), with GLOP.

``x[u, c] ∈ [0, 1]`` for each unit and each cluster it may statically use, ``Σ_c x[u, c] ≤ 1``,
and the capacity rows of :mod:`placer.solver.capacity`:

* **cluster LP (B2)**: cluster totals only;
* **node-aware LP (B3)**: the node-aware rows with slot cuts, and no variable where a unit
  cannot fit alone on the cluster's nodes.

Each LP maximises placed GPU thousandths (whole GPUs and shares), so results can be shown as
a percentage of the tightest bound. Pure: it reads the
states and does not change them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ortools.linear_solver import pywraplp

from placer.solver.capacity import Row, cluster_rows, infeasible_alone
from placer.solver.problem import Unit
from placer.solver.state import ClusterState

__all__ = ["lp_bounds"]


def lp_bounds(states: Mapping[str, ClusterState], units: Sequence[Unit]) -> dict[str, float]:
    """``{cluster_lp_gpu, node_lp_gpu}``: most GPUs any placement can place (in GPUs)."""
    result: dict[str, float] = {}
    live = [u for u in units if u.problem is None]
    for node_aware, prefix in ((False, "cluster_lp"), (True, "node_lp")):
        pairs: list[tuple[Unit, str]] = []
        rows: list[Row] = []
        for name, state in states.items():
            members = [
                u
                for u in live
                if name in u.rank and not (node_aware and infeasible_alone(state, u))
            ]
            pairs += [(u, name) for u in members]
            rows += cluster_rows(state, members, node_aware=node_aware)
        result[f"{prefix}_gpu"] = round(_solve(pairs, rows, live) / 1000.0, 3)
    return result


def _solve(pairs: list[tuple[Unit, str]], rows: list[Row], units: Sequence[Unit]) -> float:
    """Most GPU thousandths the LP places."""
    if not pairs:
        return 0.0
    solver = pywraplp.Solver.CreateSolver("GLOP")
    x = {(u.index, c): solver.NumVar(0.0, 1.0, "") for u, c in pairs}
    by_unit: dict[int, list[Any]] = {}
    for (u, _), var in x.items():
        by_unit.setdefault(u, []).append(var)
    for variables in by_unit.values():
        if len(variables) > 1:
            constraint = solver.Constraint(-solver.infinity(), 1.0)
            for var in variables:
                constraint.SetCoefficient(var, 1.0)
    for row in rows:
        constraint = solver.Constraint(-solver.infinity(), float(row.rhs))
        for u, a in row.coef.items():
            var = x.get((u, row.cluster))
            if var is not None:
                constraint.SetCoefficient(var, float(a))
    milli = {u.index: u.milli for u in units}
    objective = solver.Objective()
    for (u, _), var in x.items():
        objective.SetCoefficient(var, float(milli[u]))
    objective.SetMaximization()
    if solver.Solve() != pywraplp.Solver.OPTIMAL:  # pragma: no cover - a bounded LP
        return float(sum(milli[u] for u in by_unit))
    return float(objective.Value())
