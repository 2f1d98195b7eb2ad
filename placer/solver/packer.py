"""The node-level packer: puts every pod of a unit on a node of one cluster, or none.

Every solver (CP-SAT and all baselines) realises its cluster choice through this one function,
so "placed" always means "each pod has a node with room for it" (benchmark-design C.5).

Algorithm: the unit's pod runs (component instances: ``replicas`` identical pods) are taken
largest first (GPU thousandths, then cpu, then memory: first-fit-decreasing inside a unit).
For each pod the candidate nodes are those it is eligible for (selector, affinity, taints,
cordon, readiness) with room in every resource; the candidate with the lowest score wins:

* ``bestfit`` — least GPU left on the node after the pod (for a shared pod: least left on
  the chosen device first), then least cpu + memory fraction left; a pod without GPUs avoids
  nodes with idle GPUs (so CPU pods do not strand GPUs). With this scoring a node takes as
  many replicas of the run as fit before the next node is scored: same result as one at a
  time, much faster for 128-pod gangs.
* ``fgd`` — least increase of GPU fragmentation for the decision's pod mix
  (:mod:`placer.solver.fragmentation`), best-fit as tie-break, scored on the mix's
  ``candidates`` best-fitting candidates; one pod at a time for units of at most
  ``FGD_MAX_PODS`` pods, larger ones fill the chosen node with as many replicas as fit.
* ``spread`` — most capacity left (kube-scheduler's LeastAllocated), one pod per node in turn.

Ties go to the lowest node index (snapshot order), so packing is deterministic. On failure the
state is rolled back and a :class:`PackFailure` says which run failed and why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from placer.model import ComponentDemand
from placer.solver.fragmentation import FloatArray, Mix, frag_after, frag_of
from placer.solver.state import ClusterState, IntArray, PodShape

__all__ = ["FGD_MAX_PODS", "SCORINGS", "PackFailure", "Packed", "PodRun", "pack", "run_order"]

SCORINGS = ("bestfit", "fgd", "spread")
#: Units with more pods than this are packed with ``bestfit`` even when ``fgd`` is asked for.
FGD_MAX_PODS = 16


@dataclass(frozen=True)
class PodRun:
    """``component.replicas`` identical pods of one component instance of one workload."""

    workload: int
    component: ComponentDemand
    shape: PodShape

    @property
    def count(self) -> int:
        return self.component.replicas


@dataclass(frozen=True)
class Packed:
    """Where each pod went: ``(run, replica index, node index, devices)``."""

    pods: tuple[tuple[PodRun, int, int, tuple[int, ...]], ...]
    #: the sum of the chosen nodes' scores (lower is better; fgd: fragmentation added).
    score: float


@dataclass(frozen=True)
class PackFailure:
    """The run whose pods found no node, and how many of them had been placed."""

    run: PodRun
    placed: int


def run_order(run: PodRun) -> tuple[int, int, int]:
    """Sort key for largest-first: GPU thousandths, cpu, memory (descending)."""
    shape = run.shape
    return (-shape.milli, -int(shape.req[0]), -int(shape.req[1]))


def pack(
    state: ClusterState,
    runs: Sequence[PodRun],
    *,
    scoring: str = "bestfit",
    mix: Mix | None = None,
) -> Packed | PackFailure:
    """Place all pods of ``runs`` on ``state`` or none (see module docstring)."""
    mark = state.mark()
    total = sum(r.count for r in runs)
    if scoring == "fgd" and mix is None:
        scoring = "bestfit"
    # large runs fill a chosen node with as many replicas as fit (same node choice as one at
    # a time for best-fit; for fgd an approximation that keeps 100-pod gangs fast)
    bulk = scoring == "bestfit" or total > FGD_MAX_PODS
    pods: list[tuple[PodRun, int, int, tuple[int, ...]]] = []
    score_sum = 0.0
    for run in sorted(runs, key=run_order):
        placed, score = _place_run(state, run, pods, scoring=scoring, mix=mix, bulk=bulk)
        score_sum += score
        if placed < run.count:
            state.undo(mark)
            return PackFailure(run=run, placed=placed)
    return Packed(pods=tuple(pods), score=score_sum)


def pack_set(
    state: ClusterState,
    units: Sequence[tuple[int, Sequence[PodRun], str]],
    *,
    mix: Mix | None = None,
) -> tuple[dict[int, Packed], list[int]]:
    """Pack several units (``(key, runs, scoring)``) together on one cluster.

    All their runs are packed in one pass, hardest first (:func:`effective_size`: GPUs'
    worth of a typical node a pod takes, so pods with much cpu or memory per GPU go first);
    a unit with a pod that finds no node is taken out again, and such units are retried one
    by one at the end. Returns the packed units by key and the keys that did not fit.
    """
    size = effective_size(state)
    runs = [(key, run, scoring) for key, unit_runs, scoring in units for run in unit_runs]
    runs.sort(key=lambda item: (-size(item[1].shape), run_order(item[1])))
    pods: dict[int, list[tuple[PodRun, int, int, tuple[int, ...]]]] = {k: [] for k, _, _ in units}
    failed: list[int] = []
    for key, run, scoring in runs:
        if key in failed:
            continue
        placed, _ = _place_run(
            state, run, pods[key], scoring=scoring if mix else "bestfit", mix=mix, bulk=True
        )
        if placed < run.count:
            failed.append(key)
    for key in failed:
        for run, _, node, devices in reversed(pods[key]):
            state.unplace(run.shape, node, devices)
    packed = {k: Packed(pods=tuple(p), score=0.0) for k, p in pods.items() if k not in failed}
    left = []
    by_key = {key: (unit_runs, scoring) for key, unit_runs, scoring in units}
    for key in sorted(failed):
        unit_runs, scoring = by_key[key]
        result = pack(state, unit_runs, scoring=scoring, mix=mix)
        if isinstance(result, Packed):
            packed[key] = result
        else:
            left.append(key)
    return packed, left


def effective_size(state: ClusterState) -> Callable[[PodShape], float]:
    """A pod's size in GPUs' worth of this cluster's typical GPU node (cpu and memory per
    GPU at the median), at least its own GPUs; for pods without GPUs, their cpu/memory share
    of a typical node."""
    gpu_nodes = state.ndev > 0
    cap = state.cap[gpu_nodes] if gpu_nodes.any() else state.cap
    per_gpu = (
        cap[:, :2] / np.maximum(state.ndev[gpu_nodes], 1)[:, None]
        if gpu_nodes.any()
        else cap[:, :2]
    )
    typical = np.maximum(np.median(per_gpu, axis=0), 1.0)

    def size(shape: PodShape) -> float:
        ratio = float(max(shape.req[0] / typical[0], shape.req[1] / typical[1]))
        return max(shape.milli / 1000.0, ratio)

    return size


def _place_run(
    state: ClusterState,
    run: PodRun,
    pods: list[tuple[PodRun, int, int, tuple[int, ...]]],
    *,
    scoring: str,
    mix: Mix | None,
    bulk: bool,
) -> tuple[int, float]:
    """Place the pods of ``run`` one node choice at a time; returns (placed, score sum)."""
    shape = run.shape
    index = 0
    score_sum = 0.0
    while index < run.count:
        candidates = np.flatnonzero(state.fits(shape))
        if candidates.size == 0:
            return index, score_sum
        if scoring == "fgd":
            assert mix is not None
            if candidates.size > mix.candidates:
                # fragmentation is costly to score: only the best-fitting candidates
                fit = _bestfit(state, shape, candidates)
                keep = np.argsort(fit, kind="stable")[: mix.candidates]
                candidates = candidates[np.sort(keep)]
            scores = _fgd(state, shape, candidates, mix)
        elif scoring == "spread":
            scores = -_left(state, shape, candidates)
        else:
            scores = _bestfit(state, shape, candidates)
        pick = int(scores.argmin())
        node = int(candidates[pick])
        score_sum += float(scores[pick])
        copies = 1
        if bulk and run.count - index > 1:
            copies = max(1, min(run.count - index, state.copies(shape, node)))
        for devices in state.place_many(shape, node, copies):
            pods.append((run, index, node, devices))
            index += 1
    return index, score_sum


def _left(state: ClusterState, shape: PodShape, rows: IntArray) -> FloatArray:
    """Fraction of cpu, memory and GPU left on each candidate after the pod (0..3)."""
    free = state.free[rows]
    cap = state.cap[rows]
    left = ((free[:, 0] - shape.req[0]) / cap[:, 0]) + ((free[:, 1] - shape.req[1]) / cap[:, 1])
    gpu_left = (state.devfree[rows] - shape.milli) / np.maximum(state.ndev[rows] * 1000, 1)
    result: FloatArray = left + gpu_left
    return result


def _bestfit(state: ClusterState, shape: PodShape, rows: IntArray) -> FloatArray:
    free = state.free[rows]
    cap = state.cap[rows]
    scalar = ((free[:, 0] - shape.req[0]) / cap[:, 0]) + ((free[:, 1] - shape.req[1]) / cap[:, 1])
    devfree = state.devfree[rows].astype(np.float64)
    if not shape.milli:
        # keep GPU nodes for GPU pods: idle GPUs weigh more than any cpu/memory fraction
        result: FloatArray = 4.0 * devfree / 1000.0 + scalar
        return result
    gpu_left = (devfree - shape.milli) / 1000.0
    if shape.share:
        dev = state.dev[rows]
        device_left = np.where(dev >= shape.share, dev, 10**6).min(axis=1) - shape.share
        result = 8.0 * device_left / 1000.0 + 4.0 * gpu_left + scalar
        return result
    result = 4.0 * gpu_left + scalar
    return result


def _fgd(state: ClusterState, shape: PodShape, rows: IntArray, mix: Mix) -> FloatArray:
    cache = _frag_cache(state, mix)
    delta = frag_after(mix, state, shape, rows) - cache[rows]
    # best-fit breaks ties (its scale is a few units; fragmentation is in thousandths)
    result: FloatArray = delta + 1e-3 * _bestfit(state, shape, rows)
    return result


def _frag_cache(state: ClusterState, mix: Mix) -> FloatArray:
    """``F(n)`` for every node of ``state`` under ``mix``, refreshed for changed nodes."""
    cached = state.frag_cache
    if cached is None or state.frag_mix is not mix:
        cached = frag_of(mix, state.free, state.dev)
        state.frag_cache = cached
        state.frag_mix = mix
        state.changed.clear()
    elif state.changed:
        rows = np.fromiter(sorted(state.changed), dtype=np.int64)
        cached[rows] = frag_of(mix, state.free[rows], state.dev[rows])
        state.changed.clear()
    return cached
