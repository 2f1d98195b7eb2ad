"""An exact packing of a gang of several pod shapes on one cluster, for when best fit misses.

The packer (:mod:`placer.solver.packer`) places a unit's pod runs largest first, each by
best fit: on nodes of several shapes it can put the first shape where only the second fits
and strand the second's room behind it (a gang of 1-GPU pods of 11.3 cores and 48 GiB and of
16 cores and 32 GiB: bench_fairshare seed 2). When it fails, :func:`joint_counts` looks for
a packing of all runs at once — the node rows of the victim model
(:mod:`placer.solver.preempt`, ``s_{n,k}``) with nothing to evict:

* ``s_{n,k} ∈ [0, min(count_k, c_{n,k})]``: pods of run ``k`` on node ``n``, ``c_{n,k}`` how
  many of them fit there alone (0 where the run may not go: selector, affinity, taints);
* ``Σ_k a_{k,r} s_{n,k} ≤ F_{n,r}`` for every resource column ``r`` of the state (``pods``
  1 a pod) and ``Σ_k g_k s_{n,k} ≤ I_n`` (``g_k`` whole GPUs a pod, ``I_n`` the node's idle
  devices);
* ``Σ_n s_{n,k} = count_k``; no objective (any packing will do).

For whole-GPU and GPU-less pods these rows are exact: a node with the room in every column
and enough idle devices takes the pods. Runs of shared-GPU pods (a share of one device each)
are left to best fit (their device rows are not modelled here).

CP-SAT on one worker with a fixed seed and a deterministic time limit
(``max_deterministic_time``), so the answer does not depend on the machine's load. The
caller realises the counts on its state (devices as the packer gives them).

Pure: reads its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placer._lazy import pandas_deferred
from placer.solver.state import ClusterState, PodShape

with pandas_deferred():  # OR-Tools' CP-SAT wrapper, without the pandas it does not need here
    from ortools.sat.python import cp_model

__all__ = ["JOINT_DETERMINISTIC_TIME", "JOINT_MAX_SLOTS", "joint_counts"]

#: CP-SAT's deterministic time limit for one joint packing (its own work units, about a
#: second each on one core): a missed packing is rare and small, the limit keeps a hard
#: infeasible one cheap.
JOINT_DETERMINISTIC_TIME = 0.2
#: More ``s_{n,k}`` than this (nodes with room times runs): the joint packing is not tried.
JOINT_MAX_SLOTS = 4096


def joint_counts(
    state: ClusterState, shapes: Sequence[PodShape], counts: Sequence[int]
) -> list[tuple[int, int, int]] | None:
    """``(node, run, pods)`` triples that place ``counts[k]`` pods of ``shapes[k]`` on
    ``state``'s nodes as it is now (module docstring), in node order then run order; ``None``
    when none is found (none exists, or the limits were hit, or a run shares GPUs)."""
    if any(shape.share for shape in shapes) or not shapes:
        return None
    copies = np.stack([state.copies_all(shape) for shape in shapes], axis=1)
    usable = state.usable
    copies[~usable] = 0
    if any(int(copies[:, k].sum()) < count for k, count in enumerate(counts)):
        return None
    free = state.free
    need = sum(shape.req * count for shape, count in zip(shapes, counts, strict=True))
    rows = np.flatnonzero(copies.any(axis=1))
    if bool((free[rows].sum(axis=0) < need).any()):
        return None
    gpus = sum(shape.gpus * count for shape, count in zip(shapes, counts, strict=True))
    if int(state.full[rows].sum()) < gpus:
        return None
    if int((copies[rows] > 0).sum()) > JOINT_MAX_SLOTS:
        return None
    model = cp_model.CpModel()
    per_run: list[list[cp_model.IntVar]] = [[] for _ in shapes]
    slots: list[tuple[int, int, cp_model.IntVar]] = []
    for node in rows.tolist():
        here: list[tuple[int, cp_model.IntVar]] = []
        for k, count in enumerate(counts):
            top = min(count, int(copies[node, k]))
            if top <= 0:
                continue
            slot = model.new_int_var(0, top, f"s-{node}-{k}")
            here.append((k, slot))
            per_run[k].append(slot)
            slots.append((node, k, slot))
        if len(here) < 2:
            continue  # one run alone: its top already keeps it within the node
        for r in range(free.shape[1]):
            asked = [(int(shapes[k].req[r]), slot) for k, slot in here if shapes[k].req[r]]
            if len(asked) >= 2:
                model.add(sum(a * slot for a, slot in asked) <= int(free[node, r]))
        whole = [(shapes[k].gpus, slot) for k, slot in here if shapes[k].gpus]
        if len(whole) >= 2:
            model.add(sum(g * slot for g, slot in whole) <= int(state.full[node]))
    for k, count in enumerate(counts):
        model.add(sum(per_run[k]) == count)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = JOINT_DETERMINISTIC_TIME
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return [(node, k, value) for node, k, slot in slots if (value := solver.value(slot)) > 0]
