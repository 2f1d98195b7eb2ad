"""Aggregated, node-aware capacity rows of a cluster: the constraints of the master and bounds.

A row says ``Σ_u coef[u] · x[u, c] ≤ rhs`` for one cluster ``c``; every row is **valid**: any
placement that really fits on the nodes satisfies it. Two families:

* **totals** (``node_aware=False``, the cluster LP B2): per scalar resource ``k``,
  ``Σ_u D[u, k] x ≤ Σ_n free[n, k]``, and GPU thousandths ``Σ_u G[u] x ≤ Σ_n Σ_d dev[n, d]``.
* **node-aware** (B3, and the CP-SAT master): the totals restricted to each distinct set ``S``
  of nodes a pod shape is eligible for (pods that may only use ``S`` must fit in ``S``'s free
  capacity), plus *slot cuts* that see node and device boundaries. For a threshold ``q``,
  a node with free ``f`` hosts pods of sizes ``a_i`` only if ``Σ ⌊a_i/q⌋ ≤ ⌊f/q⌋``, so
  ``Σ_u Σ_pods ⌊a/q⌋ x ≤ Σ_{n∈S} ⌊f_n/q⌋``. Used for whole GPUs (``q`` = every whole-GPU
  pod size, counted on idle devices), for cpu and memory (the three largest pod sizes), and
  for shared devices: pods that need more than half a device (a share ``m > t ≥ 500``, or a
  whole GPU) are at most the devices with more than ``t`` free.

Units that cannot fit at all (a pod that fits on no eligible node, or more replicas of a pod
than the nodes' free blocks hold — Karmada's accurate estimate) get no variable for ``c``:
:func:`infeasible_alone` says why not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from placer.solver.problem import Unit
from placer.solver.runs import RunTable
from placer.solver.state import BoolArray, ClusterState, IntArray

__all__ = ["Row", "cluster_rows", "infeasible_alone"]

#: At most this many distinct eligible-node sets get their own rows per cluster.
MAX_SUBSETS = 6
#: cpu/memory slot thresholds per subset (largest distinct pod sizes).
SLOT_SIZES = 3
#: pod shapes (the most frequent) that get a dominance slot cut per subset.
DOMINANCE_SHAPES = 8


@dataclass(frozen=True)
class Row:
    """``Σ_i coefs[i] · x[units[i], cluster] ≤ rhs`` (unit indices ascending)."""

    cluster: str
    units: IntArray
    coefs: IntArray
    rhs: int
    what: str

    @property
    def coef(self) -> dict[int, int]:
        """Unit index -> coefficient."""
        return dict(zip(self.units.tolist(), self.coefs.tolist(), strict=True))


def infeasible_alone(state: ClusterState, unit: Unit) -> bool:
    """True when some pod run of ``unit`` cannot fit on ``state`` even with nothing else."""
    pristine = state.mark() == 0
    if pristine and unit.index in state.alone:
        return state.alone[unit.index]
    answer = _infeasible_alone(state, unit)
    if pristine:
        state.alone[unit.index] = answer
    return answer


def _infeasible_alone(state: ClusterState, unit: Unit) -> bool:
    for run in unit.runs:
        # no eligible usable node means no copies: only a run of no pods needs the mask
        if state.copies_total(run.shape) < run.count:
            return True
        if not run.count and not (state.eligible(run.shape) & state.usable).any():
            return True
    return False


def cluster_rows(
    state: ClusterState,
    units: Sequence[Unit],
    *,
    node_aware: bool,
    multiplicity: Mapping[int, int] | None = None,
    table: RunTable | None = None,
) -> list[Row]:
    """The rows of one cluster for ``units`` (see module docstring).

    ``multiplicity``: unit index -> how many identical units it stands for (the bounds'
    aggregated LPs, whose variable for it then ranges over ``[0, m]``); the rows' choices
    (which rows can bind, which shapes get cuts) count every unit it stands for, so they are
    the rows of the units themselves, with the identical units' terms summed. ``table``: a
    :class:`~placer.solver.runs.RunTable` holding ``units`` (built here when not given).
    """
    if table is None:
        table = RunTable(units)
    positions = np.array([table.position[u.index] for u in units], dtype=np.int64)
    runs = table.runs_of(positions)
    if not runs.size:
        return []
    name = state.cluster.name
    usable = state.usable
    sids = table.shape[runs]
    owner = table.owner[runs]
    times = np.ones(len(table), dtype=np.int64)
    if multiplicity:
        times[positions] = [multiplicity.get(u.index, 1) for u in units]
    count = table.count[runs]
    arrays = _Runs(
        owner=table.index[owner],
        count=count,
        weight=count * times[owner],
        req=table.req[sids],
        gpus=table.gpus[sids],
        share=table.share[sids],
    )
    # the eligible usable nodes of each distinct shape, and the distinct sets they form
    distinct, where = np.unique(sids, return_inverse=True)
    where = where.reshape(-1)
    eligible = table.eligible(state, distinct)  # [nodes, shapes]
    keys = [eligible[:, j].tobytes() for j in range(len(distinct))]
    everything = usable.tobytes()
    masks = {k: eligible[:, j] for j, k in enumerate(keys)}
    masks.setdefault(everything, usable)
    subsets = [everything]
    if node_aware:
        ranked = sorted(
            (k for k in masks if k != everything), key=lambda k: (-int(masks[k].sum()), k)
        )
        subsets += ranked[:MAX_SUBSETS]
    rows: list[Row] = []
    for key in subsets:
        mask = masks[key]
        if key == everything:
            inside = np.ones(len(runs), dtype=bool)
        else:
            # per distinct shape: its eligible nodes are all in the subset
            contained = ~np.asarray((eligible & ~mask[:, None]).any(axis=0))
            inside = contained[where]
        label = "all nodes" if key == everything else f"{int(mask.sum())} eligible nodes"
        rows += _subset_rows(state, arrays.select(inside), mask, node_aware, f"{name}, {label}")
    return rows


@dataclass(frozen=True)
class _Runs:
    """The pod runs of the units, as arrays (one entry per run)."""

    owner: IntArray
    count: IntArray
    #: pods the run stands for (its count times the unit's multiplicity).
    weight: IntArray
    req: IntArray
    gpus: IntArray
    share: IntArray

    def select(self, keep: BoolArray) -> _Runs:
        return _Runs(
            self.owner[keep],
            self.count[keep],
            self.weight[keep],
            self.req[keep],
            self.gpus[keep],
            self.share[keep],
        )


def _subset_rows(
    state: ClusterState, runs: _Runs, mask: BoolArray, node_aware: bool, where: str
) -> list[Row]:
    name = state.cluster.name
    free = state.free[mask]
    dev = state.dev[mask]
    rows: list[Row] = []
    if not runs.owner.size:
        return rows

    def add(what: str, rhs: int, per_pod: IntArray) -> None:
        nonlocal rows
        if int((per_pod * runs.weight).sum()) <= rhs:
            return  # cannot bind: even every unit together fits
        amounts = per_pod * runs.count
        total = np.bincount(runs.owner, weights=amounts)
        units = np.flatnonzero(total)
        rows.append(
            Row(
                cluster=name,
                units=units,
                coefs=total[units].astype(np.int64),
                rhs=max(rhs, 0),
                what=f"{what} ({where})",
            )
        )

    for k, resource in enumerate(state.names):
        add(resource, int(free[:, k].sum()), runs.req[:, k])
    milli = 1000 * runs.gpus + runs.share
    add("GPU thousandths", int(np.maximum(dev, 0).sum()), milli)
    if not node_aware:
        return rows
    full = (dev == 1000).sum(axis=1)
    for size in np.unique(runs.gpus[runs.gpus > 0]).tolist():
        add(f"{size}-GPU slots", int((full // size).sum()), runs.gpus // size)
    shares = np.unique(runs.share[runs.share > 500]).tolist()
    if runs.share.any():
        for threshold in sorted({500, *shares[:-1]})[:3]:
            add(
                f"GPU devices with more than {threshold} thousandths free",
                int((dev > threshold).sum()),
                runs.gpus + (runs.share > threshold),
            )
    rows += _dominance_rows(state, runs, mask, add)
    for k in (0, 1):  # cpu, memory
        sizes = np.unique(runs.req[runs.req[:, k] > 0, k]).tolist()
        for size in sizes[-SLOT_SIZES:]:
            add(
                f"{state.names[k]} slots of {size}",
                int((free[:, k] // size).sum()),
                runs.req[:, k] // size,
            )
    return rows


def _dominance_rows(
    state: ClusterState, runs: _Runs, mask: BoolArray, add: Callable[[str, int, IntArray], None]
) -> list[Row]:
    """Shape cuts: pods that need at least shape ``s`` in every resource each take one of the
    copies of ``s`` the nodes hold, so ``Σ_{r ⪰ s} n_r x ≤ Σ_n copies_n(s)``. For the
    ``DOMINANCE_SHAPES`` shapes with the most pods."""
    # the runs grouped by demand (scalar requests, whole GPUs, share; not eligibility)
    demand = np.concatenate([runs.req, runs.gpus[:, None], runs.share[:, None]], axis=1)
    _, first, group = np.unique(demand, axis=0, return_index=True, return_inverse=True)
    weights = np.bincount(group.reshape(-1), weights=runs.weight)
    chosen = sorted(range(len(first)), key=lambda g: (-weights[g], first[g]))[:DOMINANCE_SHAPES]
    for g in chosen:
        i = int(first[g])
        req, gpus, share = runs.req[i], int(runs.gpus[i]), int(runs.share[i])
        positive = req > 0
        most = (state.free[mask][:, positive] // req[positive]).min(axis=1)
        dev = state.dev[mask]
        if gpus:
            most = np.minimum(most, (dev == 1000).sum(axis=1) // gpus)
        if share:
            most = np.minimum(most, (np.maximum(dev, 0) // share).sum(axis=1))
        dominates = (runs.req >= req).all(axis=1)
        if gpus:
            dominates &= runs.gpus >= gpus
        elif share:
            # a whole GPU or a larger share also needs a device with >= share free
            dominates &= (runs.gpus > 0) | (runs.share >= share)
        add(
            f"slots of a {gpus or share / 1000:g}-GPU pod shape",
            int(np.maximum(most, 0).sum()),
            dominates.astype(np.int64),
        )
    return []
