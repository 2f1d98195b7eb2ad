"""Topology-aware placement: gangs that must share a rack, on openb's 8-GPU nodes in racks.

Command (a few minutes on 2 cores)::

    python -m simulations.bench_topology

The fleet: openb's 617 nodes with 8 GPUs split by GPU model into 4 clusters (as in
``bench_kalos``), with synthetic topology labels: each cluster's nodes, in order, form racks of
4–8 nodes (``network.topology.nvidia.com/leaf``, sizes drawn with the seed) and NVLink domains
of 2 nodes inside a rack (``nvidia.com/gpu.clique``); each node has 0, 2, 4 or 8 of its GPUs
already in use (drawn with the seed), so free GPUs are scattered over racks as on a busy fleet.

The gangs (drawn with the seed): ``--gangs`` training jobs of 2–16 pods of 1, 2, 4 or 8 GPUs
(8 cores, 64 GiB per pod), each requiring one rack for all its pods and preferring one NVLink
domain — more than the fleet's free GPUs, so the decision must choose.

Each solver decides all gangs in one batch twice, side by side: **with topology** (the
constraints as given) and **oblivious** (the same gangs without them). Reported: GPUs and gangs
placed; the share of placed gangs whose pods share one rack (counted from the nodes' labels,
apart from the solver: it must be 100 % with topology); the bounds — the oblivious decision's
tightest bound (a relaxation, so valid for both) and the topology bound
(:func:`placer.solver.topology.topology_bound_gpu`, which drops gangs no rack can hold); the
verifier's findings; decision CPU seconds; and reasons given for unplaced gangs (they name the
rack level and the roomiest rack).

Results: ``simulations/results/bench_topology.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from placer.model import (
    Cluster,
    ComponentDemand,
    Decision,
    Fleet,
    Node,
    PodDemand,
    TopologyConstraint,
    Workload,
    WorkloadRef,
)
from placer.quantity import CPU, GPU, MEMORY
from placer.solver import solve, verify
from placer.solver.topology import topology_bound_gpu
from placer.traces.openb import read_openb_nodes
from simulations.benchmarking import heading, measure, table
from simulations.fleets import make_fleet, split_nodes

__all__ = ["Config", "rack_fleet", "rack_gangs", "run"]

RACK = "network.topology.nvidia.com/leaf"
CLIQUE = "nvidia.com/gpu.clique"
GIB = 2**30


@dataclass(frozen=True)
class Config:
    clusters: int = 4
    gangs: int = 300
    solvers: tuple[tuple[str, float], ...] = (("greedy", 10.0), ("cpsat", 10.0))
    #: keep every k-th node (tests).
    nodes_every: int = 1
    seed: int = 0


def rack_fleet(clusters: int, *, seed: int = 0, nodes_every: int = 1) -> Fleet:
    """openb's 8-GPU nodes in ``clusters`` clusters, with racks, NVLink domains and usage."""
    rng = random.Random(seed)
    nodes = [n for n in read_openb_nodes("gpu") if n.allocatable.get(GPU) == 8][::nodes_every]
    fleet = make_fleet(split_nodes(nodes, clusters))
    labelled: list[Cluster] = []
    for cluster in fleet.clusters:
        out: list[Node] = []
        members = list(cluster.nodes)
        rack = 0
        while members:
            size = rng.randint(4, 8)
            for position, node in enumerate(members[:size]):
                labels = {
                    **node.labels,
                    RACK: f"{cluster.name}-r{rack}",
                    CLIQUE: f"{cluster.name}-r{rack}-c{position // 2}",
                }
                used = rng.choice((0, 0, 2, 4, 8))
                requested = {**node.requested, GPU: used} if used else dict(node.requested)
                out.append(replace(node, labels=labels, requested=requested, gpu_devices=None))
            members = members[size:]
            rack += 1
        labelled.append(replace(cluster, nodes=tuple(out)))
    return replace(fleet, clusters=tuple(labelled))


def rack_gangs(count: int, *, seed: int = 0, topology: bool = True) -> list[Workload]:
    """``count`` training gangs, each requiring one rack and preferring one NVLink domain."""
    rng = random.Random(seed + 1)
    gangs = []
    for index in range(count):
        pods = rng.choice((2, 2, 4, 4, 8, 16))
        gpus = rng.choice((1, 2, 4, 8))
        pod = PodDemand(requests={CPU: 8000, MEMORY: 64 * GIB, GPU: gpus})
        constraint = TopologyConstraint(
            name="workers", members=("worker",), required=RACK, preferred=CLIQUE
        )
        gangs.append(
            Workload(
                ref=WorkloadRef("jobset.x-k8s.io/v1alpha2", "JobSet", "bench", f"g{index:03d}"),
                components=(ComponentDemand("worker", "", pods, pod),),
                topology=(constraint,) if topology else (),
            )
        )
    return gangs


def _one_rack_share(decision: Decision, fleet: Fleet) -> tuple[int, int]:
    """(placed gangs whose pods share one rack, placed gangs), from the nodes' labels."""
    labels = {(c.name, n.name): n.labels.get(RACK) for c in fleet.clusters for n in c.nodes}
    within = sum(
        len({labels[(p.cluster, pod.node)] for pod in p.pods}) == 1 for p in decision.placements
    )
    return within, len(decision.placements)


def _cliques(decision: Decision, fleet: Fleet) -> float:
    """Mean NVLink domains per placed gang."""
    labels = {(c.name, n.name): n.labels.get(CLIQUE) for c in fleet.clusters for n in c.nodes}
    counts = [len({labels[(p.cluster, pod.node)] for pod in p.pods}) for p in decision.placements]
    return round(sum(counts) / len(counts), 3) if counts else 0.0


def _gpus(decision: Decision) -> int:
    return sum(pod.requests.get(GPU, 0) for p in decision.placements for pod in p.pods)


def _decide(
    gangs: Sequence[Workload], fleet: Fleet, solver: str, limit: float, seed: int
) -> dict[str, Any]:
    started = time.process_time()
    decision = solve(gangs, fleet, solver=solver, time_limit=limit, seed=seed)
    cpu = time.process_time() - started
    within, placed = _one_rack_share(decision, fleet)
    reasons = Counter(text.split(";")[0] for u in decision.unplaced for text in u.reasons.values())
    return {
        "gpus_placed": _gpus(decision),
        "gangs_placed": placed,
        "one_rack_gangs": within,
        "one_rack_pct": round(100.0 * within / placed, 2) if placed else None,
        "nvlink_domains_per_gang": _cliques(decision, fleet),
        "tightest_bound_gpu": decision.summary.bound.get("tightest_gpu"),
        "status": decision.summary.status,
        "decision_cpu_s": round(cpu, 3),
        "verifier_problems": len(verify(decision, gangs, fleet)),
        "reasons_top": reasons.most_common(3),
        "decision": decision,
    }


def run(config: Config) -> dict[str, Any]:
    fleet = rack_fleet(config.clusters, seed=config.seed, nodes_every=config.nodes_every)
    with_topology = rack_gangs(config.gangs, seed=config.seed)
    oblivious = rack_gangs(config.gangs, seed=config.seed, topology=False)
    free = sum(max(n.free.get(GPU, 0), 0) for c in fleet.clusters for n in c.nodes if n.usable)
    rows: dict[str, Any] = {}
    for solver, limit in config.solvers:
        plain = _decide(oblivious, fleet, solver, limit, config.seed)
        aware = _decide(with_topology, fleet, solver, limit, config.seed)
        tightest = plain["tightest_bound_gpu"] or float(free)
        bound = topology_bound_gpu(with_topology, fleet, float(tightest))
        for row in (plain, aware):
            del row["decision"]
        rows[solver] = {
            "time_limit_s": limit,
            "oblivious": plain,
            "topology": aware,
            "oblivious_bound_gpu": tightest,
            "topology_bound_gpu": bound,
            "topology_vs_oblivious_pct": round(
                100.0 * aware["gpus_placed"] / plain["gpus_placed"], 2
            )
            if plain["gpus_placed"]
            else None,
            "topology_of_bound_pct": round(100.0 * aware["gpus_placed"] / bound, 2)
            if bound
            else None,
        }
    racks = {n.labels[RACK] for c in fleet.clusters for n in c.nodes}
    return {
        "config": {
            "clusters": config.clusters,
            "gangs": config.gangs,
            "nodes_every": config.nodes_every,
            "seed": config.seed,
        },
        "fleet": {
            "nodes": sum(len(c.nodes) for c in fleet.clusters),
            "gpus": sum(n.allocatable.get(GPU, 0) for c in fleet.clusters for n in c.nodes),
            "free_gpus": free,
            "racks": len(racks),
        },
        "gpus_demand": sum(w.gpus for w in with_topology),
        "solvers": rows,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    fleet = result["fleet"]
    lines = heading(
        "Topology: gangs that must share a rack, on openb's 8-GPU nodes in racks",
        meta,
        f"Fleet: {fleet['nodes']} nodes, {fleet['gpus']} GPUs ({fleet['free_gpus']} free) in "
        f"{result['config']['clusters']} clusters and {fleet['racks']} racks of 4–8 nodes. "
        f"{result['config']['gangs']} gangs asking {result['gpus_demand']} GPUs, each requiring "
        f"one rack ({RACK}) and preferring one NVLink domain ({CLIQUE}). Load average at end: "
        f"{result['load_average_at_end']}.",
    )
    rows = []
    for solver, row in result["solvers"].items():
        for variant in ("oblivious", "topology"):
            cell = row[variant]
            rows.append(
                [
                    solver,
                    variant,
                    cell["gpus_placed"],
                    cell["gangs_placed"],
                    f"{cell['one_rack_gangs']} ({cell['one_rack_pct']} %)",
                    cell["nvlink_domains_per_gang"],
                    row["oblivious_bound_gpu"],
                    row["topology_bound_gpu"] if variant == "topology" else "",
                    cell["status"],
                    cell["decision_cpu_s"],
                    cell["verifier_problems"],
                ]
            )
    lines.append(
        table(
            [
                "solver",
                "decision",
                "GPUs placed",
                "gangs placed",
                "gangs in one rack",
                "NVLink domains per gang",
                "bound (oblivious)",
                "bound (topology)",
                "status",
                "CPU s",
                "verifier problems",
            ],
            rows,
        )
    )
    lines += [
        "",
        "Topology-aware GPUs placed as a share of the oblivious decision and of the bound:",
        "",
    ]
    lines.append(
        table(
            ["solver", "% of oblivious", "% of topology bound"],
            [
                [s, r["topology_vs_oblivious_pct"], r["topology_of_bound_pct"]]
                for s, r in result["solvers"].items()
            ],
        )
    )
    lines += [
        "",
        "Most frequent reasons given for unplaced gangs (with topology, first clause):",
        "",
    ]
    for solver, row in result["solvers"].items():
        for text, count in row["topology"]["reasons_top"]:
            lines.append(f"- {solver}: {count}× {text}")
    lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simulations.bench_topology", description=__doc__
    )
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--gangs", type=int, default=300)
    args = parser.parse_args(argv)
    config = Config(clusters=args.clusters, gangs=args.gangs)
    result, paths = measure("bench_topology", lambda: run(config), markdown)
    for solver, row in result["solvers"].items():
        print(
            f"{solver:8s} oblivious {row['oblivious']['gpus_placed']} GPUs "
            f"({row['oblivious']['one_rack_pct']} % one rack), topology "
            f"{row['topology']['gpus_placed']} GPUs ({row['topology']['one_rack_pct']} % one "
            f"rack), bound {row['topology_bound_gpu']}"
        )
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
