"""The node-class LP: a relaxation of node-level placement that sees node types.

The cluster LP (B2) and the node-aware LP (B3, :mod:`placer.solver.capacity`) pool a
cluster's free capacity, so spare cpu on a 2-GPU box with 104 cores counts as if it were next
to the idle GPUs of a 96-core 8-GPU box. This LP keeps the nodes' types apart: nodes are
grouped into classes of identical nodes (:mod:`placer.solver.classes`) and pods are assigned
to classes, not to clusters.

Model
-----
Shapes ``s`` (distinct pod demands with their eligibility: scalar vector ``a_s``, whole GPUs
``g_s``, share ``m_s``, thousandths ``μ_s = 1000 g_s + m_s``); a run ``r`` of unit ``u`` has
``n_r`` pods of shape ``s(r)``. Per cluster ``c`` the classes ``k`` of its usable nodes;
for a per-node quantity ``h``, ``h(k) = Σ_{n∈k} h(n)``. Variables: ``x_{u,c} ∈ [0, 1]`` for
each cluster ``c`` the unit may use (statically allowed, and each run fits alone,
:func:`~placer.solver.capacity.infeasible_alone`); ``y_{s,c,k} ∈ [0, cp_{s,k}]`` pods of shape
``s`` on class ``k`` of ``c``, only where ``s`` is eligible on ``k``, with ``cp_s(n)`` an upper
bound on the pods of ``s`` node ``n`` holds alone (``min_j ⌊f_{n,j}/a_{s,j}⌋``, ``⌊idle_n/g_s⌋``,
``Σ_d ⌊φ_{n,d}/m_s⌋``).

* one cluster per unit: ``Σ_c x_{u,c} ≤ 1``;
* every pod has a class: ``Σ_k y_{s,c,k} = Σ_{r: s(r)=s} n_r x_{u(r),c}`` for each ``s, c``;
* per class and scalar resource ``j``: ``Σ_s a_{s,j} y_{s,c,k} ≤ f_j(k)``;
* GPU thousandths ``Σ_s μ_s y ≤ φ(k)`` and idle devices ``Σ_s g_s y ≤ idle(k)``;
* device slots, for share sizes ``q``: ``Σ_s (g_s ⌊1000/q⌋ + ⌊m_s/q⌋) y ≤ Σ_{n∈k} Σ_d ⌊φ_{n,d}/q⌋``;
* scalar slots (cpu, memory; the largest pod sizes ``q``): ``Σ_s ⌊a_{s,j}/q⌋ y ≤
  Σ_{n∈k} ⌊f_{n,j}/q⌋``;
* shape cuts, for an anchor shape ``s`` eligible on ``k`` (the most frequent ones):
  ``Σ_{s' ⪰ s} y_{s',c,k} ≤ cp_s(k)``, where ``s' ⪰ s`` needs at least ``s`` in every scalar
  resource and, for GPUs, ``g_{s'} ≥ g_s`` (and, if ``s`` shares a device, ``g_{s'} > 0`` or
  ``m_{s'} ≥ m_s``).

Why it is a relaxation (every node-feasible placement is a feasible point with the same
objective): take a placement with ``z_{u,c} ∈ {0,1}`` and ``p_{s,n}`` pods of shape ``s`` on
node ``n``, node by node within capacity, devices within their thousandths. Set ``x = z`` and
``y_{s,c,k} = Σ_{n∈k} p_{s,n}``. The equality holds because each pod is on exactly one node of
its cluster, and ``y = 0`` where ``s`` is not eligible because no pod is on a node that refuses
it. Each class row is the sum over ``n ∈ k`` of a row that holds on node ``n``: the scalar and
thousandths rows are the node's capacities; a whole-GPU pod takes ``g`` idle devices; for the
slot rows, ``Σ_i ⌊a_i/q⌋ ≤ ⌊Σ_i a_i/q⌋ ≤ ⌊f/q⌋`` on each node (and on each device, where a
whole-GPU pod takes all ``1000`` of its devices); for a shape cut, replacing each pod of a
shape ``s' ⪰ s`` on ``n`` by a pod of ``s`` keeps the node feasible (every amount shrinks; a
share fits on the device the bigger pod used, or on one of its idle devices), so the node
holds at most ``cp_s(n)`` of them; and ``y ≤ cp_s(k)`` likewise. Coarse classes only sum the
same per-node rows over more nodes. Hence the LP optimum is an upper bound on any placement's
objective — with objective ``Σ μ_u x_{u,c}`` on placed GPU thousandths, the bound
``class_lp_gpu`` (at least as tight as the LP without the class split, since summing its
class rows gives the cluster's totals and slot rows).

Identical units (same pod runs, GPU thousandths and allowed clusters,
:func:`~placer.solver.problem.identical_units`) share one variable per cluster,
``X_{u,c} ∈ [0, m_u]`` with ``Σ_c X_{u,c} ≤ m_u`` for a group of ``m_u``: the LP is symmetric
in them and convex, so it has an optimum with equal values for all of them, and the
aggregated LP has the same optimum with fewer variables (many fewer where batches repeat
a few gang shapes). The per-unit ``x`` is read back by handing the group's shares to its units
one unit's worth at a time (``_spread``).

The same LP with the solver's value and preference objective guides the batch solver
(:mod:`placer.solver.master`): its ``x`` says which units go where, its ``y`` how many pods
of each shape each node class takes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from placer.solver.classes import NodeClasses, copies_per_node, node_classes
from placer.solver.lp import LinearProgram
from placer.solver.problem import Unit, unit_groups
from placer.solver.runs import RunTable
from placer.solver.state import ClusterState, IntArray, PodShape

__all__ = ["ClassLP", "class_lp", "shape_key"]

#: cpu and memory slot thresholds per class (the largest distinct pod sizes there).
SLOT_SIZES = 3
#: device slot thresholds per class (the largest distinct shares there).
DEVICE_SLOTS = 4
#: anchor shapes per cluster for shape cuts (the most frequent by pod count).
ANCHORS = 12


def shape_key(shape: PodShape) -> tuple[bytes, int, int, object]:
    """Identity of a pod shape for the LP: demand and eligibility."""
    return shape.ident


@dataclass
class ClassLP:
    """The LP's answer (``x``, ``y`` empty when GLOP found no optimum)."""

    #: the optimal objective (0 when there is nothing to place).
    objective: float
    #: ``x[u, c]`` of each unit and cluster variable.
    x: dict[tuple[int, str], float] = field(default_factory=dict)
    #: per cluster, the classes and ``y[s, k]`` (shape ids index ``shapes``).
    classes: dict[str, NodeClasses] = field(default_factory=dict)
    y: dict[str, dict[tuple[int, int], float]] = field(default_factory=dict)
    shapes: list[PodShape] = field(default_factory=list)
    #: the model's size, for reports.
    variables: int = 0
    rows: int = 0


def class_lp(
    states: Mapping[str, ClusterState],
    units: Sequence[Unit],
    weight: Callable[[Unit, str], float],
) -> ClassLP:
    """Solve the node-class LP maximising ``Σ weight(u, c) x[u, c]`` (see module docstring)."""
    result = ClassLP(objective=0.0)
    groups = unit_groups(units)
    representatives = [g[0] for g in groups]
    table = RunTable(representatives)
    result.shapes = table.shapes
    multiplicity = np.array([len(g) for g in groups], dtype=np.int64)
    everyone = np.arange(len(table), dtype=np.int64)
    lp = LinearProgram()
    #: per cluster: the positions of its members and their x variables (consecutive).
    x: dict[str, tuple[IntArray, int]] = {}
    y: dict[str, dict[tuple[int, int], int]] = {}
    for name, state in states.items():
        allowed = np.array([name in u.rank for u in representatives], dtype=bool)
        allowed[allowed] = table.fit_alone(state, everyone[allowed])
        members = np.flatnonzero(allowed)
        if members.size:
            y[name] = _cluster(lp, result, table, name, state, members, multiplicity, x, weight)
    by_unit: dict[int, list[int]] = {}
    for members, first in x.values():
        for offset, position in enumerate(members.tolist()):
            by_unit.setdefault(position, []).append(first + offset)
    for position, variables in by_unit.items():
        if len(variables) > 1:
            lp.row(variables, [1.0] * len(variables), upper=float(multiplicity[position]))
    result.variables, result.rows = lp.variables, lp.rows
    solution = lp.solve()
    if solution is None:  # pragma: no cover - bounded and feasible (x = 0)
        result.objective = float(
            sum(
                multiplicity[p] * max(0.0, weight(representatives[p], c))
                for c, (members, _) in x.items()
                for p in members.tolist()
            )
        )
        return result
    values = solution.values
    result.objective = solution.objective
    shares: dict[int, dict[str, float]] = {}
    for name, (members, first) in x.items():
        for position, value in zip(
            members.tolist(), values[first : first + len(members)].tolist(), strict=True
        ):
            shares.setdefault(position, {})[name] = value
    for position, group in enumerate(groups):
        result.x.update(_spread(group, shares.get(position, {})))
    for name, pairs in y.items():
        result.y[name] = {key: float(values[var]) for key, var in pairs.items()}
    return result


def _spread(group: Sequence[Unit], shares: Mapping[str, float]) -> dict[tuple[int, str], float]:
    """Per-unit ``x`` of identical units from their group's ``X[c]`` (units placed there in
    all): the units in input order take the clusters' shares, largest first, one unit's worth
    at a time, so whole shares stay whole (``X = (2, 1)`` over three units is ``(1, 0)``,
    ``(1, 0)``, ``(0, 1)``). Each cluster's sum is ``X[c]`` and each unit's at most 1, so this is
    a solution of the per-unit LP with the same objective."""
    left = sorted(((-v, c) for c, v in shares.items() if v > 1e-9))
    result: dict[tuple[int, str], float] = {}
    position = 0
    for unit in group:
        room = 1.0
        while room > 1e-9 and position < len(left):
            negative, cluster = left[position]
            take = min(room, -negative)
            result[(unit.index, cluster)] = result.get((unit.index, cluster), 0.0) + take
            room -= take
            if -negative - take <= 1e-9:
                position += 1
            else:
                left[position] = (negative + take, cluster)
    return result


def _cluster(
    lp: LinearProgram,
    result: ClassLP,
    table: RunTable,
    name: str,
    state: ClusterState,
    members: IntArray,
    multiplicity: IntArray,
    x: dict[str, tuple[IntArray, int]],
    weight: Callable[[Unit, str], float],
) -> dict[tuple[int, int], int]:
    """Add one cluster's variables and rows for the units at ``members`` (positions in
    ``table``); returns its ``y`` variables by (shape id, class)."""
    runs = table.runs_of(members)
    run_shape = table.shape[runs]
    run_owner = table.owner[runs]
    # pods of each shape over the members' runs (the anchors are the most frequent)
    used, where = np.unique(run_shape, return_inverse=True)
    where = where.reshape(-1)
    weighted = table.count[runs] * multiplicity[run_owner]
    pods = np.bincount(where, weights=weighted, minlength=len(used))
    shapes = [result.shapes[s] for s in used.tolist()]
    classes = node_classes(state, shapes)
    result.classes[name] = classes
    copies = classes.total(copies_per_node(classes.free, classes.dev, shapes))  # [C, S]
    # y[s, k] where shape s may use class k and the class holds some: shape-major
    shape_at, class_at = np.nonzero(classes.eligible & (copies.T > 0))
    first_y = lp.vars(copies[class_at, shape_at].astype(np.float64), np.zeros(len(shape_at)))
    y = {
        (int(used[j]), int(k)): first_y + i
        for i, (j, k) in enumerate(zip(shape_at.tolist(), class_at.tolist(), strict=True))
    }
    first_x = lp.vars(
        multiplicity[members].astype(np.float64),
        np.array([weight(table.units[p], name) for p in members.tolist()], dtype=np.float64),
    )
    x[name] = (members, first_x)
    # every pod of a placed unit has a class: per shape, its y over the classes equals the
    # members' pods of it (each member's runs of that shape summed, members in order)
    slot = np.searchsorted(members, run_owner)  # member offset of each run
    pair = slot * len(used) + where
    distinct, inverse = np.unique(pair, return_inverse=True)
    amount = np.bincount(inverse.reshape(-1), weights=table.count[runs])
    pair_shape = distinct % len(used)
    pair_member = distinct // len(used)
    order = np.lexsort((pair_member, pair_shape))  # by shape, then member order
    y_shape = shape_at  # the y variables are consecutive, shape-major
    bounds = np.searchsorted(pair_shape[order], np.arange(len(used) + 1))
    y_bounds = np.searchsorted(y_shape, np.arange(len(used) + 1))
    for j in range(len(used)):
        picked = order[bounds[j] : bounds[j + 1]]
        y_ids = first_y + np.arange(y_bounds[j], y_bounds[j + 1])
        lp.row(
            [*y_ids.tolist(), *(first_x + pair_member[picked]).tolist()],
            [1.0] * len(y_ids) + (-amount[picked]).tolist(),
            lower=0.0,
            upper=0.0,
        )
    # per class rows
    req = table.req[used]  # [S, K]
    gpus = table.gpus[used]
    share = table.share[used]
    free_sum = classes.total(classes.free)  # [C, K]
    pos = np.maximum(classes.dev, 0)
    thousandths = classes.total(pos.sum(axis=1))
    idle = classes.total((classes.dev == 1000).sum(axis=1))
    anchors = sorted(range(len(used)), key=lambda j: (-pods[j], j))[:ANCHORS]
    for k in range(len(classes)):
        present = [j for j in range(len(used)) if (int(used[j]), k) in y]
        if not present:
            continue
        sub = np.array(present, dtype=np.int64)
        upper = copies[k, sub]
        columns = [y[(int(used[j]), k)] for j in present]

        def add(
            coef: IntArray, rhs: int, upper: IntArray = upper, columns: list[int] = columns
        ) -> None:
            if int((coef * upper).sum()) <= rhs:
                return  # cannot bind
            nonzero = np.flatnonzero(coef)
            lp.row(
                [columns[i] for i in nonzero.tolist()],
                coef[nonzero].astype(np.float64).tolist(),
                upper=float(max(rhs, 0)),
            )

        for r in range(req.shape[1]):
            add(req[sub, r], int(free_sum[k, r]))
        add(1000 * gpus[sub] + share[sub], int(thousandths[k]))
        add(gpus[sub], int(idle[k]))
        members_k = classes.label == k
        for q in sorted({int(m) for m in share[sub] if m > 0})[-DEVICE_SLOTS:]:
            slots = int((pos[members_k] // q).sum())
            add(gpus[sub] * (1000 // q) + share[sub] // q, slots)
        for r in (0, 1):  # cpu, memory
            for q in sorted({int(a) for a in req[sub, r] if a > 0})[-SLOT_SIZES:]:
                add(req[sub, r] // q, int((classes.free[members_k, r] // q).sum()))
        for j in anchors:
            if not classes.eligible[j, k]:
                continue
            dominates = (req[sub] >= req[j]).all(axis=1) & (gpus[sub] >= gpus[j])
            if share[j]:
                dominates &= (gpus[sub] > 0) | (share[sub] >= share[j])
            add(dominates.astype(np.int64), int(copies[k, j]))
    return y
