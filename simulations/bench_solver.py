"""Solver benchmark: placement quality against the node-aware bound, and decision speed.

Run ``python -m simulations.bench_solver`` (``--quick`` for a smaller run); results go to
``simulations/results/bench_solver.md`` and ``.json`` with machine, versions, seeds and date.

Inputs (read-only public data, not needed at run time by placer itself):

* **Fleet**: Alibaba's openb GPU nodes (1,213 nodes, 6,212 GPUs, 7 models; ATC'23 FGD trace),
  split into N clusters: ``stratified`` (seeded shuffle, round robin: every cluster a
  miniature of the fleet) or ``by-model`` (contiguous blocks after sorting by GPU model). Node
  labels carry the model (``placer.dev/gpu-model``) so openb's ``gpu_spec`` becomes node
  affinity.
* **Gangs** (benchmark-design W2): 70 % single-pod workloads with an openb pod shape (whole or
  shared GPUs, some CPU-only); 30 % gangs whose pod count follows the Acme/Kalos node-count
  histogram (1..128 nodes; 8, 2 or 1 GPUs per pod in Kalos proportions, cpu/memory from an
  openb pod of that GPU count), capped at 15 % of the largest cluster's GPUs. Workloads are
  drawn until the GPU demand reaches ``load`` x the fleet's GPUs (1.3: demand > capacity).

Quality: all workloads in one batch decision per solver, side by side on the same fleet and
workloads; placed GPUs as % of the node-aware LP bound (B3) and of the cluster LP (B2); every
decision passes :func:`placer.solver.verify`. Speed: batch of 200 workloads x 16 clusters
(p50/p99 over seeds), and online one-at-a-time decisions on one 1,213-node cluster (p50/p99),
each decision a full ``solve`` call on the current fleet followed by ``charge``.
The online part also reports the GPU allocation ratio of the FGD replay protocol (openb default
trace resampled to 130 % of capacity, shuffled, placed one by one, nothing departs).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from placer.model import (
    GPU_SHARE,
    Cluster,
    ComponentDemand,
    Fleet,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodDemand,
    Workload,
    WorkloadRef,
)
from placer.quantity import CPU, GPU, MEMORY, PODS
from placer.solver import SOLVERS, charge, solve, verify

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "simulations" / "results"
MODEL_LABEL = "placer.dev/gpu-model"
MIB = 2**20
#: Kalos' size in 8-GPU nodes (AcmeTrace, NSDI'24), for scaling its gang sizes to a cluster.
KALOS_NODES = 300


def data_dir() -> Path:
    """``$PLACER_SHARED_DATA`` or ``../shared/data`` next to the repository."""
    env = os.environ.get("PLACER_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


# --------------------------------------------------------------------------------------------
# inputs


def openb_nodes(path: Path) -> list[Node]:
    """The openb GPU node list as empty nodes (pods capacity 110)."""
    nodes = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            nodes.append(
                Node(
                    name=row["sn"],
                    allocatable={
                        CPU: int(row["cpu_milli"]),
                        MEMORY: int(row["memory_mib"]) * MIB,
                        GPU: int(row["gpu"]),
                        PODS: 110,
                    },
                    labels={MODEL_LABEL: row["model"]},
                )
            )
    return nodes


def split(nodes: Sequence[Node], count: int, how: str, seed: int) -> Fleet:
    """``count`` clusters from ``nodes`` (see module docstring)."""
    order = list(nodes)
    if how == "stratified":
        random.Random(seed).shuffle(order)
        groups = [order[i::count] for i in range(count)]
    else:
        order.sort(key=lambda n: (n.labels[MODEL_LABEL], n.name))
        size = -(-len(order) // count)
        groups = [order[i * size : (i + 1) * size] for i in range(count)]
    return Fleet(
        clusters=tuple(
            Cluster(name=f"c{i:02d}", nodes=tuple(group), labels={"split": how})
            for i, group in enumerate(groups)
        )
    )


@dataclass(frozen=True)
class OpenbPod:
    cpu: int
    memory: int
    gpus: int
    milli: int
    spec: tuple[str, ...]

    def demand(self) -> PodDemand:
        requests = {CPU: self.cpu, MEMORY: self.memory}
        if self.gpus and self.milli < 1000:
            requests[GPU_SHARE] = self.milli
        elif self.gpus:
            requests[GPU] = self.gpus
        affinity: tuple[NodeSelectorTerm, ...] = ()
        if self.spec:
            requirement = NodeSelectorRequirement(MODEL_LABEL, "In", self.spec)
            affinity = (NodeSelectorTerm(match_expressions=(requirement,)),)
        return PodDemand(requests=requests, affinity=affinity)


def openb_pods(path: Path) -> list[OpenbPod]:
    pods = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            spec = tuple(s for s in (row.get("gpu_spec") or "").split("|") if s)
            pods.append(
                OpenbPod(
                    cpu=int(row["cpu_milli"]),
                    memory=int(row["memory_mib"]) * MIB,
                    gpus=int(row["num_gpu"]),
                    milli=int(row["gpu_milli"]),
                    spec=spec,
                )
            )
    return pods


def kalos_gangs(path: Path) -> list[tuple[int, int]]:
    """(pods, GPUs per pod) of the 319 Kalos jobs."""
    with path.open(newline="") as handle:
        return [
            (int(row["gpu_workers"]), int(float(row["gpu_per_worker"])))
            for row in csv.DictReader(handle)
        ]


def _ref(i: int) -> WorkloadRef:
    return WorkloadRef("batch/v1", "Job", "bench", f"w{i:05d}")


def gangs(
    pods: Sequence[OpenbPod],
    kalos: Sequence[tuple[int, int]],
    fleet: Fleet,
    *,
    load: float,
    seed: int,
    count: int | None = None,
) -> list[Workload]:
    """W2 workloads until GPU demand = ``load`` x fleet GPUs (or ``count`` workloads)."""
    rng = random.Random(seed)
    capacity = sum(n.allocatable.get(GPU, 0) for c in fleet.clusters for n in c.nodes)
    largest = max(sum(n.allocatable.get(GPU, 0) for n in c.nodes) for c in fleet.clusters)
    cap_gpus = max(8, int(0.15 * largest))
    # Kalos ran on ~300 8-GPU nodes; scale its gang sizes to one cluster's 8-GPU nodes
    eight = max(sum(1 for n in c.nodes if n.allocatable.get(GPU, 0) == 8) for c in fleet.clusters)
    scale = min(1.0, eight / KALOS_NODES)
    by_gpus: dict[int, list[OpenbPod]] = {}
    for pod in pods:
        if pod.gpus and pod.milli == 1000:
            by_gpus.setdefault(pod.gpus, []).append(pod)
    workloads: list[Workload] = []
    demand = 0.0
    while (count is None and demand < load * capacity) or (
        count is not None and len(workloads) < count
    ):
        i = len(workloads)
        if rng.random() < 0.7:
            pod = rng.choice(pods)
            components = (ComponentDemand("main", "", 1, pod.demand()),)
            demand += pod.gpus * (pod.milli / 1000 if pod.milli < 1000 else 1)
        else:
            replicas, per_pod = rng.choice(kalos)
            shape = rng.choice(by_gpus.get(per_pod) or by_gpus[1])
            replicas = max(1, min(round(replicas * scale), cap_gpus // max(per_pod, 1)))
            pod_demand = PodDemand(requests={CPU: shape.cpu, MEMORY: shape.memory, GPU: per_pod})
            if replicas > 1 and rng.random() < 0.3:
                leader = PodDemand(requests={CPU: 4000, MEMORY: 16 * 2**30})
                components = (
                    ComponentDemand("leader", "", 1, leader),
                    ComponentDemand("worker", "", replicas, pod_demand),
                )
            else:
                components = (ComponentDemand("worker", "", replicas, pod_demand),)
            demand += replicas * per_pod
        workloads.append(Workload(ref=_ref(i), components=components))
    return workloads


# --------------------------------------------------------------------------------------------
# measurements


def placed_gpus(decision: Any) -> float:
    requests = decision.summary.placed_requests
    return float(requests.get(GPU, 0)) + requests.get(GPU_SHARE, 0) / 1000.0


def quality(
    fleet: Fleet, workloads: list[Workload], *, time_limit: float, seed: int
) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    bound: dict[str, float] = {}
    for solver in SOLVERS:
        decision = solve(workloads, fleet, solver=solver, time_limit=time_limit, seed=seed)
        problems = verify(decision, workloads, fleet)
        if problems:
            raise SystemExit(f"verifier failed for {solver}: {problems[:3]}")
        bound = dict(decision.summary.bound)
        gpus = placed_gpus(decision)
        rows[solver] = {
            "placed_gpus": round(gpus, 2),
            "pct_node_lp": round(100 * gpus / bound["node_lp_gpu"], 2),
            "pct_cluster_lp": round(100 * gpus / bound["cluster_lp_gpu"], 2),
            "placed_workloads": decision.summary.placed,
            "status": decision.summary.status,
            "seconds": decision.summary.seconds,
        }
    return {"bound": bound, "solvers": rows, "workloads": len(workloads)}


def speed_batch(
    nodes: Sequence[Node],
    pods: Sequence[OpenbPod],
    kalos: Sequence[tuple[int, int]],
    *,
    seeds: Sequence[int],
    size: int,
) -> dict[str, Any]:
    times = []
    statuses: dict[str, int] = {}
    for seed in seeds:
        fleet = split(nodes, 16, "stratified", seed)
        workloads = gangs(pods, kalos, fleet, load=0.0, seed=seed, count=size)
        started = time.perf_counter()
        decision = solve(workloads, fleet, seed=seed)
        times.append(time.perf_counter() - started)
        statuses[decision.summary.status] = statuses.get(decision.summary.status, 0) + 1
        problems = verify(decision, workloads, fleet)
        if problems:
            raise SystemExit(f"verifier failed in speed run: {problems[:3]}")
    return {
        "runs": len(times),
        "p50_s": round(_percentile(times, 50), 4),
        "p99_s": round(_percentile(times, 99), 4),
        "max_s": round(max(times), 4),
        "statuses": statuses,
    }


def fgd_tasks(pods: Sequence[OpenbPod], capacity: int, *, load: float, seed: int) -> list[OpenbPod]:
    """openb tasks resampled until their GPU request is ``load`` x capacity, shuffled."""
    rng = random.Random(seed)
    tasks: list[OpenbPod] = []
    demand = 0.0
    while demand < load * capacity:
        pod = rng.choice(pods)
        tasks.append(pod)
        demand += pod.gpus * (pod.milli / 1000 if pod.milli < 1000 else 1)
    rng.shuffle(tasks)
    return tasks


def online(
    nodes: Sequence[Node],
    pods: Sequence[OpenbPod],
    *,
    seed: int,
    load: float,
    timed: int,
) -> dict[str, Any]:
    """FGD replay on one cluster; ``timed`` decisions are full per-pod ``solve`` calls."""
    fleet = Fleet(clusters=(Cluster(name="openb", nodes=tuple(nodes)),))
    capacity = sum(n.allocatable.get(GPU, 0) for n in nodes)
    tasks = fgd_tasks(pods, capacity, load=load, seed=seed)
    demands = [t.demand() for t in tasks]
    counts: dict[int, float] = {}
    first: dict[int, PodDemand] = {}
    for t, d in zip(tasks, demands, strict=True):
        key = hash((t.cpu, t.memory, t.gpus, t.milli, t.spec))
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, d)
    mix = [(first[k], w) for k, w in counts.items()]
    workloads = [
        Workload(ref=_ref(i), components=(ComponentDemand("main", "", 1, d),))
        for i, d in enumerate(demands)
    ]
    latencies = []
    current = fleet
    for workload in workloads[:timed]:
        started = time.perf_counter()
        decision = solve([workload], current, mode="online", pod_mix=mix, seed=seed)
        latencies.append(time.perf_counter() - started)
        current = charge(current, decision.placements)
    started = time.perf_counter()
    rest = solve(workloads[timed:], current, mode="online", pod_mix=mix, time_limit=3600)
    bulk_seconds = time.perf_counter() - started
    problems = verify(rest, workloads[timed:], current)
    if problems:
        raise SystemExit(f"verifier failed in online replay: {problems[:3]}")
    final = charge(current, rest.placements)
    used = 0.0
    for cluster in final.clusters:
        for node in cluster.nodes:
            total = node.allocatable.get(GPU, 0)
            if node.gpu_devices is not None:
                used += sum(1000 - d for d in node.gpu_devices) / 1000
            else:
                used += node.requested.get(GPU, 0) if total else 0
    return {
        "tasks": len(tasks),
        "gpu_allocation_pct": round(100 * used / capacity, 2),
        "timed_decisions": len(latencies),
        "p50_ms": round(1000 * _percentile(latencies, 50), 2),
        "p99_ms": round(1000 * _percentile(latencies, 99), 2),
        "bulk_ms_per_decision": round(1000 * bulk_seconds / max(1, len(tasks) - timed), 2),
    }


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# --------------------------------------------------------------------------------------------
# main


def machine() -> dict[str, str]:
    import numpy
    import ortools

    return {
        "python": platform.python_version(),
        "ortools": ortools.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller run (smoke)")
    parser.add_argument("--time-limit", type=float, default=1.0)
    parser.add_argument("--parts", default="quality,speed,online")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_solver")
    args = parser.parse_args(argv)
    base = data_dir()
    openb = base / "alibaba-openb-gpu-2023"
    if not (openb / "openb_node_list_gpu_node.csv").exists():
        print(f"openb data not found under {base}; set PLACER_SHARED_DATA", file=sys.stderr)
        return 1
    nodes = openb_nodes(openb / "openb_node_list_gpu_node.csv")
    pods = openb_pods(openb / "openb_pod_list_default.csv")
    kalos = kalos_gangs(base / "acme-kalos-gangs-derived" / "converted_kalos_trace.csv")
    parts = set(args.parts.split(","))
    report: dict[str, Any] = {"machine": machine(), "time_limit": args.time_limit}
    seeds = [1] if args.quick else [1, 2, 3]
    if "quality" in parts:
        report["quality"] = []
        for count in (4, 8):
            for how in ("stratified", "by-model"):
                for seed in seeds:
                    fleet = split(nodes, count, how, seed)
                    workloads = gangs(pods, kalos, fleet, load=1.3, seed=seed)
                    result = quality(fleet, workloads, time_limit=args.time_limit, seed=seed)
                    result.update({"clusters": count, "split": how, "seed": seed})
                    report["quality"].append(result)
                    print(json.dumps(result), flush=True)
    if "speed" in parts:
        runs = range(5) if args.quick else range(30)
        report["speed_batch"] = speed_batch(nodes, pods, kalos, seeds=list(runs), size=200)
        print(json.dumps(report["speed_batch"]), flush=True)
    if "online" in parts:
        report["online"] = online(nodes, pods, seed=42, load=1.3, timed=100 if args.quick else 400)
        print(json.dumps(report["online"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
