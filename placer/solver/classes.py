"""Node classes: the usable nodes of a cluster grouped into sets of identical nodes.

Two nodes are *identical* for a decision when they have the same free vector, the same
multiset of free GPU device thousandths, and the same eligibility for every pod shape of the
decision (selector, affinity, taints, cordon, readiness). The class-level rows of
:mod:`placer.solver.classlp` are sums over a class of per-node rows, so they hold for any
node-feasible placement.

Fleets built from real snapshots have few distinct node types per cluster (openb: 10–12 per
cluster of 150 nodes), while pre-loaded snapshots can make every node distinct. When there are
more than ``MAX_CLASSES`` classes the nodes are *coarsened*: grouped by eligibility, idle
devices and the scalar free amounts rounded down to a power of two (then, if still too many,
by eligibility and idle devices only). Every per-class quantity is the exact **sum** of its
members' per-node quantities (free amounts, slots, copies), so rows built on coarse classes
stay valid — sums of valid per-node rows — only less tight.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placer.solver.state import BoolArray, ClusterState, IntArray, PodShape

__all__ = ["MAX_CLASSES", "NodeClasses", "copies_per_node", "node_classes"]

#: more distinct node types than this per cluster are coarsened (see module docstring).
MAX_CLASSES = 40


@dataclass(frozen=True)
class NodeClasses:
    """Classes of one cluster's usable nodes, for the shapes they were built for."""

    #: usable node indices (into the state), and the class of each.
    nodes: IntArray  # [n]
    label: IntArray  # [n]
    #: nodes per class.
    size: IntArray  # [C]
    #: eligibility of each of the decision's shapes for each class.
    eligible: BoolArray  # [S, C]
    #: free scalar resources and device thousandths of the usable nodes (copies).
    free: IntArray  # [n, K]
    dev: IntArray  # [n, D]
    #: the classes are exact (identical members), not coarsened.
    exact: bool

    def __len__(self) -> int:
        return len(self.size)

    def total(self, per_node: IntArray) -> IntArray:
        """Sum a per-node quantity ``[n, ...]`` over each class: ``[C, ...]``."""
        out = np.zeros((len(self), *per_node.shape[1:]), dtype=np.int64)
        np.add.at(out, self.label, per_node)
        return out

    def members(self, c: int) -> IntArray:
        """Node indices (into the state) of class ``c``."""
        result: IntArray = self.nodes[self.label == c]
        return result


def copies_per_node(free: IntArray, dev: IntArray, shapes: Sequence[PodShape]) -> IntArray:
    """``[n, S]``: an upper bound on the pods of each shape one node holds alone —
    ``min_k ⌊free_k / req_k⌋``, idle devices ``⌊idle / g⌋``, shares ``Σ_d ⌊φ_d / m⌋``."""
    if not shapes:
        return np.zeros((len(free), 0), dtype=np.int64)
    req = np.stack([s.req for s in shapes])  # [S, K]
    big = np.iinfo(np.int64).max // 4
    safe = np.where(req > 0, req, 1)
    ratio = np.where(req[None, :, :] > 0, free[:, None, :] // safe[None, :, :], big)
    most = ratio.min(axis=2)  # [n, S]
    gpus = np.array([s.gpus for s in shapes], dtype=np.int64)
    share = np.array([s.share for s in shapes], dtype=np.int64)
    idle = (dev == 1000).sum(axis=1)
    if gpus.any():
        whole = np.where(gpus > 0, idle[:, None] // np.maximum(gpus, 1)[None, :], big)
        most = np.minimum(most, whole)
    if share.any():
        pos = np.maximum(dev, 0)
        shared = (pos[:, :, None] // np.maximum(share, 1)[None, None, :]).sum(axis=1)
        most = np.minimum(most, np.where(share > 0, shared, big))
    result: IntArray = np.maximum(np.minimum(most, big), 0)
    return result


def node_classes(state: ClusterState, shapes: Sequence[PodShape]) -> NodeClasses:
    """The classes of ``state``'s usable nodes for the decision's ``shapes``."""
    usable = np.flatnonzero(state.usable)
    keys: dict[object, PodShape] = {}
    for shape in shapes:
        keys.setdefault(shape.key, shape)
    position = {key: i for i, key in enumerate(keys)}
    free = state.free[usable]
    dev = -np.sort(-state.dev[usable], axis=1)
    if usable.size == 0:
        return NodeClasses(
            nodes=usable,
            label=usable,
            size=np.zeros(0, dtype=np.int64),
            eligible=np.zeros((len(shapes), 0), dtype=bool),
            free=free,
            dev=dev,
            exact=True,
        )
    if keys:
        elig = np.stack([state.eligible(s)[usable] for s in keys.values()], axis=1)
    else:
        elig = np.zeros((len(usable), 0), dtype=bool)
    flags = elig.astype(np.int64)
    _, label = np.unique(np.concatenate([free, dev, flags], axis=1), axis=0, return_inverse=True)
    exact = True
    if int(label.max()) + 1 > MAX_CLASSES:
        exact = False
        rounded = np.where(free > 0, 2 ** np.floor(np.log2(np.maximum(free, 1))), 0)
        idle = (dev == 1000).sum(axis=1)[:, None]
        coarse = np.concatenate([rounded.astype(np.int64), idle, flags], axis=1)
        _, label = np.unique(coarse, axis=0, return_inverse=True)
        if int(label.max()) + 1 > MAX_CLASSES:
            _, label = np.unique(np.concatenate([idle, flags], axis=1), axis=0, return_inverse=True)
    label = label.reshape(-1).astype(np.int64)
    count = int(label.max()) + 1
    first = np.unique(label, return_index=True)[1]  # a member of each class
    class_elig = elig[first].T  # [keys, C]
    shape_elig = (
        np.stack([class_elig[position[s.key]] for s in shapes])
        if shapes
        else np.zeros((0, count), dtype=bool)
    )
    return NodeClasses(
        nodes=usable,
        label=label,
        size=np.bincount(label, minlength=count).astype(np.int64),
        eligible=shape_elig,
        free=free,
        dev=dev,
        exact=exact,
    )
