"""Upper bounds of a stream: what no placement policy could beat on the same arrivals.

A stream (:mod:`placer.simulate.engine`, mode ``stream``) decides many times; a workload that
waits is in every decision until it starts. The bounds of those decisions therefore cannot be
added up: a workload would count once per retry, and the sum can exceed every GPU ever asked
for. The stream as a whole has two bounds of its own, valid for *any* policy that places the
same timed workloads on the same fleet (symbols in GPU thousandths and seconds):

* ``C`` — the fleet's free GPU capacity before the stream (usable nodes of reachable
  clusters); the snapshot's own pods never leave, the stream's workloads share the rest;
* ``g_i``, ``a_i``, ``d_i`` — workload *i*'s GPUs, arrival and run time (``d_i = ∞``: it never
  departs);
* ``F`` — the workloads that could run on the empty-of-workloads fleet *on their own*, by
  necessary conditions only: one cluster whose free totals cover the workload
  (:func:`placer.simulate.capacity.shortfall`) and, for every component, a node of that cluster
  that accepts its pod (selectors, affinity, taints, cordons) and has room for one pod by its
  requests. A workload outside ``F`` can never be placed, by anyone.

**Placed GPUs over the stream**::

    B_placed = Σ_{i ∈ F, d_i < ∞} g_i  +  min(C, Σ_{i ∈ F, d_i = ∞} g_i)

Every workload is placed at most once; one outside ``F`` never is; the workloads that never
depart are all running at the end, so together they fit in ``C``.

**GPU-time inside the arrival window** ``[t0, t1]`` (first to last arrival; GPU-seconds):
the optimum ``B_time`` of the *fluid relaxation* — each workload may run preemptively and in
any fraction, subject only to

1. nothing runs before it arrives: workload *i* uses at most ``g_i`` at any ``t ≥ a_i``, and
   none before;
2. at most ``g_i · min(d_i, t1 − a_i)`` GPU-seconds of workload *i* fall inside the window
   (whenever it starts, at or after ``a_i``, at most that much of its run time is left before
   ``t1``);
3. all workloads together use at most ``C`` at any time;
4. workloads outside ``F`` use nothing.

A real schedule (start ``s_i ≥ a_i``, all ``g_i`` for ``d_i``, or never) satisfies all four, so
its GPU-time in the window is at most ``B_time``. ``B_time`` is a maximum flow on a
time-expanded network: source → workload *i* (capacity from 2), workload *i* → interval *k*
(``g_i ×`` the part of the interval after ``a_i``, from 1), interval *k* → sink (``C ×`` its
length, from 3). The intervals are cut at the arrival times; with more than
:data:`MAX_INTERVALS` distinct arrivals, at evenly spaced ones of them — a coarser cut only
enforces 1 and 3 on longer intervals, so the bound stays valid, a little looser. Capacities are
rounded up to whole thousandth-seconds (again: never below the exact value).

What the bounds ignore (so they may not be attainable): packing onto nodes, gangs' all-or-nothing
start, run-to-completion, one cluster per workload, the decision epoch. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from ortools.graph.python import max_flow

from placer.model import Cluster, Fleet, PodDemand, Workload
from placer.podspec import node_mismatch
from placer.simulate.capacity import NodeRoom, free_totals, gpu_milli, shortfall
from placer.simulate.engine import Outcome, Timed
from placer.solver.state import constraint_key

__all__ = ["MAX_INTERVALS", "StreamBounds", "placed_gpu_time", "stream_bounds"]

#: most intervals of the time-expanded network (see the module docstring).
MAX_INTERVALS = 400


@dataclass(frozen=True)
class StreamBounds:
    """The two bounds of a stream and what they were computed from."""

    #: C: free GPU thousandths of the fleet before the stream.
    capacity_milli: int
    #: per input workload: in F (it could run on the fleet on its own).
    runnable: tuple[bool, ...]
    #: B_placed, GPU thousandths.
    placed_gpu_milli: int
    #: the arrival window [t0, t1], seconds.
    window_start_s: float
    window_end_s: float
    #: B_time, GPU thousandths × seconds.
    gpu_time_milli_s: int
    #: intervals of the time-expanded network.
    intervals: int


def stream_bounds(items: Sequence[Timed], fleet: Fleet) -> StreamBounds:
    """B_placed and B_time of ``items`` streamed onto ``fleet`` (see the module docstring)."""
    capacity = sum(t.gpu_milli for t in free_totals(fleet).values())
    runnable = _runnable([item.workload for item in items], fleet)
    demand = [gpu_milli(item.workload.total_requests()) for item in items]
    finite = forever = 0
    for g, ok, item in zip(demand, runnable, items, strict=True):
        if not ok:
            continue
        if item.duration_s is None:
            forever += g
        else:
            finite += g
    placed = finite + min(capacity, forever)
    arrivals = [item.arrival_s for item in items]
    start, end = (min(arrivals), max(arrivals)) if arrivals else (0.0, 0.0)
    time_bound, intervals = _gpu_time_bound(items, demand, runnable, capacity, start, end)
    return StreamBounds(
        capacity_milli=capacity,
        runnable=tuple(runnable),
        placed_gpu_milli=placed,
        window_start_s=start,
        window_end_s=end,
        gpu_time_milli_s=time_bound,
        intervals=intervals,
    )


def placed_gpu_time(
    items: Sequence[Timed], outcomes: Sequence[Outcome], start_s: float, end_s: float
) -> float:
    """GPU thousandths × seconds the placed workloads held inside ``[start_s, end_s]``."""
    total = 0.0
    for item, outcome in zip(items, outcomes, strict=True):
        if outcome.start_s is None:
            continue
        until = end_s if outcome.end_s is None else min(end_s, outcome.end_s)
        held = until - max(start_s, outcome.start_s)
        if held > 0:
            total += gpu_milli(item.workload.total_requests()) * held
    return total


# --------------------------------------------------------------------------------------------
# F: could the workload run on the fleet on its own?


def _runnable(workloads: Sequence[Workload], fleet: Fleet) -> list[bool]:
    totals = free_totals(fleet)
    clusters = [c for c in fleet.clusters if c.name in totals]
    rooms = {c.name: [NodeRoom(n) for n in c.nodes if n.usable] for c in clusters}
    accepts: dict[tuple[str, Hashable], bool] = {}

    def some_node_takes(cluster: Cluster, pod: PodDemand) -> bool:
        key = (cluster.name, (tuple(sorted(pod.requests.items())), constraint_key(pod)))
        if key not in accepts:
            accepts[key] = any(
                room.fits(pod) and node_mismatch(pod, room.node) is None
                for room in rooms[cluster.name]
            )
        return accepts[key]

    return [
        any(
            shortfall(workload, totals[cluster.name]) is None
            and all(some_node_takes(cluster, c.pod) for c in workload.components)
            for cluster in clusters
        )
        for workload in workloads
    ]


# --------------------------------------------------------------------------------------------
# B_time: the fluid relaxation as a maximum flow


def _gpu_time_bound(
    items: Sequence[Timed],
    demand: Sequence[int],
    runnable: Sequence[bool],
    capacity: int,
    start: float,
    end: float,
) -> tuple[int, int]:
    """(B_time, intervals used); ``(0, 0)`` for an empty window or nothing runnable."""
    jobs = [
        (item.arrival_s, g, item.duration_s)
        for item, g, ok in zip(items, demand, runnable, strict=True)
        if ok and g > 0 and item.arrival_s < end
    ]
    if end <= start or not jobs or capacity <= 0:
        return 0, 0
    cuts = _cuts(sorted({a for a, _, _ in jobs}), start, end)
    lengths = np.diff(cuts)
    count = len(lengths)
    source, sink = 0, 1
    tails: list[np.ndarray] = []
    heads: list[np.ndarray] = []
    caps: list[np.ndarray] = []
    for j, (arrival, g, duration) in enumerate(jobs):
        node = 2 + j
        window = end - arrival if duration is None else min(duration, end - arrival)
        tails.append(np.array([source]))
        heads.append(np.array([node]))
        caps.append(np.array([math.ceil(g * window)]))
        first = int(np.searchsorted(cuts, arrival, side="right")) - 1
        usable = lengths[first:].copy()
        usable[0] = cuts[first + 1] - arrival  # the part of its first interval after arrival
        tails.append(np.full(count - first, node))
        heads.append(2 + len(jobs) + np.arange(first, count))
        caps.append(np.ceil(g * usable).astype(np.int64))
    intervals = 2 + len(jobs) + np.arange(count)
    tails.append(intervals)
    heads.append(np.full(count, sink))
    caps.append(np.ceil(capacity * lengths).astype(np.int64))
    flow = max_flow.SimpleMaxFlow()
    flow.add_arcs_with_capacity(
        np.concatenate(tails).astype(np.int32),
        np.concatenate(heads).astype(np.int32),
        np.concatenate(caps).astype(np.int64),
    )
    if flow.solve(source, sink) != flow.OPTIMAL:  # pragma: no cover - max flow always solves
        raise RuntimeError("the stream's GPU-time bound could not be computed")
    return int(flow.optimal_flow()), count


def _cuts(arrivals: Sequence[float], start: float, end: float) -> np.ndarray:
    """Interval boundaries: ``start``, the arrival times (thinned to at most MAX_INTERVALS
    intervals, evenly by rank) and ``end``; strictly increasing."""
    inside = [a for a in arrivals if start < a < end]
    if len(inside) + 1 > MAX_INTERVALS:
        step = len(inside) / (MAX_INTERVALS - 1)
        inside = sorted({inside[int(k * step)] for k in range(MAX_INTERVALS - 1)})
    return np.array([start, *inside, end], dtype=float)
