"""GPU fragmentation of nodes for a typical pod mix (FGD, Weng et al., USENIX ATC'23).

**FGD's measure** (from the paper and its simulator; the code here is ours): a node's free GPU
capacity is *fragmented* for a typical pod when that pod cannot use it. For node ``n`` and
typical pod ``t``:

* ``t`` may not run on ``n`` at all — its GPU-model constraint excludes the node's GPUs ("no
  access"): every free GPU thousandth of ``n`` is a fragment;
* ``t`` does not fit ``n`` (cpu, or not enough GPU): every free GPU thousandth is a fragment;
* ``t`` asks for whole GPUs: the partly used devices are fragments (whole pods need idle ones);
* ``t`` asks for a share ``m``: devices with less than ``m`` free are fragments.

``F(n) = Σ_t w_t · frag_t(n)`` with ``w`` the typical pods' frequencies, and FGD sends a pod to
the node whose ``F`` grows least. Placing a pod keeps usable capacity usable, and the "no access"
term makes ``F`` *drop* by ``w_noaccess(n) · GPU(pod)``, so pods that may run anywhere go to
nodes other typical pods cannot use, keeping scarce models (say T4) for the pods bound to
them. On Alibaba's openb trace this beats best-fit by ≈ 2 points of GPU allocation (paper,
Fig. 7).

**The fill term (placer's).** ``frag_t`` asks whether *one* pod of ``t`` fits: a node with 8
idle GPUs and cores for one pod of ``t`` counts nothing for ``t``, though 7 of its GPUs will
never serve ``t``. placer also counts, per typical pod, the free GPU thousandths that pods of
``t`` repeated until the node is full cannot take:

* ``k_t(n)``: how many pods of ``t`` fit ``n`` together — the least, over cpu, memory and the
  other scalars, of ``free / request``, and over GPUs of ``idle devices // GPUs`` (whole-GPU
  pods) or ``Σ_d free_d // share`` (shared pods); 0 where ``t`` may not run;
* ``fill_t(n) = free GPU thousandths − k_t(n) · GPU thousandths of t`` (all of it where ``t``
  may not run, as in ``frag_t``);

and scores a node for a pod ``p`` by ``G(n) = (1 − λ_p) · F(n) + λ_p · Σ_t w_t · fill_t(n)``.
A pod of ``t`` where pods of ``t`` would fill the node leaves ``fill_t`` as it was; a cpu-heavy
pod that strands GPUs raises it, which ``F`` sees only once the last pod of ``t`` no longer
fits. The weight depends on the pod placed: ``λ_p = FILL`` for a pod of whole GPUs, whose harm
is the GPUs its cores and memory strand (the fill term's view), and ``λ_p = FILL_SHARED`` for
any other pod — one asking for a share of one device, whose harm is mostly the sliver it
leaves on that device (which ``F`` already counts, per typical share), or for no GPU. A small
``FILL_SHARED`` rather than none keeps such pods off the whole nodes that large pods need: with
``F`` alone for them, a twelfth of openb refused an 8-GPU task before half its capacity had
arrived (one seed in 40).
``simulations/README.md`` (section 1) has how the FGD replay depends on both weights.
:func:`frag_of` stays FGD's measure (reports use it); the packer scores with
:func:`frag_score`.

**What placer does.** The mix is the pod shapes a decision sees (its workloads' pods weighted
by count) or one the caller passes. Shapes merge by scalar requests (cpu, memory, pods, ...),
GPU request *and* node constraints (:func:`placer.solver.state.constraint_key`: selector,
affinity, tolerations), so a shape's access to a node is the packer's own eligibility test
(:meth:`ClusterState.eligible`), taints and cordons included. The most frequent shapes are kept
until they cover ``COVERAGE`` of the weight (all of them by default: the openb trace has 126
shapes, 422 with GPU-model constraints, and the online decision stays a few milliseconds).
The scoring is vectorised over candidate nodes × shapes and memoised per node signature,
which a mix with node constraints refines with the node's access to each constraint class
(:func:`access_tags`), so nodes that look alike but differ in access never share a score.
The packer's score is the change of ``G`` in whole steps of ``STEP`` thousandths
(:func:`frag_score`), and best-fit decides between nodes in the same step: an exact change
lets differences of a few thousandths (or of float rounding) override a much better fit, and
costs GPU allocation on openb (``simulations/README.md`` shows how the result depends on the
step).

**Differences from FGD.** Shapes carry every requested resource, memory included (FGD's
typical pods know cpu and GPU only); pods asking for no GPU are left out of the mix; FGD maps
the change through a sigmoid to an integer score 0–100 (steps of ≈ 40 thousandths near zero,
coarser further out) and breaks ties at random, placer uses even steps and a deterministic
best-fit tie-break; FGD's cut is a popularity threshold over its typical pods, ``COVERAGE``
here; the fill term is placer's addition.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placer.solver.state import BoolArray, ClusterState, IntArray, PodShape

__all__ = [
    "COVERAGE",
    "FILL",
    "FILL_SHARED",
    "STEP",
    "Mix",
    "access",
    "access_tags",
    "fill_of",
    "fill_weight",
    "frag_added",
    "frag_after",
    "frag_of",
    "frag_score",
    "mix_of",
]

FloatArray = npt.NDArray[np.float64]

_MANY = np.iinfo(np.int64).max // 4

#: The fragmentation score counts in steps of this many GPU thousandths (see the module
#: docstring); changes of ``F`` within one step tie, and best-fit decides.
STEP = 15.0

#: A mix keeps its most frequent shapes until they cover this share of the weight (all of it:
#: the vectorised scoring stays fast with every shape of the openb trace).
COVERAGE = 1.0

#: ``λ_p`` for a pod of whole GPUs: the weight of the fill term in the packer's score (see the
#: module docstring).
FILL = 0.7

#: ``λ_p`` for any other pod (a share of one device, or no GPU).
FILL_SHARED = 0.2


@dataclass(frozen=True)
class Mix:
    """A pod mix as arrays: ``T`` shapes over the state's resource vector."""

    req: IntArray  # [T, R]
    gpus: IntArray  # [T]
    share: IntArray  # [T]
    weight: FloatArray  # [T], sums to 1
    #: one shape per node-constraint class (what :meth:`ClusterState.eligible` looks at).
    classes: tuple[PodShape, ...] = ()
    #: [T] each shape's index in ``classes``.
    klass: IntArray | None = None
    #: candidate nodes scored per pod (the best-fitting ones; fragmentation is costly).
    candidates: int = 128
    #: GPU thousandths per step of the fragmentation score (:func:`frag_score`).
    step: float = STEP
    #: ``λ_p`` of a pod of whole GPUs in :func:`frag_score` (0: FGD's ``F`` alone).
    fill: float = FILL
    #: ``λ_p`` of any other pod (a share of one device, or no GPU).
    fill_shared: float = FILL_SHARED


def mix_of(shapes: Sequence[tuple[PodShape, float]], *, coverage: float = COVERAGE) -> Mix | None:
    """A mix from weighted shapes (GPU shapes only); ``None`` when none asks for a GPU.

    Shapes with equal requests and node constraints merge; the most frequent are kept until
    they cover ``coverage`` of the weight (ties: first seen first, so the mix is reproducible).
    """
    merged: dict[tuple[bytes, int, int, Hashable], tuple[PodShape, float]] = {}
    for shape, weight in shapes:
        if not shape.milli or weight <= 0:
            continue
        key = (shape.req.tobytes(), shape.gpus, shape.share, shape.key)
        prior = merged.get(key)
        merged[key] = (prior[0] if prior else shape, weight + (prior[1] if prior else 0.0))
    if not merged:
        return None
    ranked = sorted(enumerate(merged.values()), key=lambda item: (-item[1][1], item[0]))
    total = sum(w for _, (_, w) in ranked)
    kept: list[tuple[PodShape, float]] = []
    covered = 0.0
    for _, (shape, weight) in ranked:
        if kept and covered >= coverage * total:
            break
        kept.append((shape, weight))
        covered += weight
    classes: dict[Hashable, int] = {}
    representatives: list[PodShape] = []
    for shape, _ in kept:
        if shape.key not in classes:
            classes[shape.key] = len(representatives)
            representatives.append(shape)
    weights = np.array([w for _, w in kept], dtype=np.float64)
    return Mix(
        req=np.stack([s.req for s, _ in kept]),
        gpus=np.array([s.gpus for s, _ in kept], dtype=np.int64),
        share=np.array([s.share for s, _ in kept], dtype=np.int64),
        weight=weights / weights.sum(),
        classes=tuple(representatives),
        klass=np.array([classes[s.key] for s, _ in kept], dtype=np.int64),
    )


def access(mix: Mix, state: ClusterState, rows: IntArray) -> BoolArray | None:
    """[len(rows), T]: whether each shape may run on each node; ``None`` when all may."""
    if not mix.classes or mix.klass is None:
        return None
    by_class = np.stack([state.eligible(shape)[rows] for shape in mix.classes], axis=1)
    if by_class.all():
        return None
    result: BoolArray = by_class[:, mix.klass]
    return result


def access_tags(mix: Mix, state: ClusterState) -> list[bytes] | None:
    """Per node, its access to each constraint class of ``mix`` as bytes (for the node
    signatures); ``None`` when every node has the same access."""
    if not mix.classes:
        return None
    by_class = np.stack([state.eligible(shape) for shape in mix.classes], axis=1)
    if (by_class == by_class[:1]).all():
        return None
    return [row.tobytes() for row in by_class]


def frag_of(
    mix: Mix, free: IntArray, dev: IntArray, allowed: BoolArray | None = None
) -> FloatArray:
    """``F(n)`` for each row of ``free`` [C, R] / ``dev`` [C, D] (see module docstring);
    ``allowed`` [C, T] is each shape's access to each node (default: everywhere)."""
    devpos = np.maximum(dev, 0)
    total = devpos.sum(axis=1)
    full = (dev == 1000).sum(axis=1)
    partial = np.where(dev < 1000, devpos, 0).sum(axis=1)
    largest = dev.max(axis=1)
    usable = (free[:, None, :] >= mix.req[None, :, :]).all(axis=2)  # [C, T]
    whole = mix.gpus > 0
    usable &= np.where(whole[None, :], full[:, None] >= mix.gpus, largest[:, None] >= mix.share)
    if allowed is not None:
        usable &= allowed
    usable_frag = np.repeat(partial[:, None], len(whole), axis=1)
    shared = np.flatnonzero(~whole)
    if shared.size:
        thresholds = mix.share[shared]
        below = (devpos[:, :, None] * (dev[:, :, None] < thresholds[None, None, :])).sum(axis=1)
        usable_frag[:, shared] = below
    frag = np.where(usable, usable_frag, total[:, None])
    result: FloatArray = frag @ mix.weight
    return result


def fill_of(
    mix: Mix, free: IntArray, dev: IntArray, allowed: BoolArray | None = None
) -> FloatArray:
    """``Σ_t w_t · fill_t(n)`` for each row of ``free`` [C, R] / ``dev`` [C, D]: the free GPU
    thousandths that pods of each shape, repeated until the node is full, leave (see the
    module docstring); ``allowed`` as for :func:`frag_of`."""
    devpos = np.maximum(dev, 0)
    total = devpos.sum(axis=1)
    asked = mix.req[None, :, :]
    per_resource = np.where(asked > 0, free[:, None, :] // np.maximum(asked, 1), _MANY)
    copies = np.maximum(per_resource.min(axis=2), 0)  # [C, T] by the scalar resources
    whole = mix.gpus > 0
    idle = (dev == 1000).sum(axis=1)
    by_gpu = np.empty_like(copies)
    by_gpu[:, whole] = idle[:, None] // mix.gpus[whole][None, :]
    shared = np.flatnonzero(~whole)
    if shared.size:
        by_gpu[:, shared] = (devpos[:, :, None] // mix.share[shared][None, None, :]).sum(axis=1)
    copies = np.minimum(copies, by_gpu)
    if allowed is not None:
        copies = np.where(allowed, copies, 0)
    milli = np.where(whole, 1000 * mix.gpus, mix.share)
    left = total[:, None] - copies * milli[None, :]
    result: FloatArray = left @ mix.weight
    return result


def frag_after(mix: Mix, state: ClusterState, shape: PodShape, rows: IntArray) -> FloatArray:
    """``F`` of each node in ``rows`` if one pod of ``shape`` were placed there."""
    return _after(mix, state, shape, rows, access(mix, state, rows))


def frag_added(mix: Mix, state: ClusterState, shape: PodShape, rows: IntArray) -> FloatArray:
    """How much ``F`` of each node in ``rows`` grows if one pod of ``shape`` goes there."""
    allowed = access(mix, state, rows)
    now = frag_of(mix, state.free[rows], state.dev[rows], allowed)
    result: FloatArray = _after(mix, state, shape, rows, allowed) - now
    return result


def frag_score(mix: Mix, state: ClusterState, shape: PodShape, rows: IntArray) -> FloatArray:
    """The packer's score of each node in ``rows`` for one pod of ``shape`` (lower is
    better): how much ``G`` grows (FGD's ``F`` and the fill term, weighted by
    :func:`fill_weight`) in whole steps of ``mix.step`` thousandths."""
    allowed = access(mix, state, rows)
    free, dev = state.free[rows], state.dev[rows]
    free_after, dev_after = _placed(state, shape, rows)
    added = frag_of(mix, free_after, dev_after, allowed) - frag_of(mix, free, dev, allowed)
    weight = fill_weight(mix, shape)
    if weight:
        filled = fill_of(mix, free_after, dev_after, allowed) - fill_of(mix, free, dev, allowed)
        added = (1.0 - weight) * added + weight * filled
    result: FloatArray = np.floor(added / mix.step)
    return result


def fill_weight(mix: Mix, shape: PodShape) -> float:
    """``λ_p``: the fill term's weight when scoring nodes for a pod of ``shape`` (whole GPUs:
    ``mix.fill``; a share of one device, or no GPU: ``mix.fill_shared``)."""
    return mix.fill if shape.gpus else mix.fill_shared


def _after(
    mix: Mix, state: ClusterState, shape: PodShape, rows: IntArray, allowed: BoolArray | None
) -> FloatArray:
    return frag_of(mix, *_placed(state, shape, rows), allowed)


def _placed(state: ClusterState, shape: PodShape, rows: IntArray) -> tuple[IntArray, IntArray]:
    """Free scalars and device thousandths of each node in ``rows`` after one pod of
    ``shape`` (whole GPUs: the first idle devices; a share: the best-fitting device)."""
    free = state.free[rows] - shape.req
    dev = state.dev[rows].copy()
    if shape.gpus:
        idle = dev == 1000
        dev[idle & (np.cumsum(idle, axis=1) <= shape.gpus)] = 0
    if shape.share:
        best = np.where(dev >= shape.share, dev, 10**9).argmin(axis=1)
        dev[np.arange(len(rows)), best] -= shape.share
    return free, dev
