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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placer.solver.problem import Unit
from placer.solver.state import BoolArray, ClusterState

__all__ = ["Row", "cluster_rows", "infeasible_alone"]

#: At most this many distinct eligible-node sets get their own rows per cluster.
MAX_SUBSETS = 6
#: cpu/memory slot thresholds per subset (largest distinct pod sizes).
SLOT_SIZES = 3


@dataclass(frozen=True)
class Row:
    """``Σ coef[u] · x[u, cluster] ≤ rhs``."""

    cluster: str
    coef: dict[int, int]
    rhs: int
    what: str


def infeasible_alone(state: ClusterState, unit: Unit) -> bool:
    """True when some pod run of ``unit`` cannot fit on ``state`` even with nothing else."""
    for run in unit.runs:
        mask = state.eligible(run.shape) & state.usable
        if not mask.any():
            return True
        if int(state.copies_all(run.shape)[mask].sum()) < run.count:
            return True
    return False


def cluster_rows(state: ClusterState, units: Sequence[Unit], *, node_aware: bool) -> list[Row]:
    """The rows of one cluster for ``units`` (see module docstring)."""
    name = state.cluster.name
    usable = state.usable
    masks: dict[bytes, BoolArray] = {}
    run_mask: dict[tuple[int, int], bytes] = {}
    for unit in units:
        for i, run in enumerate(unit.runs):
            mask = state.eligible(run.shape) & usable
            key = mask.tobytes()
            masks.setdefault(key, mask)
            run_mask[(unit.index, i)] = key
    everything = usable.tobytes()
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
        inside = {
            (u, i)
            for (u, i), k in run_mask.items()
            if k == key or key == everything or not (masks[k] & ~mask).any()
        }
        label = "all nodes" if key == everything else f"{int(mask.sum())} eligible nodes"
        rows += _subset_rows(state, units, mask, inside, node_aware, f"{name}, {label}")
    return [r for r in rows if r.coef]


def _subset_rows(
    state: ClusterState,
    units: Sequence[Unit],
    mask: BoolArray,
    inside: set[tuple[int, int]],
    node_aware: bool,
    where: str,
) -> list[Row]:
    name = state.cluster.name
    free = state.free[mask]
    dev = state.dev[mask]
    members = [
        (unit, run)
        for unit in units
        for i, run in enumerate(unit.runs)
        if (unit.index, i) in inside
    ]
    rows: list[Row] = []

    def add(what: str, rhs: int, amounts: list[tuple[int, int]]) -> None:
        coef: dict[int, int] = {}
        for unit_index, amount in amounts:
            if amount:
                coef[unit_index] = coef.get(unit_index, 0) + amount
        # a row every unit satisfies on its own, summed, says nothing new only if total fits
        if coef and sum(coef.values()) > rhs:
            rows.append(Row(cluster=name, coef=coef, rhs=max(rhs, 0), what=f"{what} ({where})"))

    for k, resource in enumerate(state.names):
        add(
            resource,
            int(free[:, k].sum()),
            [(u.index, int(r.shape.req[k]) * r.count) for u, r in members],
        )
    add(
        "GPU thousandths",
        int(np.maximum(dev, 0).sum()),
        [(u.index, r.shape.milli * r.count) for u, r in members],
    )
    if not node_aware:
        return rows
    full = (dev == 1000).sum(axis=1)
    for size in sorted({r.shape.gpus for _, r in members if r.shape.gpus}):
        add(
            f"{size}-GPU slots",
            int((full // size).sum()),
            [(u.index, (r.shape.gpus // size) * r.count) for u, r in members],
        )
    shares = sorted({r.shape.share for _, r in members if r.shape.share > 500})
    if shares or any(r.shape.share for _, r in members):
        for threshold in sorted({500, *shares[:-1]})[:3]:
            add(
                f"GPU devices with more than {threshold} thousandths free",
                int((dev > threshold).sum()),
                [
                    (u.index, (r.shape.gpus + (1 if r.shape.share > threshold else 0)) * r.count)
                    for u, r in members
                ],
            )
    for k in (0, 1):  # cpu, memory
        sizes = sorted({int(r.shape.req[k]) for _, r in members if r.shape.req[k] > 0})
        for size in sizes[-SLOT_SIZES:]:
            add(
                f"{state.names[k]} slots of {size}",
                int((free[:, k] // size).sum()),
                [(u.index, (int(r.shape.req[k]) // size) * r.count) for u, r in members],
            )
    return rows
