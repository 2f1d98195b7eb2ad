"""Node-realised local search: moves that change a complete placement and keep it realised.

Both moves work on the real node state (every intermediate placement is packed by
:mod:`placer.solver.packer`), so an accepted move is realised by construction, and each
accepted move raises the placed value.

* **Swap-in** (:func:`swap_in`): an unplaced unit ``u`` (largest value first) enters a
  cluster ``c`` by evicting placed units of lower value, smallest first, just enough of them
  that ``u`` packs (the GPU thousandths freed must cover ``u``'s first; then one more victim
  at a time, while the victims are worth less than ``u``); the evicted units are then
  re-placed anywhere they fit, largest first. The move is kept when ``u``'s value exceeds
  the value of the evicted units that found no place again. This is what a batch at
  overload needs: the last unplaced units are big gangs, the free capacity is scattered over
  partly used nodes, and small units can move into those scraps to make room.
* **Ejection** (:func:`eject`): an unplaced unit takes the place of one placed unit of lower
  value, which then tries every cluster again.

Sweeps repeat while a sweep accepts a move (at most ``MAX_SWEEPS``) and the deadline allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placer.solver.capacity import infeasible_alone
from placer.solver.clock import Clock
from placer.solver.fragmentation import Mix
from placer.solver.heuristics import Placed, apply_placed, choose_and_pack, ffd_key
from placer.solver.packer import Packed, pack
from placer.solver.problem import Unit
from placer.solver.state import ClusterState

__all__ = ["EJECT_CANDIDATES", "MAX_SWEEPS", "eject", "swap_in"]

#: sweeps of swap-in moves, at most.
MAX_SWEEPS = 4
#: placed units tried as victims per unplaced unit and cluster in the ejection repair.
EJECT_CANDIDATES = 6


def swap_in(
    best: Placed,
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    mix: Mix | None,
    clock: Clock,
    deadline: float,
) -> tuple[Placed, int]:
    """Swap-in sweeps (see module docstring) from ``best``; returns the placement and the
    moves accepted. The states are left as they were."""
    marks = {name: state.mark() for name, state in states.items()}
    apply_placed(states, best)
    where: dict[int, tuple[str, Packed]] = {u.index: (c, p) for u, c, p in best}
    by_index = {u.index: u for u in units}
    accepted = 0
    for _ in range(MAX_SWEEPS):
        moved = 0
        waiting = sorted((u for u in units if u.index not in where), key=ffd_key)
        for unit in waiting:
            if clock() > deadline:
                break
            if _swap_one(unit, where, by_index, states, mix):
                moved += 1
        accepted += moved
        if not moved or clock() > deadline:
            break
    for name, state in states.items():
        state.undo(marks[name])
    return [(by_index[i], c, p) for i, (c, p) in where.items()], accepted


def _swap_one(
    unit: Unit,
    where: dict[int, tuple[str, Packed]],
    by_index: dict[int, Unit],
    states: dict[str, ClusterState],
    mix: Mix | None,
) -> bool:
    """Try to bring ``unit`` in by one swap-in move; updates ``where`` when accepted."""
    clusters = [c for c in unit.allowed() if c in states]
    for name in sorted(clusters, key=lambda c: (-states[c].totals()[1], unit.rank[c], c)):
        state = states[name]
        victims = sorted(
            (
                by_index[i]
                for i, (c, _) in where.items()
                if c == name and by_index[i].value < unit.value
            ),
            key=lambda v: (v.value, v.index),
        )
        free = state.totals()[1]
        freed = np.cumsum([v.milli for v in victims], dtype=np.int64)
        lost = np.cumsum([v.value for v in victims], dtype=np.int64)
        # victims needed so that the GPU thousandths suffice
        first = int(np.searchsorted(freed, unit.milli - free)) if free < unit.milli else -1
        if first >= len(victims) or (first >= 0 and lost[first] >= unit.value):
            continue
        mark = state.mark()
        evicted = victims[: first + 1]
        state.apply([where[v.index][1].replay for v in evicted], sign=-1)
        packed: Packed | None = None
        following = first + 1
        while True:
            if not infeasible_alone(state, unit):
                result = pack(state, unit.runs, scoring=unit.scoring, mix=mix)
                if isinstance(result, Packed):
                    packed = result
                    break
            if following >= len(victims) or lost[following] >= unit.value:
                break
            victim = victims[following]
            following += 1
            state.apply([where[victim.index][1].replay], sign=-1)
            evicted.append(victim)
        if packed is None:
            state.undo(mark)
            continue
        others = {n: s.mark() for n, s in states.items()}
        back: dict[int, tuple[str, Packed]] = {}
        for victim in sorted(evicted, key=ffd_key):
            choice = choose_and_pack(
                "greedy", victim, states, victim.allowed(), mix=mix, explain=False
            )
            if choice.packed is not None and choice.cluster is not None:
                back[victim.index] = (choice.cluster, choice.packed)
        if unit.value > sum(v.value for v in evicted if v.index not in back):
            for victim in evicted:
                del where[victim.index]
            where.update(back)
            where[unit.index] = (name, packed)
            return True
        for n, s in states.items():
            s.undo(others[n])
        state.undo(mark)
    return False


def eject(
    best: Placed,
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    deadline: float,
    clock: Clock,
    mix: Mix | None,
) -> Placed:
    """Ejection repair (see module docstring): an unplaced unit (largest first) takes the
    place of one placed unit of lower value on a cluster, and the ejected unit tries every
    cluster again; at most ``EJECT_CANDIDATES`` victims are tried per unit and cluster. The
    states are left as they were."""
    marks = {name: state.mark() for name, state in states.items()}
    apply_placed(states, best)
    where: dict[int, tuple[str, Packed]] = {u.index: (c, p) for u, c, p in best}
    by_index = {u.index: u for u in units}
    waiting = sorted((u for u in units if u.index not in where), key=ffd_key)
    for unit in waiting:
        if clock() > deadline:
            break
        if unit.index in where:
            continue
        choice = choose_and_pack("greedy", unit, states, unit.allowed(), mix=mix, explain=False)
        if choice.packed is not None and choice.cluster is not None:
            where[unit.index] = (choice.cluster, choice.packed)
            continue
        for name in unit.allowed():
            state = states.get(name)
            if state is None or unit.index in where:
                continue
            victims = sorted(
                (
                    by_index[i]
                    for i, (c, _) in where.items()
                    if c == name and by_index[i].value < unit.value
                ),
                key=lambda v: (-v.value, v.index),
            )[:EJECT_CANDIDATES]
            for victim in victims:
                mark = state.mark()
                state.apply([where[victim.index][1].replay], sign=-1)
                result = pack(state, unit.runs, scoring=unit.scoring, mix=mix)
                if not isinstance(result, Packed):
                    state.undo(mark)
                    continue
                del where[victim.index]
                where[unit.index] = (name, result)
                again = choose_and_pack(
                    "greedy", victim, states, victim.allowed(), mix=mix, explain=False
                )
                if again.packed is not None and again.cluster is not None:
                    where[victim.index] = (again.cluster, again.packed)
                break
    for name, state in states.items():
        state.undo(marks[name])
    return [(by_index[i], c, p) for i, (c, p) in where.items()]
