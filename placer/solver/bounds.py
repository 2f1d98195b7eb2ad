"""Upper bounds on what any placement can achieve (benchmark-design B.5), with GLOP.

All in GPUs (whole GPUs plus shares), so results can be shown as a percentage of the tightest:

* ``capacity_gpu`` (B0, computed by the caller): min(demand, free GPU capacity);
* ``cluster_lp_gpu`` (B2): ``x[u, c] ∈ [0, 1]`` for each unit and each cluster it may
  statically use, ``Σ_c x[u, c] ≤ 1``, cluster totals per resource
  (:mod:`placer.solver.capacity`);
* ``node_lp_gpu`` (B3): the node-aware rows with slot and shape cuts, and no variable where a
  unit cannot fit alone on the cluster's nodes;
* ``class_lp_gpu``: the node-class LP (:mod:`placer.solver.classlp`): pods assigned to classes
  of identical nodes, per-class capacity, slot and shape cuts — it sees that spare cpu on one
  node type cannot feed idle GPUs on another;
* ``tightest_gpu``: the least of them.

Each is a relaxation of node-level placement (proofs in the modules named), so each is an
upper bound on the GPUs any node-feasible placement of the decision places. Pure: reads the
states and does not change them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from placer.solver.capacity import Row, cluster_rows
from placer.solver.classlp import ClassLP, class_lp
from placer.solver.lp import LinearProgram
from placer.solver.problem import Unit, identical_units
from placer.solver.runs import RunTable
from placer.solver.state import ClusterState, IntArray

__all__ = ["BOUND_KEYS", "gpu_class_lp", "lp_bounds"]

#: the GPU bounds a decision reports (``summary.bound``), weakest first.
BOUND_KEYS = ("capacity_gpu", "cluster_lp_gpu", "node_lp_gpu", "class_lp_gpu")


def lp_bounds(
    states: Mapping[str, ClusterState],
    units: Sequence[Unit],
    *,
    classes: ClassLP | None = None,
) -> tuple[dict[str, float], ClassLP]:
    """``{cluster_lp_gpu, node_lp_gpu, class_lp_gpu}`` (GPUs), and the class LP's solution.
    ``classes``: the class LP maximising placed GPU thousandths over the same states and
    live units, when the caller has solved it already."""
    result: dict[str, float] = {}
    live = [u for u in units if u.problem is None and u.rank]
    representatives, multiplicity = identical_units(live)
    table = RunTable(representatives)
    everyone = np.arange(len(table), dtype=np.int64)
    for node_aware, prefix in ((False, "cluster_lp"), (True, "node_lp")):
        pairs: list[tuple[Unit, str]] = []
        rows: list[Row] = []
        for name, state in states.items():
            allowed = np.array([name in u.rank for u in representatives], dtype=bool)
            if node_aware:
                allowed[allowed] = table.fit_alone(state, everyone[allowed])
            members = [representatives[k] for k in np.flatnonzero(allowed).tolist()]
            pairs += [(u, name) for u in members]
            rows += cluster_rows(
                state, members, node_aware=node_aware, multiplicity=multiplicity, table=table
            )
        result[f"{prefix}_gpu"] = _gpus(_solve(pairs, rows, multiplicity))
    if classes is None:
        classes = gpu_class_lp(states, live)
    result["class_lp_gpu"] = _gpus(classes.objective)
    return result, classes


def gpu_class_lp(states: Mapping[str, ClusterState], units: Sequence[Unit]) -> ClassLP:
    """The node-class LP maximising placed GPU thousandths: the bound, and the batch
    solver's guide (:mod:`placer.solver.portfolio`)."""
    return class_lp(states, units, lambda unit, _: float(unit.milli))


def _gpus(milli: float) -> float:
    """GPUs from thousandths, rounded up at the third decimal (a bound stays a bound)."""
    return -(-round(milli, 3) // 1) / 1000.0


def _solve(
    pairs: list[tuple[Unit, str]], rows: list[Row], multiplicity: Mapping[int, int]
) -> float:
    """Most GPU thousandths the LP over ``pairs`` and ``rows`` places (a pair's unit stands
    for ``multiplicity`` identical units)."""
    lp = LinearProgram()
    first = lp.vars(
        np.array([multiplicity.get(u.index, 1) for u, _ in pairs], dtype=np.float64),
        np.array([u.milli for u, _ in pairs], dtype=np.float64),
    )
    # the variable of each unit index in each cluster
    size = max((u.index for u, _ in pairs), default=-1) + 1
    var: dict[str, IntArray] = {}
    by_unit: dict[int, list[int]] = {}
    for k, (u, c) in enumerate(pairs):
        column = var.get(c)
        if column is None:
            column = var[c] = np.full(size, -1, dtype=np.int64)
        column[u.index] = first + k
        by_unit.setdefault(u.index, []).append(first + k)
    for index, variables in by_unit.items():
        if len(variables) > 1:
            lp.row(variables, [1.0] * len(variables), upper=float(multiplicity.get(index, 1)))
    for row in rows:
        column = var.get(row.cluster)
        if column is None:
            continue
        ids = column[row.units]
        keep = ids >= 0
        if keep.any():
            lp.row(
                ids[keep].tolist(),
                row.coefs[keep].astype(np.float64).tolist(),
                upper=float(row.rhs),
            )
    solution = lp.solve()
    if solution is None:  # pragma: no cover - bounded and feasible (x = 0)
        return float(sum(u.milli for u, _ in pairs))
    return solution.objective
