"""The pod runs of a list of units as arrays, for the vectorised parts of the solver.

The LPs (:mod:`placer.solver.capacity`, :mod:`placer.solver.classlp`) and the search
(:mod:`placer.solver.recreate`) ask the same questions of every unit and cluster — which pod
shapes a unit has, how many pods of each, how many copies of a shape the nodes of a cluster
hold — and per unit and run in Python they cost more than the LPs themselves at fleet scale.
A :class:`RunTable` lists every run once (``owner``, ``count``, ``shape``: one row per run,
units in the order given, runs in unit order) and the distinct shapes once, so that these
questions become array operations. Pure: reads the units and the states, changes nothing but
the states' own memo of which units fit alone (:meth:`RunTable.fit_alone`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placer.solver.classes import copies_per_node
from placer.solver.problem import Unit
from placer.solver.state import BoolArray, ClusterState, IntArray, PodShape

__all__ = ["RunTable"]


class RunTable:
    """Every pod run of ``units`` (see the module docstring)."""

    def __init__(self, units: Sequence[Unit]) -> None:
        self.units = list(units)
        #: unit index -> position in ``units``.
        self.position = {u.index: k for k, u in enumerate(self.units)}
        ids: dict[int, int] = {}
        by_ident: dict[tuple[object, ...], int] = {}
        #: the distinct shapes (demand and eligibility), in order of first appearance.
        self.shapes: list[PodShape] = []
        owner: list[int] = []
        count: list[int] = []
        shape: list[int] = []
        for position, unit in enumerate(self.units):
            for run in unit.runs:
                sid = ids.get(id(run.shape))
                if sid is None:
                    # by object first (build_problem makes one per distinct shape), by value
                    # for shapes made elsewhere
                    sid = by_ident.setdefault(run.shape.ident, len(self.shapes))
                    if sid == len(self.shapes):
                        self.shapes.append(run.shape)
                    ids[id(run.shape)] = sid
                owner.append(position)
                count.append(run.count)
                shape.append(sid)
        width = len(self.shapes[0].req) if self.shapes else 0
        #: per run: the unit's position, the pods, the shape id.
        self.owner: IntArray = np.array(owner, dtype=np.int64)
        self.count: IntArray = np.array(count, dtype=np.int64)
        self.shape: IntArray = np.array(shape, dtype=np.int64)
        #: per unit: its index, and where its runs start (``start[p] : start[p + 1]``).
        self.index: IntArray = np.array([u.index for u in self.units], dtype=np.int64)
        self.start: IntArray = np.searchsorted(self.owner, np.arange(len(self.units) + 1))
        #: per shape: scalar demand, whole GPUs, GPU share.
        self.req: IntArray = (
            np.stack([s.req for s in self.shapes])
            if self.shapes
            else np.zeros((0, width), dtype=np.int64)
        )
        self.gpus: IntArray = np.array([s.gpus for s in self.shapes], dtype=np.int64)
        self.share: IntArray = np.array([s.share for s in self.shapes], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.units)

    def runs_of(self, positions: IntArray) -> IntArray:
        """The rows of the runs of the units at ``positions`` (in that order, runs in unit
        order)."""
        lengths = self.start[positions + 1] - self.start[positions]
        total = int(lengths.sum())
        if not total:
            return np.zeros(0, dtype=np.int64)
        offsets = np.repeat(self.start[positions] - np.cumsum(lengths) + lengths, lengths)
        result: IntArray = offsets + np.arange(total)
        return result

    def eligible(self, state: ClusterState, sids: IntArray) -> BoolArray:
        """``[nodes, len(sids)]``: the usable nodes of ``state`` each shape may use."""
        if not sids.size:
            return np.zeros((len(state), 0), dtype=bool)
        mask = np.stack([state.eligible(self.shapes[s]) for s in sids.tolist()], axis=1)
        result: BoolArray = mask & state.usable[:, None]
        return result

    def copies_total(self, state: ClusterState, sids: IntArray, eligible: BoolArray) -> IntArray:
        """Per shape of ``sids``: the pods of it the usable nodes of ``state`` hold now, each
        node alone (``Σ_n copies_n(s)``, as :meth:`ClusterState.copies_total`); ``eligible``
        from :meth:`eligible`. Computed once per distinct node state."""
        if not sids.size:
            return np.zeros(0, dtype=np.int64)
        rows = np.concatenate([state.free, state.dev], axis=1)
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        width = state.free.shape[1]
        per_row = copies_per_node(
            distinct[:, :width], distinct[:, width:], [self.shapes[s] for s in sids.tolist()]
        )
        result: IntArray = (per_row[inverse.reshape(-1)] * eligible).sum(axis=0)
        return result

    def fit_alone(self, state: ClusterState, positions: IntArray) -> BoolArray:
        """For the units at ``positions``: whether each of their runs fits ``state`` with
        nothing else placed (the negation of :func:`~placer.solver.capacity.infeasible_alone`,
        for many units at once). On a state without changes the answers are kept in its
        ``alone`` memo, where ``infeasible_alone`` finds them."""
        pristine = state.mark() == 0
        answer = np.ones(len(positions), dtype=bool)
        known = np.array(
            [pristine and self.units[p].index in state.alone for p in positions.tolist()],
            dtype=bool,
        )
        for k in np.flatnonzero(known).tolist():
            answer[k] = not state.alone[self.units[int(positions[k])].index]
        todo = np.flatnonzero(~known)
        if not todo.size:
            return answer
        picked = positions[todo]
        runs = self.runs_of(picked)
        sids = np.unique(self.shape[runs])
        eligible = self.eligible(state, sids)
        where = np.searchsorted(sids, self.shape[runs])
        total = self.copies_total(state, sids, eligible)[where]
        anywhere = np.asarray(eligible.any(axis=0))[where]
        count = self.count[runs]
        bad = (total < count) | ((count == 0) & ~anywhere)
        failed = np.zeros(len(self.units), dtype=bool)
        failed[self.owner[runs[bad]]] = True
        fits = ~failed[picked]
        answer[todo] = fits
        if pristine:
            for p, ok in zip(picked.tolist(), fits.tolist(), strict=True):
                state.alone[self.units[p].index] = not ok
        return answer
