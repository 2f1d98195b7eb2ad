"""What a simulation is judged by: placed GPU against the bound, admission, fragmentation, time.

All metrics are computed from a :class:`~placer.simulate.engine.Run` and the input, never from
the solver's internals (benchmark-design C.4):

* **placed GPU % of bound** — batch and online: GPU thousandths placed over the tightest
  bound the decision proved (:func:`placer.simulate.engine.gpu_bound`); stream: GPU
  thousandths ever placed over the stream's own bound ``B_placed``
  (:mod:`placer.simulate.streambound`) — never a sum of per-decision bounds, which would count a
  waiting workload once per retry;
* **gang admission by size bucket** — workloads (and GPUs) admitted, by GPUs per workload:
  CPU only, up to 1 GPU, 2–8, 9–64, 65–512, more than 512 (large gangs are what greedy
  placement starves);
* **fragmentation** at the run's most loaded point (end of a batch/online run; the last
  arrival of a stream): *stranded GPUs* — free GPUs on usable nodes where no pending GPU pod
  fits by its requests (cpu, memory, pods or the GPUs themselves exhausted; GPU-model
  constraints are not counted as stranding); when nothing is pending, the input's GPU pods
  stand in for "what comes next"; *whole free 8-GPU nodes* — usable nodes with ≥ 8 GPUs all
  idle (big-gang readiness); and FGD's measure (Weng et al., ATC '23): the expected free GPU
  thousandths a pod drawn from the input's GPU-pod mix could not use, summed over nodes;
* **decision time** p50/p99 over solver calls (``online`` is one call deciding one workload at
  a time, so only its total and the mean per workload exist);
* **stream**: wait (start − arrival) p50/p99 of placed workloads, workloads never started,
  time-averaged GPU allocation over the arrival window next to the offered load (the mean
  allocation over the same window had nothing waited), the GPU-time the workloads held inside
  the arrival window as % of the bound ``B_time`` no policy can exceed
  (:mod:`placer.simulate.streambound`), peak queue and makespan.

Percentiles are nearest-rank. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from placer.model import Cluster, Fleet, Node, PodDemand
from placer.podspec import node_mismatch
from placer.quantity import CPU, GPU, MEMORY
from placer.simulate.capacity import (
    NodeRoom,
    gpu_milli,
    node_gpu_free_milli,
    whole_free_nodes,
)
from placer.simulate.engine import Run, Sample, Timed
from placer.simulate.streambound import StreamBounds, placed_gpu_time, stream_bounds
from placer.solver.report import tightest_bound
from placer.solver.state import constraint_key

__all__ = [
    "BUCKETS",
    "Bucket",
    "ClusterUsage",
    "Fragmentation",
    "StreamStats",
    "Summary",
    "TimeStats",
    "bucket_of",
    "bucket_rank",
    "cluster_usage",
    "fragmentation",
    "percentile",
    "summarize",
]

#: gang-size buckets by GPUs per workload: (label, upper bound in thousandths, inclusive).
BUCKETS: tuple[tuple[str, float], ...] = (
    ("cpu only", 0),
    ("<=1 GPU", 1000),
    ("2-8 GPUs", 8000),
    ("9-64 GPUs", 64000),
    ("65-512 GPUs", 512000),
    (">512 GPUs", math.inf),
)


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile (``None`` for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def bucket_rank(label: str) -> int:
    """Position of a bucket label in :data:`BUCKETS` (for sorting; unknown labels last)."""
    labels = [name for name, _ in BUCKETS]
    return labels.index(label) if label in labels else len(labels)


def bucket_of(milli: int) -> str:
    """The gang-size bucket of a workload asking ``milli`` GPU thousandths."""
    for label, upper in BUCKETS:
        if milli <= upper:
            return label
    return BUCKETS[-1][0]  # pragma: no cover - the last bound is infinite


@dataclass(frozen=True)
class Bucket:
    label: str
    workloads: int
    admitted: int
    gpu_milli: int
    admitted_gpu_milli: int


@dataclass(frozen=True)
class ClusterUsage:
    """One cluster's state: GPUs, cpu and memory in use, big-gang readiness."""

    name: str
    state: str  # ``ready``, ``unreachable: ...`` or ``drained``
    nodes: int
    gpu_milli: int
    gpu_used_milli: int
    cpu_pct: float
    memory_pct: float
    whole_free_big_nodes: int

    @property
    def gpu_pct(self) -> float:
        return 100.0 * self.gpu_used_milli / self.gpu_milli if self.gpu_milli else 0.0


@dataclass(frozen=True)
class Fragmentation:
    stranded_gpu_milli: int
    stranded_nodes: int
    whole_free_big_nodes: int
    fgd_gpu_milli: float
    #: ``pending`` (the unplaced workloads' pods) or ``input`` (nothing pending).
    against: str


@dataclass(frozen=True)
class TimeStats:
    decisions: int
    total_s: float
    p50_s: float | None
    p99_s: float | None
    max_s: float | None
    #: mean per workload decided (``online``: the only per-workload figure there is).
    per_workload_s: float | None
    #: CPU time of the solver calls (both CP-SAT threads count): p50/p99 and total.
    cpu_p50_s: float | None = None
    cpu_p99_s: float | None = None
    cpu_total_s: float = 0.0


@dataclass(frozen=True)
class StreamStats:
    wait_p50_s: float | None
    wait_p99_s: float | None
    wait_max_s: float | None
    never_started: int
    #: time-averaged GPU allocation over the arrival window, % of fleet GPUs.
    time_avg_alloc_pct: float
    #: the mean allocation over the arrival window had nothing waited (run times clipped at
    #: the last arrival), % of fleet GPUs.
    offered_load_pct: float
    peak_queue: int
    window_s: float
    makespan_s: float
    #: GPU thousandths × seconds the stream's workloads held inside the arrival window, and the
    #: bound B_time on it (:mod:`placer.simulate.streambound`).
    gpu_time_milli_s: float = 0.0
    gpu_time_bound_milli_s: int = 0

    @property
    def gpu_time_of_bound_pct(self) -> float | None:
        """GPU-time in the arrival window as % of B_time (``None`` without a window)."""
        if not self.gpu_time_bound_milli_s:
            return None
        return 100.0 * self.gpu_time_milli_s / self.gpu_time_bound_milli_s


@dataclass(frozen=True)
class Summary:
    solver: str
    mode: str
    workloads: int
    placed: int
    gpu_demand_milli: int
    gpu_placed_milli: int
    #: GPU capacity of the fleet's reachable clusters (allocatable), thousandths.
    gpu_capacity_milli: int
    bound_gpu_milli: int
    placed_of_bound_pct: float | None
    #: which bound ``bound_gpu_milli`` is: a key of :data:`placer.solver.report.BOUND_NAMES`
    #: (batch and online: the tightest of the decision), ``stream`` (B_placed) or ``sum``
    #: (several decisions outside a stream, their bounds added).
    bound_basis: str
    #: GPUs in use at the end of the run (snapshot's own use included) as % of capacity:
    #: FGD's allocation ratio for batch/online (a stream ends drained, see ``stream``).
    alloc_pct: float
    statuses: dict[str, int]
    buckets: tuple[Bucket, ...]
    fragmentation: Fragmentation
    time: TimeStats
    stream: StreamStats | None
    verified: int
    problems: tuple[str, ...]
    wall_s: float


def summarize(run: Run, items: Sequence[Timed], *, bounds: StreamBounds | None = None) -> Summary:
    """The metrics of one run (see the module docstring).

    ``bounds``: the stream's bounds when already computed for these items and this run's
    starting fleet (they do not depend on the solver); computed here otherwise.
    """
    demand = [gpu_milli(item.workload.total_requests()) for item in items]
    placed = [i for i, o in enumerate(run.outcomes) if o.cluster is not None]
    capacity = sum(_gpus(c) for c in run.before.clusters if c.reachable)
    decisions = run.decisions
    stream: StreamStats | None = None
    if run.settings.mode == "stream":
        bounds = bounds or stream_bounds(items, run.before)
        stream = _stream(run, items, demand, capacity, bounds)
        bound = bounds.placed_gpu_milli
        placed_in_bound = sum(demand[i] for i in placed)
    else:
        bound = sum(d.bound_gpu_milli for d in decisions)
        placed_in_bound = sum(d.placed_gpu_milli for d in decisions)
    # outside a stream, an elastic workload is asked at its most and counted as placed at the
    # size its decision chose (as the decisions' bounds count it), not at its minimum
    asked = sum(demand)
    placed_milli = sum(demand[i] for i in placed)
    if stream is None:
        asked = sum(gpu_milli(item.workload.largest_requests()) for item in items)
        placed_milli = placed_in_bound
    basis = "stream" if stream is not None else "sum"
    if stream is None and len(decisions) == 1:
        named = tightest_bound(decisions[0].solver_bounds)
        exact = named is not None and math.ceil(round(named[1] * 1000, 3)) == bound
        basis = named[0] if named is not None and exact else "capacity_gpu"
    statuses: dict[str, int] = {}
    for record in decisions:
        statuses[record.status] = statuses.get(record.status, 0) + 1
    problems = tuple(p for d in decisions for p in d.problems)
    seconds = [d.seconds for d in decisions]
    cpu = [d.cpu_seconds for d in decisions]
    decided = sum(d.workloads for d in decisions)
    time_stats = TimeStats(
        decisions=len(decisions),
        total_s=sum(seconds),
        p50_s=None if run.settings.mode == "online" else percentile(seconds, 50),
        p99_s=None if run.settings.mode == "online" else percentile(seconds, 99),
        max_s=None if run.settings.mode == "online" else max(seconds, default=None),
        per_workload_s=sum(seconds) / decided if decided else None,
        cpu_p50_s=percentile(cpu, 50) if run.settings.mode != "online" else None,
        cpu_p99_s=percentile(cpu, 99) if run.settings.mode != "online" else None,
        cpu_total_s=sum(cpu),
    )
    allocated = sum(_used(c) for c in run.after.clusters if c.reachable)
    return Summary(
        solver=run.settings.solver,
        mode=run.settings.mode,
        workloads=len(items),
        placed=len(placed),
        gpu_demand_milli=asked,
        gpu_placed_milli=placed_milli,
        gpu_capacity_milli=capacity,
        bound_gpu_milli=bound,
        placed_of_bound_pct=100.0 * placed_in_bound / bound if bound else None,
        bound_basis=basis,
        alloc_pct=100.0 * allocated / capacity if capacity else 0.0,
        statuses=statuses,
        buckets=_buckets(run, demand),
        fragmentation=fragmentation(run.loaded, items, run.pending),
        time=time_stats,
        stream=stream,
        verified=len(decisions),
        problems=problems,
        wall_s=run.wall_s,
    )


def _gpus(cluster: Cluster) -> int:
    return sum(n.allocatable.get(GPU, 0) for n in cluster.nodes) * 1000


def _used(cluster: Cluster) -> int:
    return _gpus(cluster) - sum(node_gpu_free_milli(n) for n in cluster.nodes)


def _buckets(run: Run, demand: Sequence[int]) -> tuple[Bucket, ...]:
    counts = {label: [0, 0, 0, 0] for label, _ in BUCKETS}
    for outcome, milli in zip(run.outcomes, demand, strict=True):
        row = counts[bucket_of(milli)]
        row[0] += 1
        row[2] += milli
        if outcome.cluster is not None:
            row[1] += 1
            row[3] += milli
    return tuple(Bucket(label, *row) for label, row in counts.items() if row[0])


def _stream(
    run: Run,
    items: Sequence[Timed],
    demand: Sequence[int],
    capacity: int,
    bounds: StreamBounds,
) -> StreamStats:
    waits = [
        o.start_s - item.arrival_s
        for o, item in zip(run.outcomes, items, strict=True)
        if o.start_s is not None
    ]
    arrivals = [item.arrival_s for item in items]
    first, last = (min(arrivals), max(arrivals)) if arrivals else (0.0, 0.0)
    window = last - first
    timeline = run.timeline
    offered = 0.0  # work inside the arrival window if nothing waited
    for milli, item in zip(demand, items, strict=True):
        end = last if item.duration_s is None else min(last, item.arrival_s + item.duration_s)
        offered += milli * (end - item.arrival_s)
    makespan = (timeline[-1].time_s - first) if timeline else 0.0
    return StreamStats(
        wait_p50_s=percentile(waits, 50),
        wait_p99_s=percentile(waits, 99),
        wait_max_s=max(waits, default=None),
        never_started=sum(1 for o in run.outcomes if o.start_s is None),
        time_avg_alloc_pct=100.0 * _time_average(timeline, first, last) / capacity
        if capacity
        else 0.0,
        offered_load_pct=100.0 * offered / (window * capacity) if window and capacity else 0.0,
        peak_queue=max((s.queued for s in timeline), default=0),
        window_s=window,
        makespan_s=makespan,
        gpu_time_milli_s=placed_gpu_time(items, run.outcomes, first, last),
        gpu_time_bound_milli_s=bounds.gpu_time_milli_s,
    )


def _time_average(timeline: Sequence[Sample], start: float, end: float) -> float:
    """Mean of the allocation step function over [start, end] (its value at ``end`` if empty)."""
    if not timeline:
        return 0.0
    if end <= start:
        at = [s for s in timeline if s.time_s <= end]
        return float((at[-1] if at else timeline[0]).allocated_gpu_milli)
    area = 0.0
    for k, sample in enumerate(timeline):
        left = max(sample.time_s, start)
        right = min(timeline[k + 1].time_s if k + 1 < len(timeline) else end, end)
        if right > left:
            area += sample.allocated_gpu_milli * (right - left)
    return area / (end - start)


# --------------------------------------------------------------------------------------------
# per-cluster usage and fragmentation


def cluster_usage(fleet: Fleet, drained: Sequence[str] = ()) -> tuple[ClusterUsage, ...]:
    """GPU, cpu and memory use of every cluster of ``fleet`` (fleet order)."""
    usages = []
    for cluster in fleet.clusters:
        if cluster.name in drained:
            state = "drained"
        elif not cluster.reachable:
            state = f"unreachable: {cluster.reason or 'no answer'}"
        else:
            state = "ready"
        usages.append(
            ClusterUsage(
                name=cluster.name,
                state=state,
                nodes=len(cluster.nodes),
                gpu_milli=_gpus(cluster),
                gpu_used_milli=_used(cluster),
                cpu_pct=_pct_used(cluster.nodes, CPU),
                memory_pct=_pct_used(cluster.nodes, MEMORY),
                whole_free_big_nodes=whole_free_nodes(cluster.nodes),
            )
        )
    return tuple(usages)


def _pct_used(nodes: Sequence[Node], resource: str) -> float:
    total = sum(n.allocatable.get(resource, 0) for n in nodes)
    used = sum(min(n.requested.get(resource, 0), n.allocatable.get(resource, 0)) for n in nodes)
    return 100.0 * used / total if total else 0.0


def fragmentation(fleet: Fleet, items: Sequence[Timed], pending: Sequence[int]) -> Fragmentation:
    """Stranded GPUs, whole free 8-GPU nodes and FGD's measure (see the module docstring)."""
    gpu_pods = [
        (c.pod, c.replicas)
        for i in (pending if pending else range(len(items)))
        for c in items[i].workload.components
        if gpu_milli(c.pod.requests)
    ]
    against = "pending" if pending else "input"
    nodes = [n for c in fleet.clusters if c.reachable for n in c.nodes if n.usable]
    shapes = _shapes(gpu_pods)
    stranded = 0
    stranded_nodes = 0
    for node in nodes:
        free = node_gpu_free_milli(node)
        if not free or not shapes:
            continue
        room = NodeRoom(node)
        if not any(room.fits(pod) for pod, _ in shapes):
            stranded += free
            stranded_nodes += 1
    mix = _shapes(
        [
            (c.pod, c.replicas)
            for item in items
            for c in item.workload.components
            if gpu_milli(c.pod.requests)
        ]
    )
    return Fragmentation(
        stranded_gpu_milli=stranded,
        stranded_nodes=stranded_nodes,
        whole_free_big_nodes=sum(whole_free_nodes(c.nodes) for c in fleet.clusters if c.reachable),
        fgd_gpu_milli=_fgd(nodes, mix),
        against=against,
    )


def _shapes(pods: Sequence[tuple[PodDemand, int]]) -> list[tuple[PodDemand, float]]:
    """Distinct pod shapes (requests and node constraints) with their frequencies, smallest
    GPU request first."""
    merged: dict[Hashable, tuple[PodDemand, float]] = {}
    for pod, count in pods:
        key = (tuple(sorted(pod.requests.items())), constraint_key(pod))
        prior = merged.get(key)
        merged[key] = (pod, count + (prior[1] if prior else 0.0))
    return sorted(
        merged.values(),
        key=lambda item: (gpu_milli(item[0].requests), item[0].requests.get(CPU, 0)),
    )


def _fgd(nodes: Sequence[Node], mix: Sequence[tuple[PodDemand, float]]) -> float:
    """FGD's fragmentation: Σ_n Σ_t w_t · frag_t(n), in GPU thousandths.

    For a pod shape ``t`` and node ``n``: every free thousandth when ``t`` cannot run on ``n``
    at all (resources, GPU count, or GPU model / other node constraints); otherwise the free
    thousandths ``t`` cannot use — partly used devices for whole-GPU pods, devices with less
    than the share left for shared pods.
    """
    total_weight = sum(w for _, w in mix)
    if not total_weight:
        return 0.0
    eligible: dict[Hashable, Callable[[Node], bool]] = {}
    result = 0.0
    for node in nodes:
        if not node_gpu_free_milli(node):
            continue
        room = NodeRoom(node)
        devices = room.devices
        free = sum(devices)
        for pod, weight in mix:
            key = constraint_key(pod)
            if key not in eligible:
                eligible[key] = _eligibility(pod)
            if not eligible[key](node) or not room.fits(pod):
                frag = free
            elif pod.requests.get(GPU, 0):
                frag = sum(d for d in devices if d < 1000)
            else:
                share = gpu_milli(pod.requests)
                frag = sum(d for d in devices if d < share)
            result += weight / total_weight * frag
    return result


def _eligibility(pod: PodDemand) -> Callable[[Node], bool]:
    cache: dict[str, bool] = {}

    def check(node: Node) -> bool:
        if node.name not in cache:
            cache[node.name] = node_mismatch(pod, node) is None
        return cache[node.name]

    return check
