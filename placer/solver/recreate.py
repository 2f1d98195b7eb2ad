"""Ruin and recreate: a large-neighbourhood search on real node state, until the deadline.

The portfolio's passes (:mod:`placer.solver.portfolio`) end, at overload, with GPUs
stranded: nodes still have one or two idle devices but too little cpu or memory left for any
unplaced pod, because cpu-heavy pods took it; and big gangs wait while small units sit on
the nodes they would need. Moving one or two units rarely repairs either (an earlier
swap-in/ejection descent stalled well below the bound on the multi-cluster benchmark);
re-choosing the pods of a handful of nodes does. Each iteration:

1. **Ruin**: pick a cluster ``c`` (weighted by the square of its free GPU thousandths + 1,
   so the clusters with the most stranded GPUs are revisited most); in ``SWAP_SHARE`` of the
   iterations try a *swap*: a unit of ``c`` that needs more cpu or memory per GPU than
   ``c``'s usable nodes offer (its *heaviness* there above 1; the heavier and bigger, the
   likelier) goes to a random cluster ``c'`` where its heaviness is below 1, and units of
   ``c'`` light enough for ``c`` (lightest first, with a random factor in ``[0.5, 1.5]``)
   are taken off ``c'`` until its free GPUs would cover the moving unit; the moving unit
   tries ``c'`` first, the light ones ``c``, and the unplaced units allowed in either try
   ``c`` then ``c'``. Else, in ``EXCHANGE_SHARE`` of the iterations, an *exchange*: let
   ``r`` be the least cpu per GPU of the unplaced units with GPUs allowed in ``c``; pick up
   to ``SWEEP_NODES`` nodes of ``c`` whose free cpu is less than ``r`` per idle GPU (when no
   such unit waits, one node with an idle GPU). For each in turn, up to ``EXCHANGES`` times
   and until its free cpu reaches ``r`` per idle GPU, its whole-GPU pod needing the most cpu
   trades places with a pod of another node of ``c`` that needs as many GPUs and no more of
   anything, where that node has room for the difference: a node without idle GPUs when
   one qualifies (its spare cores strand nothing), then the pod giving the most cpu back —
   devices stay where they are, units stay in ``c``, and the idle GPUs get the cores that
   stranded them. Then the unplaced units allowed in ``c`` are packed (below). Otherwise
   take off ``c`` one of:

   * *room* (``ROOM_SHARE`` of the ruins): for an unplaced unit ``u`` allowed in ``c`` that
     does not fit its free GPUs, units of lower value (cheapest first, with a random factor
     in ``[0.5, 1.5]``) until the GPUs freed would cover ``u``; ``u`` is recreated first;
   * *stranded*: the units with pods on up to ``STRANDED_NODES`` of its nodes that still have
     free GPU, plus up to ``EXTRA_VICTIMS`` other units of ``c``;
   * *random*: up to ``RANDOM_VICTIMS`` units of ``c``;
2. **Recreate**: the removed units and the unplaced units allowed in ``c`` are packed again
   (:func:`~placer.solver.heuristics.choose_and_pack`, the units' own node scoring) in one
   of three orders drawn at random — largest value first, most value per share of the ruined
   cluster's scarcest resource first (:func:`~placer.solver.portfolio.cluster_density_keys`,
   on its free totals before the search: cpu-heavy units rank low in a cluster with few
   cores per GPU), or value with a random factor in ``[0.5, 1.5]``. A removed unit tries
   ``c`` first, then its other clusters by preference; an unplaced unit tries ``c`` only
   (nothing else changed for it). Unplaced units whose
   totals or node-by-node copies (:class:`~placer.solver.state.CopiesTable`) no longer fit
   a ruined cluster are left out at once, in one vectorised test over all of them, and
   tested again after refusals: the recreate only takes capacity, so they would not pack;
3. **Accept** when the placement's value is at least the current one (placed value, then
   preference; equal moves let the search drift across plateaus), else undo.

Every intermediate placement is packed node by node, so every accepted placement is
realised. The search stops at the deadline, when the placed GPUs reach an upper bound (the
node-class LP's, when the caller has it), or after ``STALL_PER_UNIT`` iterations per unit
(at least ``MIN_STALL``) in a row without a strict gain, and draws from
``random.Random(seed)``: identical input and seed give identical answers when it ends by
that count.

How far it gets in a given time on the multi-cluster benchmark is in
``simulations/results`` (``bench_multicluster``, ``bench_scaling``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from placer.solver.clock import Clock
from placer.solver.fragmentation import FloatArray, Mix
from placer.solver.heuristics import Placed, apply_placed, choose_and_pack, ffd_key
from placer.solver.packer import Packed
from placer.solver.portfolio import cluster_density_keys, value_of
from placer.solver.problem import Unit
from placer.solver.state import BoolArray, ClusterState, IntArray, PodShape, Replay

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
#: unit, and at least ``MIN_STALL`` (long plateaus before a gain are common on batches of
#: hundreds of units).
STALL_PER_UNIT = 20
MIN_STALL = 200
#: after this many waiting units in a row were refused by the ruined cluster, which of the
#: rest may still fit is tested again (in one vectorised step).
RECHECK = 2
#: share of the iterations that try the swap ruin, and of the others that try the exchange
#: ruin, and the pod exchanges one makes (tuned side by side on the multi-cluster benchmark at
#: 1 s, several search seeds: simulations/README.md, "Behind the code's constants").
SWAP_SHARE = 0.3
EXCHANGE_SHARE = 0.4
EXCHANGES = 2
#: packings whose whole-GPU pods the exchange ruin keeps as arrays, at most.
POD_CACHE = 4096
#: nodes one exchange ruin trades for, at most.
SWEEP_NODES = 40


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
    marks = {name: state.mark() for name, state in states.items()}
    search = _Search(best, units, states, mix=mix, seed=seed)
    gains = stall = 0
    patience = max(MIN_STALL, STALL_PER_UNIT * len(units))
    full = gpu_bound is not None and search.milli >= gpu_bound - 1e-6
    waiting_count = search.unplaced_count()

    def stop_at() -> float:
        return deadline - (reserve(waiting_count) if reserve is not None else 0.0)

    end = stop_at()
    while clock() < end and stall < patience and not full:
        stall += 1
        outcome = search.step()
        if outcome is None or not outcome.accepted:
            continue
        if outcome.gain:
            gains += 1
            stall = 0
        full = gpu_bound is not None and search.milli >= gpu_bound - 1e-6
        if outcome.count_changed:
            waiting_count = search.unplaced_count()
            end = stop_at()
    placed = search.placed()
    for name, state in states.items():
        state.undo(marks[name])
    return placed, gains


@dataclass(frozen=True)
class _Outcome:
    accepted: bool
    gain: bool = False
    #: the number of unplaced units changed.
    count_changed: bool = False


@dataclass
class _Plan:
    """One ruin: the units to take off (indices), the clusters to recreate (the ruined one
    first), and the unplaced unit they make room for, recreated first."""

    victims: list[int]
    clusters: list[str]
    first: Unit | None = None
    #: victims to try in another cluster first (the swap ruin), recreated before the rest.
    toward: dict[int, str] = field(default_factory=dict)
    #: the exchange ruin's nodes: pods on them trade places first (no victims then).
    exchange: list[int] | None = None
    #: the exchange ruin's target: free cpu per idle GPU a node stops trading at (0: none).
    target: float = 0.0


class _Search:
    """The search's current placement on the states, and one iteration of it (``step``)."""

    def __init__(
        self,
        best: Placed,
        units: Sequence[Unit],
        states: dict[str, ClusterState],
        *,
        mix: Mix | None,
        seed: int,
    ) -> None:
        self.rng = random.Random(seed)
        self.states = states
        self.mix = mix
        # the density order per ruined cluster, on the free totals before the search
        self.dense = cluster_density_keys(states)
        apply_placed(states, best)
        self.where: dict[int, tuple[str, Packed]] = {u.index: (c, p) for u, c, p in best}
        self.by_index = {u.index: u for u in units}
        # each cluster's units in the order of ``where`` (the order ruins draw them in)
        self.members: dict[str, dict[int, None]] = {name: {} for name in states}
        for index, (cluster, _) in self.where.items():
            self.members[cluster][index] = None
        self.table = _UnitTable(units, states)
        #: per packing (by id, with the packing kept alive): ``_whole_pods``.
        self._pods: dict[int, tuple[Packed, tuple[IntArray, IntArray, IntArray]]] = {}
        self.unplaced = self.table.unplaced(self.where)
        self.names = list(states)
        self.current = value_of(best)
        self.milli = sum(u.milli for u, _, _ in best)

    def unplaced_count(self) -> int:
        return int(self.unplaced.sum())

    def placed(self) -> Placed:
        return [(self.by_index[i], c, p) for i, (c, p) in self.where.items()]

    def step(self) -> _Outcome | None:
        """One ruin and recreate; ``None`` when the drawn ruin takes nothing off."""
        rng, states = self.rng, self.states
        name = rng.choices(self.names, [(states[n].totals()[1] + 1) ** 2 for n in self.names])[0]
        here = list(self.members[name])
        if not here:
            return None
        if SWAP_SHARE and rng.random() < SWAP_SHARE:
            plan = self._swap(name, here)
            return self._recreate(plan) if plan is not None else None
        if EXCHANGE_SHARE and rng.random() < EXCHANGE_SHARE:
            plan = self._exchange_plan(name)
            return self._recreate(plan) if plan is not None else None
        waiting = self.table.waiting(self.unplaced, name)
        victims, first = _ruin(rng, states[name], here, self.where, waiting, self.by_index)
        if not victims:
            return None
        return self._recreate(_Plan(victims=victims, clusters=[name], first=first))

    def _swap(self, name: str, here: list[int]) -> _Plan | None:
        """The swap ruin (see the module docstring): a unit of ``name`` that needs more cpu
        or memory per GPU than the cluster offers goes to a cluster that offers more, whose
        lightest units make room for it and come to ``name``."""
        rng, table, by_index = self.rng, self.table, self.by_index
        heavy = [i for i in here if table.heaviness(i, name) > 1.0]
        if not heavy:
            return None
        # the heavier and bigger, the likelier to move
        mover = rng.choices(
            heavy, [(table.heaviness(i, name) - 1.0) * by_index[i].milli + 1 for i in heavy]
        )[0]
        unit = by_index[mover]
        targets = [
            c
            for c in unit.allowed()
            if c != name and c in self.states and table.heaviness(mover, c) < 1.0
        ]
        if not targets:
            return None
        target = rng.choice(targets)
        free = self.states[target].totals()[1]
        light = [
            i
            for i in self.members[target]
            if name in by_index[i].rank and table.heaviness(i, name) < 1.0
        ]
        factor = {i: rng.uniform(0.5, 1.5) for i in light}
        light.sort(key=lambda i: (table.heaviness(i, name) * factor[i], i))
        victims = [mover]
        for index in light:
            if free >= unit.milli:
                break
            victims.append(index)
            free += by_index[index].milli
        if free < unit.milli:
            return None
        toward = {i: (target if i == mover else name) for i in victims}
        return _Plan(victims=victims, clusters=[name, target], toward=toward)

    def _exchange_plan(self, name: str) -> _Plan | None:
        """The exchange ruin's nodes (see the module docstring): when units with GPUs wait
        for ``name``, up to ``SWEEP_NODES`` of its nodes whose free cpu per idle GPU is less
        than the lightest of them needs; else one node with an idle GPU."""
        rng, state = self.rng, self.states[name]
        idle = (state.full > 0) & state.usable
        target = self.table.lightest(self.unplaced, name)
        if target > 0:
            short = np.flatnonzero(idle & (state.free[:, 0] < target * state.full)).tolist()
            if not short:
                return None
            nodes = rng.sample(short, min(len(short), SWEEP_NODES))
        else:
            some = np.flatnonzero(idle).tolist()
            if not some:
                return None
            nodes = [rng.choice(some)]
        return _Plan(victims=[], clusters=[name], exchange=nodes, target=target)

    def _exchange(self, name: str, nodes: list[int], target: float) -> None:
        """The exchange ruin's first step, for each of ``nodes`` in turn: up to ``EXCHANGES``
        times, the whole-GPU pod of the node that needs the most cpu trades places with a
        pod of another node of the cluster that needs as many GPUs and less cpu, where that
        node has room for the difference (a node without idle GPUs when there is one, then
        the pod that gets the most cpu back). Devices stay where they are; the node keeps
        its idle GPUs and gains the cores (and memory) the unplaced units may need there.
        A node stops trading once its free cpu per idle GPU reaches ``target`` (0: never)."""
        state, table, where = self.states[name], self.table, self.where
        members = list(self.members[name])
        parts = [self._whole_pods(where[i][1]) for i in members]
        counts = [len(part[0]) for part in parts]
        if not sum(counts):
            return
        # the cluster's whole-GPU pods: unit, position in its packing, node, shape id
        unit_of = np.repeat(np.array(members, dtype=np.int64), counts)
        k_of = np.concatenate([part[0] for part in parts])
        on = np.concatenate([part[1] for part in parts])
        sid = np.concatenate([part[2] for part in parts])
        req, gpus = table.req[sid], table.gpus[sid]
        eligible = table.eligible(name)  # [nodes, shapes]
        for node in nodes:
            for _ in range(EXCHANGES):
                if target and state.free[node, 0] >= target * state.full[node]:
                    break
                mine = np.flatnonzero(on == node)
                if not mine.size:
                    break
                heavy = int(mine[np.argmax(req[mine, 0])])
                delta = req[heavy] - req  # [pods, K]: what each other pod's node would give up
                fits = (
                    (on != node)
                    & (gpus == gpus[heavy])
                    & (delta[:, 0] > 0)
                    & (delta >= 0).all(axis=1)
                    & eligible[node, sid]
                    & eligible[on, sid[heavy]]
                    & (state.free[on] >= delta).all(axis=1)
                )
                options = np.flatnonzero(fits)
                if not options.size:
                    break
                # the cores come from a node without idle GPUs when one has them to give
                spare = state.full[on[options]] == 0
                if spare.any():
                    options = options[spare]
                light = int(options[np.argmax(delta[options, 0])])
                other = int(on[light])
                state.shift(node, other, delta[light])
                first = (int(unit_of[heavy]), int(k_of[heavy]))
                second = (int(unit_of[light]), int(k_of[light]))
                first_devices = where[first[0]][1].pods[first[1]][3]
                second_devices = where[second[0]][1].pods[second[1]][3]
                self._trade(first, other, second_devices, second, node, first_devices)
                on[heavy], on[light] = other, node

    def _whole_pods(self, packed: Packed) -> tuple[IntArray, IntArray, IntArray]:
        """The whole-GPU pods of ``packed``: their positions in it, nodes and shape ids
        (kept per packing: packings are immutable)."""
        known = self._pods.get(id(packed))
        if known is not None and known[0] is packed:
            return known[1]
        if len(self._pods) >= POD_CACHE:
            self._pods.clear()
        table = self.table
        rows = [
            (k, node, table.shape_id[id(run.shape)])
            for k, (run, _, node, _) in enumerate(packed.pods)
            if _whole(run.shape)
        ]
        arrays = (
            np.array([r[0] for r in rows], dtype=np.int64),
            np.array([r[1] for r in rows], dtype=np.int64),
            np.array([r[2] for r in rows], dtype=np.int64),
        )
        self._pods[id(packed)] = (packed, arrays)
        return arrays

    def _trade(
        self,
        first: tuple[int, int],
        first_node: int,
        first_devices: tuple[int, ...],
        second: tuple[int, int],
        second_node: int,
        second_devices: tuple[int, ...],
    ) -> None:
        """Rewrite the packings of two pods that traded places: each gets the other's node
        and devices."""
        for (index, k), node, devices in (
            (first, first_node, first_devices),
            (second, second_node, second_devices),
        ):
            cluster, packed = self.where[index]
            pods = list(packed.pods)
            run, replica, _, _ = pods[k]
            pods[k] = (run, replica, node, devices)
            self.where[index] = (cluster, Packed(pods=tuple(pods), score=packed.score))

    def _recreate(self, plan: _Plan) -> _Outcome:
        """Take ``plan``'s victims off, pack them and the unplaced units allowed in its
        clusters again, and keep the result if the value does not drop."""
        rng, states, where, members, by_index = (
            self.rng,
            self.states,
            self.where,
            self.members,
            self.by_index,
        )
        mark = {n: s.mark() for n, s in states.items()}
        before = dict(where)
        saved = {c: dict(members[c]) for c in plan.clusters}
        for index in plan.victims:
            cluster = where[index][0]
            if cluster not in saved:
                saved[cluster] = dict(members[cluster])
        if plan.exchange is not None:
            self._exchange(plan.clusters[0], plan.exchange, plan.target)
        value, preference = self.current
        trial = self.milli
        replays: dict[str, list[Replay]] = {}
        origin: dict[int, str] = {}
        for index in plan.victims:
            cluster, packed = where.pop(index)
            del members[cluster][index]
            origin[index] = cluster
            replays.setdefault(cluster, []).append(packed.replay)
            value -= by_index[index].value
            trial -= by_index[index].milli
            preference += by_index[index].rank[cluster]
        for cluster, taken in replays.items():
            states[cluster].apply(taken, sign=-1)
        removed = set(plan.victims)
        waiting = self.table.waiting_any(self.unplaced, plan.clusters)
        candidates = [by_index[i] for i in plan.victims] + waiting
        draw = rng.random()
        if draw < 0.4:
            candidates.sort(key=ffd_key)
        elif draw < 0.7:
            candidates.sort(key=self.dense[plan.clusters[0]])
        else:
            factor = {u.index: rng.uniform(0.5, 1.5) for u in candidates}
            candidates.sort(key=lambda u: (-u.value * factor[u.index], u.index))
        # unplaced units that cannot fit a ruined cluster now never will in this recreate
        # (it only takes capacity): they are left out, as choose_and_pack would leave them
        possible = {
            c: self.table.fitting(c, [u for u in waiting if c in u.rank]) for c in plan.clusters
        }
        anywhere = set().union(*possible.values())
        candidates = [u for u in candidates if u.index in removed or u.index in anywhere]
        first = plan.first
        if first is not None and first.index in anywhere:
            candidates.remove(first)
            candidates.insert(0, first)
        if plan.toward:
            # the units the swap moves first, the rest after them
            moving = [by_index[i] for i in plan.victims if i in plan.toward]
            candidates = moving + [u for u in candidates if u.index not in plan.toward]
        placed_now: set[int] = set()
        misses = dict.fromkeys(plan.clusters, 0)  # refusals since ``possible`` was computed
        for position, unit in enumerate(candidates):
            if unit.index in removed:
                # back where it was first (or where the swap sends it, then back), then its
                # other clusters by preference
                home = origin[unit.index]
                order = [home, *(c for c in unit.allowed() if c != home)]
                target = plan.toward.get(unit.index)
                if target is not None:
                    order = [target, *(c for c in order if c != target)]
            else:
                order = [c for c in plan.clusters if unit.index in possible[c]]
                if not order:
                    continue
            choice = choose_and_pack("greedy", unit, states, order, mix=self.mix, explain=False)
            if choice.packed is not None and choice.cluster is not None:
                where[unit.index] = (choice.cluster, choice.packed)
                if choice.cluster not in saved:
                    saved[choice.cluster] = dict(members[choice.cluster])
                members[choice.cluster][unit.index] = None
                placed_now.add(unit.index)
                value += unit.value
                trial += unit.milli
                preference -= unit.rank[choice.cluster]
                if choice.cluster in misses:
                    misses[choice.cluster] = 0
            elif unit.index not in removed:
                for cluster in order:
                    misses[cluster] += 1
                    if misses[cluster] >= RECHECK:
                        # the cluster has filled up: which waiting units may still fit
                        later = [
                            u for u in candidates[position + 1 :] if u.index in possible[cluster]
                        ]
                        possible[cluster] = self.table.fitting(cluster, later)
                        misses[cluster] = 0
        if (value, preference) < self.current:
            for n, s in states.items():
                s.undo(mark[n])
            self.where = before
            members.update(saved)
            return _Outcome(accepted=False)
        gain = (value, preference) > self.current
        self.current, self.milli = (value, preference), trial
        self.table.mark(self.unplaced, removed, True)
        self.table.mark(self.unplaced, placed_now, False)
        return _Outcome(accepted=True, gain=gain, count_changed=len(removed) != len(placed_now))


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
        #: shape id by ``id(shape)``.
        self.shape_id: dict[int, int] = {}
        ids = self.shape_id
        self.shapes: list[PodShape] = []
        #: the pods of each distinct shape of each unit, by unit index.
        pods: dict[int, dict[int, int]] = {}
        for unit in self.units:
            mine = pods[unit.index] = {}
            for run in unit.runs:
                sid = ids.get(id(run.shape))
                if sid is None:
                    sid = ids[id(run.shape)] = len(self.shapes)
                    self.shapes.append(run.shape)
                mine[sid] = mine.get(sid, 0) + run.count
        # [units, most shapes of a unit]: shape ids and pods, padded with an id that always
        # fits and no pods
        depth = max((len(v) for v in pods.values()), default=0)
        self.unit_shapes = np.full((count, max(depth, 1)), len(self.shapes), dtype=np.int64)
        self.unit_pods = np.zeros((count, max(depth, 1)), dtype=np.int64)
        for unit in self.units:
            sids = sorted(pods[unit.index])
            self.unit_shapes[self.position[unit.index], : len(sids)] = sids
            self.unit_pods[self.position[unit.index], : len(sids)] = [
                pods[unit.index][sid] for sid in sids
            ]
        self.req = (
            np.stack([s.req for s in self.shapes])
            if self.shapes
            else np.zeros((0, width), np.int64)
        )
        self.gpus = np.array([s.gpus for s in self.shapes], dtype=np.int64)
        self.share = np.array([s.share for s in self.shapes], dtype=np.int64)
        self.states = states
        # cpu and memory per GPU thousandth: each unit's, and what each cluster's usable
        # nodes offer (their allocatable over their devices)
        self.per_gpu = self.demand[:, :2] / np.maximum(self.milli, 1)[:, None]
        self.offer: dict[str, FloatArray] = {}
        for name, state in states.items():
            usable = state.usable
            gpus = 1000.0 * float((state.ndev[usable]).sum())
            self.offer[name] = state.cap[usable, :2].sum(axis=0) / max(gpus, 1.0)
        self._eligible: dict[str, BoolArray] = {}
        #: per cluster: each shape's column in the state's copies table (-1: not tracked).
        self._tracked: dict[str, IntArray] = {}

    def eligible(self, name: str) -> BoolArray:
        """``[nodes, shapes]``: where in cluster ``name`` each shape's pods may go."""
        eligible = self._eligible.get(name)
        if eligible is None:
            state = self.states[name]
            eligible = self._eligible[name] = (
                np.stack([state.eligible(s) for s in self.shapes], axis=1)
                if self.shapes
                else np.zeros((len(state), 0), dtype=bool)
            )
        return eligible

    def heaviness(self, index: int, name: str) -> float:
        """How many times more cpu or memory per GPU unit ``index`` needs than cluster
        ``name`` offers (0 for a unit without GPUs)."""
        position = self.position[index]
        if not self.milli[position]:
            return 0.0
        return float((self.per_gpu[position] / np.maximum(self.offer[name], 1e-12)).max())

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

    def lightest(self, unplaced: BoolArray, name: str) -> float:
        """The least cpu per GPU of the unplaced units allowed in ``name`` that have GPUs
        (0 when there is none)."""
        rows = np.flatnonzero(unplaced & self.allowed[name] & (self.milli > 0))
        if not rows.size:
            return 0.0
        return float(1000.0 * self.per_gpu[rows, 0].min())

    def waiting_any(self, unplaced: BoolArray, names: Sequence[str]) -> list[Unit]:
        """The unplaced units allowed in any of ``names``, in index order."""
        allowed = self.allowed[names[0]]
        for name in names[1:]:
            allowed = allowed | self.allowed[name]
        return [self.units[k] for k in np.flatnonzero(unplaced & allowed).tolist()]

    def fitting(self, name: str, waiting: Sequence[Unit]) -> set[int]:
        """The units of ``waiting`` that may fit cluster ``name`` now: their totals fit its
        free totals, and the nodes hold, each alone, as many pods of each of their shapes
        as they have. Both only get harder as the state fills, so a unit left out here would
        not pack later in the same recreate."""
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
        copies = np.full(len(self.shapes) + 1, np.iinfo(np.int64).max, dtype=np.int64)
        copies[sids] = self._copies(name, sids)
        keep = rows[(copies[shapes] >= self.unit_pods[rows]).all(axis=1)]
        return {self.units[k].index for k in keep.tolist()}

    def _copies(self, name: str, sids: IntArray) -> IntArray:
        """For each shape id: the pods of it the nodes of ``name`` hold now, each node alone
        (:meth:`ClusterState.copies_total`, for many shapes in one step)."""
        state = self.states[name]
        gpus, share, req = self.gpus[sids], self.share[sids], self.req[sids]
        least = int((1000 * gpus + share).min())
        # a pod fits only on a usable node with at least its GPU thousandths free
        nodes = np.flatnonzero(state.usable & (state.devfree >= least))
        table = state.table
        # the state's table, when bringing it up to date costs less than counting here
        if table is not None and len(table.dirty) * len(table.index) <= nodes.size * len(sids):
            table.refresh(state)
            where = self._tracked.get(name)
            if where is None:
                where = self._tracked[name] = np.array(
                    [table.index.get(id(s), -1) for s in self.shapes], dtype=np.int64
                )
            if (where[sids] >= 0).all():
                result: IntArray = table.total[where[sids]]
                return result
        eligible = self.eligible(name)
        if not nodes.size:
            return np.zeros(len(sids), dtype=np.int64)
        big = np.iinfo(np.int64).max // 4
        most = np.where(
            req[None, :, :] > 0,
            state.free[nodes][:, None, :] // np.maximum(req, 1)[None, :, :],
            big,
        ).min(axis=2)
        if gpus.any():
            whole = state.full[nodes][:, None] // np.maximum(gpus, 1)[None, :]
            most = np.minimum(most, np.where(gpus[None, :] > 0, whole, big))
        if share.any():
            devices = np.maximum(state.dev[nodes], 0)[:, :, None]
            shared = (devices // np.maximum(share, 1)[None, None, :]).sum(axis=1)
            most = np.minimum(most, np.where(share[None, :] > 0, shared, big))
        most = np.where(eligible[np.ix_(nodes, sids)], np.maximum(most, 0), 0)
        return cast("IntArray", most.sum(axis=0))


def _whole(shape: PodShape) -> bool:
    """Whether pods of ``shape`` take whole GPUs only (the pods an exchange trades)."""
    return bool(shape.gpus) and not shape.share


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
