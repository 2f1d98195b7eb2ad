"""Mutable free-capacity state of one cluster, as arrays, for fast node-level packing.

Why arrays: the packer asks "on which nodes does this pod fit, and which is best?" thousands of
times per decision; numpy answers over all nodes of a cluster in one step. The state is built
from the immutable model (:class:`placer.model.Cluster`) at the start of a decision, changed by
``place_many`` / ``place_bulk`` / ``apply``, rolled back by ``undo`` (a journal), and never
leaks out of the solver.

Resources: a fixed vector ``names`` of scalar resources (cpu, memory, pods and whatever the
pods request, except GPUs) per decision. GPUs are modelled **per device**: ``dev[n, d]`` is the
free thousandths of device ``d`` of node ``n`` (``-1`` pads nodes with fewer devices). A node
whose snapshot has no ``gpu_devices`` gets devices synthesised from its whole-GPU counts
(:func:`node_devices`): ``free`` devices at 1000, the rest at 0. A whole-GPU pod needs that
many devices at 1000; a ``GPU_SHARE`` pod needs one device with enough thousandths left.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import cast

import numpy as np
import numpy.typing as npt

from placer.model import GPU_SHARE, Cluster, Node, PodDemand
from placer.podspec import node_mismatch
from placer.quantity import CPU, GPU, MEMORY, PODS

__all__ = [
    "ClusterState",
    "PodShape",
    "Replay",
    "Signatures",
    "constraint_key",
    "gpu_milli",
    "node_devices",
    "resource_names",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: a copies table with more changed nodes than this is not brought up to date for one shape
#: (counting that shape over every node costs less than every shape over those nodes).
TABLE_ROWS = 8
#: "no limit" in copy counts.
_BIG = np.iinfo(np.int64).max // 4
#: entries a state's memos hold before they are emptied (they are keyed by version).
MEMO_SIZE = 4096
#: Scalar resources every state carries (used by scoring even when nobody requests them).
_BASE = (CPU, MEMORY, PODS)


def node_devices(node: Node) -> tuple[int, ...]:
    """Free thousandths per GPU device of ``node`` (synthesised when not in the snapshot).

    Without ``gpu_devices`` the node has ``allocatable[nvidia.com/gpu]`` devices of which
    ``free`` are wholly free (1000) and the others fully used (0), listed free first.
    """
    if node.gpu_devices is not None:
        return node.gpu_devices
    total = node.allocatable.get(GPU, 0)
    free = max(0, min(total, total - node.requested.get(GPU, 0)))
    return (1000,) * free + (0,) * (total - free)


def gpu_milli(requests: PodDemand | dict[str, int]) -> int:
    """GPU thousandths one pod asks for: whole GPUs x 1000 plus its ``GPU_SHARE``."""
    values = requests.requests if isinstance(requests, PodDemand) else requests
    return 1000 * values.get(GPU, 0) + values.get(GPU_SHARE, 0)


def resource_names(pods: Sequence[PodDemand]) -> tuple[str, ...]:
    """The scalar resource vector for a decision over ``pods`` (cpu, memory, pods first)."""
    extra = sorted(
        {n for p in pods for n in p.requests if n not in _BASE and n not in (GPU, GPU_SHARE)}
    )
    return (*_BASE, *extra)


def constraint_key(pod: PodDemand) -> Hashable:
    """What decides a pod's node eligibility (selector, affinity, tolerations), hashable."""
    return (tuple(sorted(pod.node_selector.items())), pod.affinity, pod.tolerations)


@dataclass(frozen=True)
class PodShape:
    """A pod's demand as the packer needs it: scalar vector, whole GPUs, share."""

    demand: PodDemand
    #: requests over the state's ``names`` (``pods`` = 1).
    req: IntArray
    gpus: int
    share: int
    #: requested resources (other than GPUs) that are in ``names`` — all of them.
    key: Hashable

    @property
    def milli(self) -> int:
        return 1000 * self.gpus + self.share

    @cached_property
    def ident(self) -> tuple[bytes, int, int, Hashable]:
        """What the shape is (demand and eligibility), hashable: memos key by it."""
        return (self.req.tobytes(), self.gpus, self.share, self.key)

    @staticmethod
    def of(pod: PodDemand, names: Sequence[str]) -> PodShape:
        req = np.array([1 if n == PODS else pod.requests.get(n, 0) for n in names], dtype=np.int64)
        return PodShape(
            demand=pod,
            req=req,
            gpus=pod.requests.get(GPU, 0),
            share=pod.requests.get(GPU_SHARE, 0),
            key=constraint_key(pod),
        )


class Signatures:
    """Small integer ids for node states (allocatable, free vector and devices), shared by
    all cluster states of a decision: nodes with the same id score alike for every pod, so
    the packer scores one node per id, and the fragmentation scores are memoised by id.

    Ids are handed out in order of first appearance (no hashing of values into ids), so they
    are reproducible."""

    def __init__(self) -> None:
        self._ids: dict[bytes, int] = {}
        #: fragmentation memo: ``(signature, shape token) -> F`` after one pod, and
        #: ``(signature, -1) -> F`` now; valid for one mix (``mix``).
        self.frag: dict[tuple[int, int], float] = {}
        self.mix: object = None

    def of(self, key: bytes) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._ids)
        return found


@dataclass(frozen=True)
class Replay:
    """A placement's change to a state, ready to apply again: the nodes it uses (sorted),
    the scalar amounts it takes from each, and per node the devices it takes (whole devices,
    and ``(device, thousandths)`` shares)."""

    nodes: IntArray
    delta: IntArray  # [len(nodes), K]
    devices: tuple[tuple[int, tuple[int, ...], tuple[tuple[int, int], ...]], ...]

    @staticmethod
    def of(pods: Sequence[tuple[PodShape, int, tuple[int, ...]]], width: int) -> Replay:
        """From ``(shape, node, devices)`` per pod."""
        amounts: dict[int, IntArray] = {}
        whole: dict[int, list[int]] = {}
        shares: dict[int, list[tuple[int, int]]] = {}
        for shape, node, devices in pods:
            total = amounts.get(node)
            if total is None:
                total = amounts[node] = np.zeros(width, dtype=np.int64)
            total += shape.req
            if shape.gpus:
                whole.setdefault(node, []).extend(devices[: shape.gpus])
            if shape.share:
                shares.setdefault(node, []).append((devices[-1], shape.share))
        order = sorted(amounts)
        return Replay(
            nodes=np.array(order, dtype=np.int64),
            delta=(
                np.stack([amounts[n] for n in order])
                if order
                else np.zeros((0, width), dtype=np.int64)
            ),
            devices=tuple(
                (n, tuple(whole.get(n, ())), tuple(shares.get(n, ())))
                for n in order
                if n in whole or n in shares
            ),
        )


class CopiesTable:
    """For a fixed list of pod shapes: how many more pods of each every node of a state holds
    alone (``copies``, 0 where the shape may not go), and their sums over the usable nodes,
    kept up to date as the state changes (the changed nodes are recomputed when next asked).

    Computed on the distinct node states when built (a snapshot has few node types per
    cluster), so tracking hundreds of shapes costs little."""

    def __init__(self, state: ClusterState, shapes: Sequence[PodShape]) -> None:
        self.index = {id(s): k for k, s in enumerate(shapes)}
        self.req = (
            np.stack([s.req for s in shapes])
            if shapes
            else np.zeros((0, state.free.shape[1]), dtype=np.int64)
        )
        self.gpus = np.array([s.gpus for s in shapes], dtype=np.int64)
        self.share = np.array([s.share for s in shapes], dtype=np.int64)
        self.eligible: BoolArray = (
            np.stack([state.eligible(s) for s in shapes], axis=1)
            if shapes
            else np.zeros((len(state), 0), dtype=bool)
        ) & state.usable[:, None]
        rows = np.concatenate([state.free, state.dev], axis=1)
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        width = state.free.shape[1]
        per_row = self._copies(distinct[:, :width], distinct[:, width:])
        self.per_node: IntArray = np.where(self.eligible, per_row[inverse.reshape(-1)], 0)
        self.total: IntArray = self.per_node.sum(axis=0)
        #: nodes changed since their row was computed.
        self.dirty: set[int] = set()
        #: when ``total`` is a row of a fleet's matrix (:mod:`placer.solver.fleetcopies`):
        #: the matrix and the row.
        self.fleet: tuple[IntArray, int] | None = None

    def _copies(self, free: IntArray, dev: IntArray) -> IntArray:
        """``[rows, shapes]``: pods of each shape each row of free resources and devices holds
        (eligibility aside)."""
        big = _BIG
        req = self.req
        most = np.where(
            req[None, :, :] > 0, free[:, None, :] // np.maximum(req, 1)[None, :, :], big
        ).min(axis=2)
        if self.gpus.any():
            idle = (dev == 1000).sum(axis=1)
            whole = idle[:, None] // np.maximum(self.gpus, 1)[None, :]
            most = np.minimum(most, np.where(self.gpus[None, :] > 0, whole, big))
        if self.share.any():
            shared = (np.maximum(dev, 0)[:, :, None] // np.maximum(self.share, 1)).sum(axis=1)
            most = np.minimum(most, np.where(self.share[None, :] > 0, shared, big))
        result: IntArray = np.maximum(most, 0)
        return result

    def refresh(self, state: ClusterState) -> None:
        """Recompute the rows of the nodes changed since the last refresh."""
        if not self.dirty:
            return
        rows = np.fromiter(self.dirty, dtype=np.int64, count=len(self.dirty))
        self.dirty.clear()
        fresh = np.where(self.eligible[rows], self._copies(state.free[rows], state.dev[rows]), 0)
        self.total += (fresh - self.per_node[rows]).sum(axis=0)
        self.per_node[rows] = fresh

    def copy(self) -> CopiesTable:
        other = object.__new__(CopiesTable)
        other.__dict__.update(self.__dict__)
        other.per_node = self.per_node.copy()
        other.total = self.total.copy()
        other.dirty = set(self.dirty)
        other.fleet = None
        return other


class ClusterState:
    """Free capacity of one cluster's nodes; see the module docstring."""

    def __init__(
        self, cluster: Cluster, names: Sequence[str], signatures: Signatures | None = None
    ) -> None:
        self.cluster = cluster
        self.names = tuple(names)
        nodes = cluster.nodes
        self.nodes = nodes
        count = len(nodes)
        self.node_names = [n.name for n in nodes]
        width = len(self.names)
        free = np.zeros((count, width), dtype=np.int64)
        cap = np.ones((count, width), dtype=np.int64)
        devices = [node_devices(n) for n in nodes]
        depth = max((len(d) for d in devices), default=0)
        dev = np.full((count, max(depth, 1)), -1, dtype=np.int64)
        for k, name in enumerate(self.names):
            default = 110 if name == PODS else 0
            totals = [n.allocatable.get(name, default) for n in nodes]
            cap[:, k] = totals
            free[:, k] = [t - n.requested.get(name, 0) for t, n in zip(totals, nodes, strict=True)]
        for i, row in enumerate(devices):
            if row:
                dev[i, : len(row)] = row
        self.free: IntArray = np.maximum(free, 0)
        self.cap: IntArray = np.maximum(cap, 1)
        self.dev: IntArray = dev
        self.usable: BoolArray = np.array([n.usable for n in nodes], dtype=bool)
        #: the node's devices came from the snapshot (not synthesised).
        self.real_devices = [n.gpu_devices is not None for n in nodes]
        self.full: IntArray = (dev == 1000).sum(axis=1).astype(np.int64)
        self.devfree: IntArray = np.maximum(dev, 0).sum(axis=1).astype(np.int64)
        #: the most free thousandths on one device of each node (-1: no device).
        self.maxdev: IntArray = dev.max(axis=1).astype(np.int64)
        self.ndev: IntArray = (dev >= 0).sum(axis=1).astype(np.int64)
        self._eligible: dict[Hashable, BoolArray] = {}
        self._eligible_of: dict[int, tuple[PodShape, BoolArray]] = {}
        self._tainted = [
            i for i, n in enumerate(nodes) if any(t.effect != "PreferNoSchedule" for t in n.taints)
        ]
        self._journal: list[tuple[int | IntArray, IntArray, IntArray]] = []
        #: ``version`` and the totals before each journal entry (``undo`` restores them).
        self._versions: list[int] = []
        self._saved_totals: list[tuple[IntArray, int, int]] = []
        #: free scalar resources, GPU thousandths and idle devices over the usable nodes, kept
        #: up to date by every change (``totals``).
        self._free_total: IntArray = self.free[self.usable].sum(axis=0)
        self._gpu_total = int(self.devfree[self.usable].sum())
        self._idle_total = int(self.full[self.usable].sum())
        #: unit index -> "cannot fit even alone" on the pristine state (kept by capacity).
        self.alone: dict[int, bool] = {}
        #: names the free capacity: every change sets a new number (never used before by this
        #: state) and ``undo`` restores the number of the capacity it returns to, so equal
        #: versions mean equal capacity and memos keyed by it (``memo``, copies, pack
        #: failures) stay valid across a trial that was undone.
        self.version = 0
        self._last_version = 0
        self.memo: dict[tuple[object, ...], object] = {}
        self._copies: dict[tuple[object, ...], IntArray] = {}
        self.signatures = signatures if signatures is not None else Signatures()
        self._static = [self.cap[i].tobytes() for i in range(count)]
        self._sig: IntArray = np.array([self._signature(i) for i in range(count)], dtype=np.int64)
        #: nodes changed since their signature was computed.
        self._stale: set[int] = set()
        #: the copies of the decision's pod shapes, once ``track`` was called.
        self.table: CopiesTable | None = None

    def _signature(self, node: int) -> int:
        return self.signatures.of(
            self._static[node] + self.free[node].tobytes() + self.dev[node].tobytes()
        )

    @property
    def sig(self) -> IntArray:
        """Each node's signature (:class:`Signatures`), brought up to date."""
        if self._stale:
            for node in self._stale:
                self._sig[node] = self._signature(node)
            self._stale.clear()
        return self._sig

    def distinguish(self, tags: Sequence[bytes]) -> None:
        """Fold a tag per node into its signature, so that nodes alike in capacity but
        tagged apart (say, by their access to the pod mix's constraint classes) never share
        an id; call before any copy or change."""
        self._static = [s + t for s, t in zip(self._static, tags, strict=True)]
        self._sig = np.array([self._signature(i) for i in range(len(self))], dtype=np.int64)
        self._stale.clear()

    def __len__(self) -> int:
        return len(self.nodes)

    # -- eligibility ------------------------------------------------------------------------

    def eligible(self, shape: PodShape) -> BoolArray:
        """Nodes a pod of this shape may use regardless of free capacity (cached)."""
        known = self._eligible_of.get(id(shape))
        if known is not None and known[0] is shape:
            return known[1]
        mask = self._eligible.get(shape.key)
        if mask is None:
            pod = shape.demand
            if pod.node_selector or pod.affinity:
                mask = np.array(
                    [node_mismatch(pod, node) is None for node in self.nodes], dtype=bool
                )
            else:
                # without selector or affinity only taints can refuse a usable node
                mask = self.usable.copy()
                for i in self._tainted:
                    mask[i] = node_mismatch(pod, self.nodes[i]) is None
            self._eligible[shape.key] = mask
        # by object too: hashing the key (selector, affinity, tolerations) costs more
        self._eligible_of[id(shape)] = (shape, mask)
        return mask

    def fits(self, shape: PodShape, rows: IntArray | None = None) -> BoolArray:
        """Among ``rows`` (default all nodes): where one more pod of ``shape`` fits now."""
        if rows is None:
            ok = (self.free >= shape.req).all(axis=1) & self.eligible(shape)
            if shape.gpus:
                ok &= self.full >= shape.gpus
            if shape.share:
                ok &= self.maxdev >= shape.share
            return ok
        ok = (self.free[rows] >= shape.req).all(axis=1) & self.eligible(shape)[rows]
        if shape.gpus:
            ok &= self.full[rows] >= shape.gpus
        if shape.share:
            ok &= self.maxdev[rows] >= shape.share
        return ok

    def fitting_nodes(self, shape: PodShape) -> IntArray:
        """The nodes where one more pod of ``shape`` fits now, in node order (as
        ``flatnonzero(fits(shape))``, testing the GPUs first)."""
        if shape.gpus:
            rows = np.flatnonzero(self.full >= shape.gpus)
        elif shape.share:
            rows = np.flatnonzero(self.maxdev >= shape.share)
        else:
            return np.flatnonzero((self.free >= shape.req).all(axis=1) & self.eligible(shape))
        if shape.gpus and shape.share:
            rows = rows[self.maxdev[rows] >= shape.share]
        ok = (self.free[rows] >= shape.req).all(axis=1) & self.eligible(shape)[rows]
        result: IntArray = rows[ok]
        return result

    def fits_anywhere(self, shape: PodShape) -> bool:
        """Whether one more pod of ``shape`` fits on some node now (memoised by version).

        Also answers ``False`` without looking at the nodes when a pod that needs no more in
        any resource (same eligibility) was found to fit nowhere at this version: a node
        with room for the larger pod has room for the smaller one.
        """
        table = self.table
        if table is not None and len(table.dirty) <= TABLE_ROWS and id(shape) in table.index:
            return self.copies_total(shape) > 0
        key = (self.version, "anywhere", shape.ident)
        known = cast("bool | None", self.memo.get(key))
        if known is not None:
            return known
        nowhere_key = (self.version, "nowhere", shape.key)
        nowhere = cast("list[PodShape] | None", self.memo.get(nowhere_key))
        if nowhere is not None and any(
            small.gpus <= shape.gpus
            and small.share <= shape.share
            and bool((small.req <= shape.req).all())
            for small in nowhere
        ):
            known = False
        else:
            known = bool(self.fits(shape).any())
            if not known:
                if nowhere is None:
                    nowhere = []
                    self.remember(nowhere_key, nowhere)
                nowhere.append(shape)
        self.remember(key, known)
        return known

    def copies(self, shape: PodShape, node: int) -> int:
        """How many more pods of ``shape`` fit on ``node`` (resources only)."""
        req = shape.req
        positive = req > 0
        most = int((self.free[node][positive] // req[positive]).min()) if positive.any() else 0
        if shape.gpus:
            most = min(most, int(self.full[node]) // shape.gpus)
        if shape.share:
            row = self.dev[node]
            most = min(most, int((np.maximum(row, 0) // shape.share).sum()))
        return max(most, 0)

    # -- changes ----------------------------------------------------------------------------

    def mark(self) -> int:
        """A point to ``undo`` back to."""
        return len(self._journal)

    def _journal_entry(self, node: int | IntArray) -> None:
        """Save ``node``'s rows and the totals before a change and give the capacity a new
        version."""
        self._journal.append((node, self.free[node].copy(), self.dev[node].copy()))
        self._versions.append(self.version)
        self._saved_totals.append((self._free_total, self._gpu_total, self._idle_total))
        self._last_version += 1
        self.version = self._last_version

    def _count_devices(self, node: int, row: list[int]) -> None:
        """Store node ``node``'s new device row and bring its counts and the totals along."""
        full = row.count(1000)
        devfree = sum(row) + row.count(-1)  # the padding is -1, every device at least 0
        self._idle_total += full - int(self.full[node])
        self._gpu_total += devfree - int(self.devfree[node])
        self.dev[node] = row
        self.full[node] = full
        self.devfree[node] = devfree
        self.maxdev[node] = max(row)

    def remember(self, key: tuple[object, ...], value: object) -> None:
        """Keep ``value`` in ``memo`` under ``key`` (which should start with ``version``);
        the memo is emptied when it grows past ``MEMO_SIZE`` entries."""
        if len(self.memo) >= MEMO_SIZE:
            self.memo.clear()
        self.memo[key] = value

    def copies_all(self, shape: PodShape) -> IntArray:
        """``copies`` for every node (0 where the pod is not eligible); memoised per state
        and version, or read from the copies table (callers must not change the array)."""
        table = self.table
        if table is not None and len(table.dirty) <= TABLE_ROWS:
            k = table.index.get(id(shape))
            if k is not None:
                table.refresh(self)
                column: IntArray = table.per_node[:, k]
                return column
        key = (self.version, shape.ident)
        cached = self._copies.get(key)
        if cached is None:
            cached = self._copies_all(shape)
            if len(self._copies) >= MEMO_SIZE:
                self._copies.clear()
            self._copies[key] = cached
        return cached

    def track(self, shapes: Sequence[PodShape]) -> None:
        """Keep the copies of ``shapes`` up to date (:class:`CopiesTable`): ``copies_total``
        and ``fits_anywhere`` then read them; call before any change."""
        self.table = CopiesTable(self, shapes)

    def tracked(self) -> CopiesTable | None:
        """The copies table, brought up to date (``None`` without ``track``)."""
        if self.table is not None:
            self.table.refresh(self)
        return self.table

    def copies_total(self, shape: PodShape) -> int:
        """``copies_all`` summed over the usable nodes (memoised by version)."""
        table = self.table
        if table is not None and len(table.dirty) <= TABLE_ROWS:
            k = table.index.get(id(shape))
            if k is not None:
                table.refresh(self)
                return int(table.total[k])
        key = (self.version, "total", shape.ident)
        known = cast("int | None", self.memo.get(key))
        if known is None:
            known = int(self.copies_all(shape)[self.usable].sum())
            self.remember(key, known)
        return known

    def _copies_all(self, shape: PodShape) -> IntArray:
        req = shape.req
        positive = req > 0
        most = (self.free[:, positive] // req[positive]).min(axis=1)
        if shape.gpus:
            most = np.minimum(most, self.full // shape.gpus)
        if shape.share:
            most = np.minimum(most, (np.maximum(self.dev, 0) // shape.share).sum(axis=1))
        result: IntArray = np.where(self.eligible(shape), np.maximum(most, 0), 0)
        return result

    def place_many(self, shape: PodShape, node: int, count: int) -> list[tuple[int, ...]]:
        """``count`` pods of ``shape`` on ``node`` in one step (one journal entry)."""
        self._journal_entry(node)
        if self.table is not None:
            self.table.dirty.add(node)
        taken = shape.req * count
        self.free[node] -= taken
        self._free_total = self._free_total - taken
        self._stale.add(node)
        if not (shape.gpus or shape.share):
            return [()] * count
        row = self.dev[node].tolist()
        result = self._devices_many(row, shape, count)
        self._count_devices(node, row)
        return result

    def place_bulk(
        self, shape: PodShape, nodes: IntArray, counts: IntArray
    ) -> list[list[tuple[int, ...]]]:
        """``counts[i]`` pods of ``shape`` on each of the distinct ``nodes`` (one journal
        entry); returns each node's pods' devices."""
        self._journal_entry(nodes.copy())
        if self.table is not None:
            self.table.dirty.update(nodes.tolist())
        self.free[nodes] -= counts[:, None] * shape.req[None, :]
        self._free_total = self._free_total - int(counts.sum()) * shape.req
        if shape.gpus and not shape.share:
            return self._take_idle(shape.gpus, nodes, counts)
        result: list[list[tuple[int, ...]]] = []
        for node, count in zip(nodes.tolist(), counts.tolist(), strict=True):
            if shape.gpus or shape.share:
                row = self.dev[node].tolist()
                result.append(self._devices_many(row, shape, count))
                self._count_devices(node, row)
            else:
                result.append([()] * count)
            self._stale.add(node)
        return result

    def _take_idle(
        self, gpus: int, nodes: IntArray, counts: IntArray
    ) -> list[list[tuple[int, ...]]]:
        """``place_bulk``'s devices for whole-GPU pods without a share, for all the nodes in
        one step: each node's ``gpus × count`` lowest-numbered idle devices, ``gpus`` per pod
        in order (what ``_devices_many`` takes node by node)."""
        rows = self.dev[nodes]
        idle = rows == 1000
        need = counts * gpus
        taken = idle & (np.cumsum(idle, axis=1) <= need[:, None])
        rows[taken] = 0
        self.dev[nodes] = rows
        self.full[nodes] -= need
        self.devfree[nodes] -= need * 1000
        self.maxdev[nodes] = rows.max(axis=1)
        total = int(need.sum())
        self._idle_total -= total
        self._gpu_total -= total * 1000
        self._stale.update(nodes.tolist())
        devices = np.nonzero(taken)[1].tolist()  # row by row, devices in order
        result: list[list[tuple[int, ...]]] = []
        start = 0
        for count in counts.tolist():
            if gpus == 1:
                result.append([(d,) for d in devices[start : start + count]])
            else:
                result.append(
                    [tuple(devices[k : k + gpus]) for k in range(start, start + gpus * count, gpus)]
                )
            start += gpus * count
        return result

    @classmethod
    def _devices_many(cls, row: list[int], shape: PodShape, count: int) -> list[tuple[int, ...]]:
        """``count`` pods' devices from ``row`` (changed in place): as ``_devices`` one pod
        after another; whole-GPU pods without a share take the idle devices in order."""
        if shape.share:
            return [cls._devices(row, shape) for _ in range(count)]
        gpus = shape.gpus
        idle = [i for i, d in enumerate(row) if d == 1000][: gpus * count]
        for i in idle:
            row[i] = 0
        if gpus == 1:
            return [(i,) for i in idle]
        return [tuple(idle[j : j + gpus]) for j in range(0, gpus * count, gpus)]

    @staticmethod
    def _devices(row: list[int], shape: PodShape) -> tuple[int, ...]:
        """Take one pod's devices from ``row`` (changed in place): a shared pod takes the
        device with the least free thousandths that still holds it (best fit inside the
        node); whole GPUs take the lowest-numbered idle devices."""
        used: tuple[int, ...] = ()
        if shape.gpus:
            idle = [i for i, d in enumerate(row) if d == 1000][: shape.gpus]
            for i in idle:
                row[i] = 0
            used = tuple(idle)
        if shape.share:
            best = min((d, i) for i, d in enumerate(row) if d >= shape.share)[1]
            row[best] -= shape.share
            used = (*used, best)
        return used

    def shift(self, to: int, away: int, amount: IntArray) -> None:
        """``amount`` of scalar free capacity moves from node ``away`` to node ``to`` (two pods
        of equal GPU needs trading places: devices stay as they are); one journal entry."""
        nodes = np.array([to, away], dtype=np.int64)
        self._journal_entry(nodes)
        if self.table is not None:
            self.table.dirty.update((to, away))
        self.free[to] += amount
        self.free[away] -= amount
        self._stale.update((to, away))

    def apply(self, replays: Sequence[Replay], *, sign: int = 1) -> None:
        """Replay placements made earlier, exactly (``sign=-1``: give them back); one
        journal entry."""
        replays = [r for r in replays if r.nodes.size]
        if not replays:
            return
        nodes = np.unique(np.concatenate([r.nodes for r in replays]))
        self._journal_entry(nodes)
        rows: dict[int, list[int]] = {}
        taken = self._free_total.copy()
        for replay in replays:
            self.free[replay.nodes] -= sign * replay.delta
            taken -= sign * replay.delta.sum(axis=0)
            for node, whole, shares in replay.devices:
                row = rows.get(node)
                if row is None:
                    row = rows[node] = self.dev[node].tolist()
                for i in whole:
                    row[i] = 0 if sign > 0 else 1000
                for i, share in shares:
                    row[i] -= sign * share
        self._free_total = taken
        if rows:
            changed = np.fromiter(rows, dtype=np.int64, count=len(rows))
            dev = np.array(list(rows.values()), dtype=np.int64)
            full = (dev == 1000).sum(axis=1)
            devfree = np.maximum(dev, 0).sum(axis=1)
            self._idle_total += int(full.sum() - self.full[changed].sum())
            self._gpu_total += int(devfree.sum() - self.devfree[changed].sum())
            self.dev[changed] = dev
            self.full[changed] = full
            self.devfree[changed] = devfree
            self.maxdev[changed] = dev.max(axis=1)
        self._stale.update(nodes.tolist())
        if self.table is not None:
            self.table.dirty.update(nodes.tolist())

    def undo(self, mark: int) -> None:
        """Roll back every change after ``mark`` (the saved rows, newest first)."""
        if len(self._journal) <= mark:
            return
        touched: set[int] = set()
        for node, free, dev in reversed(self._journal[mark:]):
            self.free[node] = free
            self.dev[node] = dev
            if isinstance(node, np.ndarray):  # a bulk entry
                touched.update(node.tolist())
            else:
                touched.add(node)
        del self._journal[mark:]
        self.version = self._versions[mark]
        del self._versions[mark:]
        self._free_total, self._gpu_total, self._idle_total = self._saved_totals[mark]
        del self._saved_totals[mark:]
        nodes = np.fromiter(touched, dtype=np.int64, count=len(touched))
        dev = self.dev[nodes]
        self.full[nodes] = (dev == 1000).sum(axis=1)
        self.devfree[nodes] = np.maximum(dev, 0).sum(axis=1)
        self.maxdev[nodes] = dev.max(axis=1)
        self._stale.update(touched)
        if self.table is not None:
            self.table.dirty.update(touched)

    def copy(self) -> ClusterState:
        """An independent copy of the current free capacity (static data shared)."""
        other = object.__new__(ClusterState)
        other.__dict__.update(self.__dict__)
        other.free = self.free.copy()
        other.dev = self.dev.copy()
        other.full = self.full.copy()
        other.devfree = self.devfree.copy()
        other.maxdev = self.maxdev.copy()
        other._sig = self._sig.copy()
        other._stale = set(self._stale)
        other.table = self.table.copy() if self.table is not None else None
        other._journal = []
        other._versions = []
        other._saved_totals = []
        # same capacity as this state when it has no journal: same answers
        other.alone = self.alone if not self._journal else {}
        other.memo = {}
        other._copies = {}
        return other

    def totals(self) -> tuple[IntArray, int, int]:
        """Free scalar resources, GPU thousandths and idle devices over usable nodes (kept up
        to date by every change; callers must not change the array)."""
        return self._free_total, self._gpu_total, self._idle_total
