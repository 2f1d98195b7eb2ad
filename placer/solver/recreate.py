"""Ruin and recreate: a large-neighbourhood search on real node state, until the deadline.

The portfolio's passes (:mod:`placer.solver.portfolio`) end, at overload, with GPUs
stranded: nodes still have one or two idle devices but too little cpu or memory left for any
unplaced pod, because cpu-heavy pods took it; and big gangs wait while small units sit on
the nodes they would need. Moving one or two units rarely repairs either (an earlier
swap-in/ejection descent stopped at 95-97 % of the bound on the multi-cluster benchmark);
re-choosing the pods of a handful of nodes does. Each iteration:

1. **Ruin**: pick a cluster ``c`` (weighted by the square of its free GPU thousandths + 1,
   so the clusters with the most stranded GPUs are revisited most) and take off it one of:

   * *room* (``ROOM_SHARE`` of the ruins): for an unplaced unit ``u`` allowed in ``c`` that
     does not fit its free GPUs, units of lower value (cheapest first, with a random factor
     in ``[0.5, 1.5]``) until the GPUs freed would cover ``u``; ``u`` is recreated first;
   * *stranded*: the units with pods on up to ``STRANDED_NODES`` of its nodes that still have
     free GPU, plus up to ``EXTRA_VICTIMS`` other units of ``c``;
   * *random*: up to ``RANDOM_VICTIMS`` units of ``c``;
2. **Recreate**: the removed units and the unplaced units allowed in ``c`` are packed again
   (:func:`~placer.solver.heuristics.choose_and_pack`, the units' own node scoring) in one
   of three orders drawn at random — largest value first, most value per scarcest resource
   first (:func:`~placer.solver.portfolio.density_key`), or value with a random factor in
   ``[0.5, 1.5]``. A removed unit tries ``c`` first, then its other clusters by preference;
   an unplaced unit tries ``c`` only (nothing else changed for it);
3. **Accept** when the placement's value is at least the current one (placed value, then
   preference; equal moves let the search drift across plateaus), else undo.

Every intermediate placement is packed node by node, so every accepted placement is
realised. The search stops at the deadline, when the placed GPUs reach an upper bound (the
node-class LP's, when the caller has it), or after ``STALL_PER_UNIT`` iterations per unit
(at least ``MIN_STALL``) in a row without a strict gain, and draws from
``random.Random(seed)``: identical input and seed give identical answers when it ends by
that count.

On the multi-cluster benchmark's openb fleets (120 % load) the search takes the portfolio's
best hint (91-97 % of the bound) to 98-100 % within 3 s and to 99.7-100 % within 20 s
(``simulations/results``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from placer.solver.clock import Clock
from placer.solver.fragmentation import Mix
from placer.solver.heuristics import Placed, apply_placed, choose_and_pack, ffd_key
from placer.solver.packer import Packed
from placer.solver.portfolio import density_key, value_of
from placer.solver.problem import Unit
from placer.solver.state import BoolArray, ClusterState, IntArray, PodShape

__all__ = [
    "EXTRA_VICTIMS",
    "MIN_STALL",
    "RANDOM_VICTIMS",
    "ROOM_SHARE",
    "STALL_PER_UNIT",
    "STRANDED_NODES",
    "ruin_and_recreate",
]

#: share of the ruins that make room for one unplaced unit (the rest are split evenly
#: between stranded-node and random ruins).
ROOM_SHARE = 0.2
#: nodes with free GPU whose units one stranded-node ruin takes off, at most.
STRANDED_NODES = 6
#: further units of the cluster a stranded-node ruin takes off, at most.
EXTRA_VICTIMS = 3
#: units one random ruin takes off, at most.
RANDOM_VICTIMS = 8
#: iterations in a row without a strict gain after which the search ends: this many per
#: unit, and at least ``MIN_STALL`` (plateaus of a few hundred iterations are common before
#: a gain on the benchmark's 200-700 units).
STALL_PER_UNIT = 20
MIN_STALL = 200
#: after this many waiting units in a row were refused by the ruined cluster, which of the
#: rest may still fit is tested again (in one vectorised step).
RECHECK = 2


def ruin_and_recreate(
    best: Placed,
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    mix: Mix | None,
    clock: Clock,
    deadline: float,
    seed: int,
    gpu_bound: float | None = None,
    reserve: Callable[[int], float] | None = None,
) -> tuple[Placed, int]:
    """Search from ``best`` (see module docstring); returns the best placement found and the
    iterations that raised the value. ``gpu_bound``: an upper bound on the GPU thousandths any
    placement of ``units`` places; the search ends when the placement reaches it (only the
    minor cpu, pod and preference terms could still improve). ``reserve(n)``: seconds to
    leave before the deadline when ``n`` units are unplaced. The states are left as they
    were."""
    rng = random.Random(seed)
    marks = {name: state.mark() for name, state in states.items()}
    apply_placed(states, best)
    where: dict[int, tuple[str, Packed]] = {u.index: (c, p) for u, c, p in best}
    by_index = {u.index: u for u in units}
    # each cluster's units in the order of ``where`` (the order ruins draw them in)
    members: dict[str, dict[int, None]] = {name: {} for name in states}
    for index, (cluster, _) in where.items():
        members[cluster][index] = None
    table = _UnitTable(units, states)
    unplaced = table.unplaced(where)
    dense = density_key(units, states)
    names = list(states)
    current = value_of(best)
    gains = stall = 0
    patience = max(MIN_STALL, STALL_PER_UNIT * len(units))
    milli = sum(u.milli for u, _, _ in best)
    full = gpu_bound is not None and milli >= gpu_bound - 1e-6
    waiting_count = int(unplaced.sum())

    def stop_at() -> float:
        return deadline - (reserve(waiting_count) if reserve is not None else 0.0)

    end = stop_at()
    while clock() < end and stall < patience and not full:
        stall += 1
        name = rng.choices(names, [(states[n].totals()[1] + 1) ** 2 for n in names])[0]
        state = states[name]
        here = list(members[name])
        if not here:
            continue
        waiting = table.waiting(unplaced, name)
        victims, first = _ruin(rng, state, here, where, waiting, by_index)
        if not victims:
            continue
        mark = {n: s.mark() for n, s in states.items()}
        before = dict(where)
        saved = {name: dict(members[name])}
        value, preference = current
        trial = milli
        replays = []
        for index in victims:
            cluster, packed = where.pop(index)
            del members[cluster][index]
            replays.append(packed.replay)
            value -= by_index[index].value
            trial -= by_index[index].milli
            preference += by_index[index].rank[cluster]
        state.apply(replays, sign=-1)
        removed = set(victims)
        # unplaced units that cannot fit the cluster's free totals now never will in this
        # recreate (it only takes capacity): they are left out, as choose_and_pack would
        candidates = [by_index[i] for i in victims] + waiting
        draw = rng.random()
        if draw < 0.4:
            candidates.sort(key=ffd_key)
        elif draw < 0.7:
            candidates.sort(key=dense)
        else:
            factor = {u.index: rng.uniform(0.5, 1.5) for u in candidates}
            candidates.sort(key=lambda u: (-u.value * factor[u.index], u.index))
        possible = table.fitting(name, waiting)
        candidates = [u for u in candidates if u.index in removed or u.index in possible]
        if first is not None and first.index in possible:
            candidates.remove(first)
            candidates.insert(0, first)
        placed_now: set[int] = set()
        misses = 0  # waiting units refused since ``possible`` was computed
        for position, unit in enumerate(candidates):
            if unit.index in removed:
                # back where it was first, then its other clusters by preference
                order = [name, *(c for c in unit.allowed() if c != name)]
            else:
                if unit.index not in possible:
                    continue
                order = [name]
            choice = choose_and_pack("greedy", unit, states, order, mix=mix, explain=False)
            if choice.packed is not None and choice.cluster is not None:
                where[unit.index] = (choice.cluster, choice.packed)
                if choice.cluster not in saved:
                    saved[choice.cluster] = dict(members[choice.cluster])
                members[choice.cluster][unit.index] = None
                placed_now.add(unit.index)
                value += unit.value
                trial += unit.milli
                preference -= unit.rank[choice.cluster]
                misses = 0
            elif unit.index in possible:
                misses += 1
                if misses >= RECHECK:
                    # the cluster has filled up: which waiting units may still fit
                    later = [u for u in candidates[position + 1 :] if u.index in possible]
                    possible = table.fitting(name, later)
                    misses = 0
        if (value, preference) >= current:
            if (value, preference) > current:
                gains += 1
                stall = 0
            current, milli = (value, preference), trial
            full = gpu_bound is not None and milli >= gpu_bound - 1e-6
            table.mark(unplaced, removed, True)
            table.mark(unplaced, placed_now, False)
            if len(removed) != len(placed_now):
                waiting_count = int(unplaced.sum())
                end = stop_at()
        else:
            for n, s in states.items():
                s.undo(mark[n])
            where = before
            members.update(saved)
    placed = [(by_index[i], c, p) for i, (c, p) in where.items()]
    for name, state in states.items():
        state.undo(marks[name])
    return placed, gains


class _UnitTable:
    """The units of a search as arrays, by position in index order: which clusters each may
    use, its totals (scalar demand, GPU thousandths, idle devices its whole-GPU pods need) and
    its pod shapes, for vectorised tests over many unplaced units at once."""

    def __init__(self, units: Sequence[Unit], states: dict[str, ClusterState]) -> None:
        self.units = sorted(units, key=lambda u: u.index)
        self.position = {u.index: k for k, u in enumerate(self.units)}
        count = len(self.units)
        width = len(self.units[0].demand) if self.units else 0
        self.allowed = {
            name: np.array([name in u.rank for u in self.units], dtype=bool) for name in states
        }
        self.demand = (
            np.stack([u.demand for u in self.units]) if count else np.zeros((0, width), np.int64)
        )
        self.milli = np.array([u.milli for u in self.units], dtype=np.int64)
        self.whole = np.array(
            [sum(r.shape.gpus * r.count for r in u.runs) for u in self.units], dtype=np.int64
        )
        ids: dict[int, int] = {}
        self.shapes: list[PodShape] = []
        #: the distinct shape ids of each unit's pods, by unit index.
        self.shape_ids: dict[int, list[int]] = {}
        for unit in self.units:
            mine = []
            for run in unit.runs:
                sid = ids.get(id(run.shape))
                if sid is None:
                    sid = ids[id(run.shape)] = len(self.shapes)
                    self.shapes.append(run.shape)
                mine.append(sid)
            self.shape_ids[unit.index] = sorted(set(mine))
        # [units, most shapes of a unit]: shape ids, padded with an id that always fits
        depth = max((len(v) for v in self.shape_ids.values()), default=0)
        self.unit_shapes = np.full((count, max(depth, 1)), len(self.shapes), dtype=np.int64)
        for unit in self.units:
            sids = self.shape_ids[unit.index]
            self.unit_shapes[self.position[unit.index], : len(sids)] = sids
        self.req = (
            np.stack([s.req for s in self.shapes])
            if self.shapes
            else np.zeros((0, width), np.int64)
        )
        self.gpus = np.array([s.gpus for s in self.shapes], dtype=np.int64)
        self.share = np.array([s.share for s in self.shapes], dtype=np.int64)
        self.states = states
        self._eligible: dict[str, BoolArray] = {}

    def unplaced(self, where: dict[int, tuple[str, Packed]]) -> BoolArray:
        mask = np.ones(len(self.units), dtype=bool)
        mask[[self.position[i] for i in where]] = False
        return mask

    def mark(self, mask: BoolArray, indices: set[int], value: bool) -> None:
        if indices:
            mask[[self.position[i] for i in indices]] = value

    def waiting(self, unplaced: BoolArray, name: str) -> list[Unit]:
        """The unplaced units allowed in ``name``, in index order."""
        return [self.units[k] for k in np.flatnonzero(unplaced & self.allowed[name]).tolist()]

    def fitting(self, name: str, waiting: Sequence[Unit]) -> set[int]:
        """The units of ``waiting`` that may fit cluster ``name`` now: their totals fit its
        free totals, and each of their pods fits on some node. Both only get harder as the
        state fills, so a unit left out here would not pack later in the same recreate."""
        if not waiting:
            return set()
        state = self.states[name]
        rows = np.array([self.position[u.index] for u in waiting], dtype=np.int64)
        free, gpu, idle = state.totals()
        ok = (
            (self.milli[rows] <= gpu)
            & (self.whole[rows] <= idle)
            & (self.demand[rows] <= free).all(axis=1)
        )
        rows = rows[ok]
        if not rows.size:
            return set()
        shapes = self.unit_shapes[rows]
        sids = np.unique(shapes)
        sids = sids[sids < len(self.shapes)]
        fits = np.ones(len(self.shapes) + 1, dtype=bool)
        fits[sids] = self._fit_somewhere(name, sids)
        keep = rows[fits[shapes].all(axis=1)]
        return {self.units[k].index for k in keep.tolist()}

    def _fit_somewhere(self, name: str, sids: IntArray) -> BoolArray:
        """For each shape id: whether one more pod of it fits on some node of ``name`` now
        (the test of :meth:`ClusterState.fits_anywhere`, for many shapes in one step)."""
        state = self.states[name]
        eligible = self._eligible.get(name)
        if eligible is None:
            eligible = self._eligible[name] = (
                np.stack([state.eligible(s) for s in self.shapes], axis=1)
                if self.shapes
                else np.zeros((len(state), 0), dtype=bool)
            )
        pick = sids
        gpus, share = self.gpus[pick], self.share[pick]
        least = int((1000 * gpus + share).min())
        # a pod fits only on a usable node with at least its GPU thousandths free
        nodes = np.flatnonzero(state.usable & (state.devfree >= least))
        if not nodes.size:
            return np.zeros(len(sids), dtype=bool)
        ok = (state.free[nodes][:, None, :] >= self.req[pick][None, :, :]).all(axis=2)
        ok &= eligible[np.ix_(nodes, pick)]
        ok &= state.full[nodes][:, None] >= gpus[None, :]
        if share.any():
            ok &= state.maxdev[nodes][:, None] >= share[None, :]
        return cast("BoolArray", ok.any(axis=0))


def _ruin(
    rng: random.Random,
    state: ClusterState,
    here: list[int],
    where: dict[int, tuple[str, Packed]],
    waiting: list[Unit],
    by_index: dict[int, Unit],
) -> tuple[list[int], Unit | None]:
    """The units to take off ``state``'s cluster (indices; ``here`` are the units on it), and
    the unplaced unit (of ``waiting``, those allowed there) they make room for, if any."""
    draw = rng.random()
    if draw < ROOM_SHARE:
        free = state.totals()[1]
        big = [u for u in waiting if u.milli > free]
        if not big:
            return [], None
        unit = rng.choice(big)
        factor = {i: rng.uniform(0.5, 1.5) for i in here}
        lower = sorted(
            (i for i in here if by_index[i].value < unit.value),
            key=lambda i: (by_index[i].value * factor[i], i),
        )
        victims: list[int] = []
        for index in lower:
            if free >= unit.milli:
                break
            victims.append(index)
            free += by_index[index].milli
        return (victims, unit) if free >= unit.milli else ([], None)
    if draw < ROOM_SHARE + (1 - ROOM_SHARE) / 2:
        stranded = np.flatnonzero((state.devfree > 0) & state.usable).tolist()
        if not stranded:
            return [], None
        chosen = set(rng.sample(stranded, min(len(stranded), rng.randint(1, STRANDED_NODES))))
        victims = [i for i in here if not chosen.isdisjoint(where[i][1].replay.nodes.tolist())]
        extra = rng.sample(here, min(len(here), rng.randint(0, EXTRA_VICTIMS)))
        return list(dict.fromkeys(victims + extra)), None
    return rng.sample(here, min(len(here), rng.randint(1, RANDOM_VICTIMS))), None
