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
* ``fgd`` — least increase of GPU fragmentation for the decision's pod mix (FGD's measure and
  placer's fill term), counted in whole steps
  (:func:`placer.solver.fragmentation.frag_score`), best-fit within a step, scored on
  the mix's ``candidates`` best-fitting candidates; one pod at a time for units of at most
  ``FGD_MAX_PODS`` pods, larger ones fill the chosen node with as many replicas as fit.
* ``spread`` — most capacity left (kube-scheduler's LeastAllocated), one pod per node in turn.

Ties go to the lowest node index (snapshot order), so packing is deterministic.

Best fit one run after another can strand a later shape's room behind an earlier one (a gang
of 1-GPU pods of 11.3 cores and 48 GiB and of 16 cores and 32 GiB on nodes of two shapes).
When it fails for a unit of several pod shapes, all runs are placed at once where a small
exact model finds room for them (:func:`placer.solver.jointpack.joint_counts`: per node and
run counts under every resource, CP-SAT with a deterministic time limit; whole-GPU and
GPU-less pods), the devices given as best fit gives them. On failure of both the state is
rolled back and a :class:`PackFailure` says which run best fit failed and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, cast

import numpy as np

from placer.model import ComponentDemand
from placer.solver.fragmentation import FloatArray, Mix, frag_score
from placer.solver.jointpack import joint_counts
from placer.solver.state import ClusterState, IntArray, PodShape, Replay

if TYPE_CHECKING:
    from placer.solver.topology import DomainNeed

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
    #: rack, block or NVLink domains the pods must or should share, outermost first
    #: (:mod:`placer.solver.topology`).
    topology: tuple[DomainNeed, ...] = ()

    @property
    def count(self) -> int:
        return self.component.replicas


@dataclass(frozen=True)
class Packed:
    """Where each pod went: ``(run, replica index, node index, devices)``."""

    pods: tuple[tuple[PodRun, int, int, tuple[int, ...]], ...]
    #: the sum of the chosen nodes' scores (lower is better; fgd: fragmentation added).
    score: float

    @cached_property
    def replay(self) -> Replay:
        """The packing as a change to apply to (or take off) a state again."""
        width = len(self.pods[0][0].shape.req) if self.pods else 0
        return Replay.of([(run.shape, node, dev) for run, _, node, dev in self.pods], width)


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
    """Place all pods of ``runs`` on ``state`` or none (see module docstring).

    Failures are memoised per state version (capacity), scoring and the sequence of pod
    shapes and counts (the packing is a deterministic function of them), so an identical
    unit tried again on the same capacity fails at once, with the same failure; a first
    run whose pod fits on no node fails without scoring any node.
    """
    if scoring == "fgd" and mix is None:
        scoring = "bestfit"
    if any(r.topology for r in runs):
        from placer.solver.topology import pack_in_domains

        return pack_in_domains(state, runs, scoring=scoring, mix=mix, pack=pack)
    if len(runs) == 1 and runs[0].count == 1:
        return _pack_one(state, runs[0], scoring, mix)
    total = sum(r.count for r in runs)
    ordered = sorted(runs, key=run_order)
    if ordered and not state.fits_anywhere(ordered[0].shape):
        return PackFailure(run=ordered[0], placed=0)
    memo_key: tuple[object, ...] | None = None
    if scoring != "fgd":  # the fragmentation score depends on the mix too
        memo_key = (
            state.version,
            "pack",
            scoring,
            tuple((r.shape.ident, r.count) for r in ordered),
        )
        failed = cast("tuple[int, int] | None", state.memo.get(memo_key))
        if failed is not None:
            return PackFailure(run=ordered[failed[0]], placed=failed[1])
    mark = state.mark()
    # large runs fill a chosen node with as many replicas as fit (same node choice as one at
    # a time for best-fit; for fgd an approximation that keeps 100-pod gangs fast)
    bulk = scoring == "bestfit" or total > FGD_MAX_PODS
    pods: list[tuple[PodRun, int, int, tuple[int, ...]]] = []
    score_sum = 0.0
    for position, run in enumerate(ordered):
        placed, score = _place_run(state, run, pods, scoring=scoring, mix=mix, bulk=bulk)
        score_sum += score
        if placed < run.count:
            state.undo(mark)
            jointly = _pack_jointly(state, ordered, scoring, mix)
            if jointly is not None:
                return jointly
            if memo_key is not None:
                state.remember(memo_key, (position, placed))
            return PackFailure(run=run, placed=placed)
    return Packed(pods=tuple(pods), score=score_sum)


def _pack_jointly(
    state: ClusterState, ordered: Sequence[PodRun], scoring: str, mix: Mix | None
) -> Packed | None:
    """Best fit missed a unit of several pod shapes: all its runs placed at once where
    :func:`placer.solver.jointpack.joint_counts` finds room for them (module docstring), the
    devices as :meth:`ClusterState.place_many` gives them; ``None`` (state unchanged) when
    it finds none. A unit of one shape gains nothing from it and is not tried."""
    if len({run.shape.ident for run in ordered}) < 2:
        return None
    counts = joint_counts(state, [run.shape for run in ordered], [run.count for run in ordered])
    if counts is None:
        return None
    mark = state.mark()
    pods: list[tuple[PodRun, int, int, tuple[int, ...]]] = []
    index = [0] * len(ordered)
    score_sum = 0.0
    for node, k, count in counts:
        run = ordered[k]
        row = np.array([node])
        if not state.fits(run.shape, row)[0] or state.copies(run.shape, node) < count:
            state.undo(mark)  # the rows are exact for whole GPUs: not expected
            return None
        score_sum += float(_scores(state, run.shape, row, scoring, mix)[0])
        for devices in state.place_many(run.shape, node, count):
            pods.append((run, index[k], node, devices))
            index[k] += 1
    return Packed(pods=tuple(pods), score=score_sum)


def _pack_one(
    state: ClusterState, run: PodRun, scoring: str, mix: Mix | None
) -> Packed | PackFailure:
    """One pod: the best-scoring node where it fits (ties: the lowest node index), exactly
    what the general path chooses for a run of one pod, with less work."""
    shape = run.shape
    if state.memo.get((state.version, "anywhere", shape.ident)) is False:
        return PackFailure(run=run, placed=0)
    candidates, scores = _candidates(state, shape, scoring, mix)
    if not candidates.size:
        state.remember((state.version, "anywhere", shape.ident), False)
        return PackFailure(run=run, placed=0)
    pick = int(scores.argmin())
    node = int(candidates[pick])
    (devices,) = state.place_many(shape, node, 1)
    return Packed(pods=((run, 0, node, devices),), score=float(scores[pick]))


def _place_run(
    state: ClusterState,
    run: PodRun,
    pods: list[tuple[PodRun, int, int, tuple[int, ...]]],
    *,
    scoring: str,
    mix: Mix | None,
    bulk: bool,
) -> tuple[int, float]:
    """Place the pods of ``run`` one node choice at a time; returns (placed, score sum).

    The candidates and their scores are computed once per run; a placement changes only the
    chosen node, so only its score is computed again (or it leaves the candidates when the
    pod no longer fits there). Same choices as scoring every node for every pod, since a
    node's score depends on that node alone.
    """
    shape = run.shape
    index = 0
    score_sum = 0.0
    if bulk:
        return _fill_run(state, run, pods, scoring=scoring, mix=mix)
    candidates, scores = _candidates(state, shape, scoring, mix)
    while index < run.count:
        if candidates.size == 0:
            # out of candidates: fragmentation scoring considered only the best-fitting
            # ones, look at every node again
            candidates, scores = _candidates(state, shape, scoring, mix)
            if candidates.size == 0:
                return index, score_sum
        pick = int(scores.argmin())
        node = int(candidates[pick])
        score_sum += float(scores[pick])
        copies = 1
        if bulk and run.count - index > 1:
            copies = max(1, min(run.count - index, state.copies(shape, node)))
        for devices in state.place_many(shape, node, copies):
            pods.append((run, index, node, devices))
            index += 1
        if index < run.count:
            row = candidates[pick : pick + 1]
            if state.fits(shape, row)[0]:
                scores[pick] = _scores(state, shape, row, scoring, mix)[0]
            else:
                candidates = np.delete(candidates, pick)
                scores = np.delete(scores, pick)
    return index, score_sum


def _fill_run(
    state: ClusterState,
    run: PodRun,
    pods: list[tuple[PodRun, int, int, tuple[int, ...]]],
    *,
    scoring: str,
    mix: Mix | None,
) -> tuple[int, float]:
    """Bulk mode: each chosen node takes as many replicas as fit, after which the pod no
    longer fits there and no other node's score has changed — so the choices are the
    candidates in score order (ties: node order), filled one after another, in one step."""
    shape = run.shape
    index = 0
    score_sum = 0.0
    while index < run.count:
        candidates, scores = _candidates(state, shape, scoring, mix)
        if candidates.size == 0:
            return index, score_sum
        order = np.lexsort((candidates, scores))
        nodes = candidates[order]
        copies = np.maximum(state.copies_all(shape)[nodes], 1)
        need = run.count - index
        reach = np.cumsum(copies)
        take = min(int(np.searchsorted(reach, need)) + 1, nodes.size)
        counts = copies[:take].copy()
        counts[-1] -= max(0, int(reach[take - 1]) - need)
        score_sum += float(scores[order[:take]].sum())
        for node, devices in zip(
            nodes[:take].tolist(), state.place_bulk(shape, nodes[:take], counts), strict=True
        ):
            for used in devices:
                pods.append((run, index, node, used))
                index += 1
    return index, score_sum


def _candidates(
    state: ClusterState, shape: PodShape, scoring: str, mix: Mix | None
) -> tuple[IntArray, FloatArray]:
    """The nodes where a pod of ``shape`` fits, with their scores (lower is better).

    Fragmentation scoring scores one node per signature (identical nodes score alike; its
    scores are memoised by signature) and keeps only the ``mix.candidates`` best-fitting
    distinct node states.
    """
    candidates = state.fitting_nodes(shape)
    if candidates.size <= 1 or scoring != "fgd" or mix is None:
        # best-fit and spread scores are cheap array arithmetic: score every candidate
        return candidates, _scores(state, shape, candidates, scoring, mix)
    _, first, inverse = np.unique(state.sig[candidates], return_index=True, return_inverse=True)
    if first.size > mix.candidates:
        fit = _bestfit(state, shape, candidates[first])
        keep = np.zeros(first.size, dtype=bool)
        keep[np.argsort(fit, kind="stable")[: mix.candidates]] = True
        chosen = keep[inverse]
        candidates, first, inverse = candidates[chosen], first[keep], inverse[chosen]
        # renumber the kept states 0..k-1 in the same order
        inverse = np.cumsum(keep)[inverse] - 1
        first = np.unique(inverse, return_index=True)[1]
    scores = _scores(state, shape, candidates[first], scoring, mix)
    return candidates, scores[inverse.reshape(-1)]


def _scores(
    state: ClusterState, shape: PodShape, rows: IntArray, scoring: str, mix: Mix | None
) -> FloatArray:
    if scoring == "fgd" and mix is not None:
        return _fgd(state, shape, rows, mix)
    if scoring == "spread":
        result: FloatArray = -_left(state, shape, rows)
        return result
    return _bestfit(state, shape, rows)


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
    """Fragmentation added by one pod on each of ``rows`` (distinct node states), memoised
    by node signature for the decision's mix; best-fit breaks ties."""
    memo = state.signatures
    if memo.mix is not mix:
        memo.frag.clear()
        memo.mix = mix
    token = id(shape)
    sigs = state.sig[rows].tolist()
    delta = np.empty(len(sigs), dtype=np.float64)
    missing = []
    for i, signature in enumerate(sigs):
        known = memo.frag.get((signature, token))
        if known is None:
            missing.append(i)
        else:
            delta[i] = known
    if missing:
        fresh = rows[missing]
        added = frag_score(mix, state, shape, fresh)
        for i, value in zip(missing, added.tolist(), strict=True):
            memo.frag[(sigs[i], token)] = value
            delta[i] = value
    # best-fit breaks ties (its scale is a few units; the fragmentation score whole steps)
    result: FloatArray = delta + 1e-3 * _bestfit(state, shape, rows)
    return result
