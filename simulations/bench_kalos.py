"""Big gangs: the 319 real Kalos jobs (1–128 pods × 8 GPUs) on openb's 8-GPU nodes.

Command (about 5–10 minutes on 2 cores)::

    python -m simulations.bench_kalos
    python -m simulations.bench_kalos --load 1.0 --stream-solvers cpsat,greedy

The fleet: openb's 617 nodes with 8 GPUs (G2 549, G3 39, V100M32 21, V100M16 8; 4,936 GPUs),
split by GPU model into 4 clusters of about 1,234 GPUs — so the largest Kalos gang (128 pods ×
8 GPUs = 1,024 GPUs) needs most of one cluster. The jobs: Acme's Kalos trace (NSDI '24), CPU
and memory per pod lowered to what these nodes hold (``trace:kalos?shape=fit``), GPUs and gang
sizes as in the trace. Two experiments:

* **batch** — all 319 gangs in one decision (20× the fleet's GPUs): which gangs each solver
  admits, by size, and placed GPUs as % of the tightest bound;
* **stream** — the trace's submit order and run times, arrivals compressed so that the offered
  load is ``--load`` × the fleet's GPUs (the real trace would keep these nodes 4 % busy);
  wait times by gang size, time-averaged allocation, never-started gangs.

Results: ``simulations/results/bench_kalos.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from placer.model import Fleet
from placer.simulate import Run, Settings, simulate, summarize
from placer.simulate.capacity import gpu_milli
from placer.simulate.metrics import bucket_of, percentile
from simulations.bench_multicluster import Entry
from simulations.benchmarking import (
    RESULTS,
    compress_arrivals,
    machine,
    meta_lines,
    offered_load,
    stopwatch,
    table,
    write_results,
)
from simulations.fleets import make_fleet, split_nodes
from simulations.kalos import kalos_replay, read_kalos_jobs
from simulations.openb import read_openb_nodes
from simulations.workloads import TimedWorkload, fleet_gpu_milli

__all__ = ["Config", "eight_gpu_fleet", "main", "run", "wait_cell", "waits_by_bucket"]

BATCH = (
    Entry("cpsat 5s", "cpsat", 5.0),
    Entry("greedy", "greedy"),
    Entry("karmada", "karmada"),
    Entry("first-fit", "first-fit"),
    Entry("best-fit", "best-fit"),
    Entry("worst-fit", "worst-fit"),
)
STREAM = (
    Entry("cpsat 0.5s", "cpsat", 0.5),
    Entry("greedy", "greedy"),
    Entry("karmada", "karmada"),
    Entry("first-fit", "first-fit"),
)


@dataclass(frozen=True)
class Config:
    clusters: int = 4
    load: float = 1.0
    batch: tuple[Entry, ...] = BATCH
    stream: tuple[Entry, ...] = STREAM
    #: keep every k-th node (tests); the gangs are then those that fit the smaller fleet.
    nodes_every: int = 1
    seed: int = 0


def eight_gpu_fleet(clusters: int, nodes_every: int = 1) -> Fleet:
    """openb's 8-GPU nodes split by model into ``clusters`` clusters."""
    nodes = [n for n in read_openb_nodes("gpu") if n.allocatable.get("nvidia.com/gpu") == 8]
    return make_fleet(split_nodes(nodes[::nodes_every], clusters))


def kalos_gangs(fleet: Fleet) -> tuple[TimedWorkload, ...]:
    """The Kalos gangs fitted to ``fleet``'s nodes; with a subsampled fleet, those that fit."""
    items = kalos_replay(read_kalos_jobs(), fit=fleet)
    largest = max(
        sum(n.allocatable.get("nvidia.com/gpu", 0) for n in c.nodes) for c in fleet.clusters
    )
    return tuple(i for i in items if gpu_milli(i.workload.total_requests()) <= largest * 1000)


def waits_by_bucket(run: Run, items: Sequence[TimedWorkload]) -> dict[str, dict[str, Any]]:
    """Wait p50/p99 and never-started count per gang-size bucket of a stream run."""
    buckets: dict[str, dict[str, Any]] = {}
    for item, outcome in zip(items, run.outcomes, strict=True):
        label = bucket_of(gpu_milli(item.workload.total_requests()))
        row = buckets.setdefault(label, {"gangs": 0, "never_started": 0, "waits": []})
        row["gangs"] += 1
        if outcome.start_s is None:
            row["never_started"] += 1
        else:
            row["waits"].append(outcome.start_s - item.arrival_s)
    return {
        label: {
            "gangs": row["gangs"],
            "never_started": row["never_started"],
            "wait_p50_s": _round(percentile(row["waits"], 50)),
            "wait_p99_s": _round(percentile(row["waits"], 99)),
        }
        for label, row in buckets.items()
    }


def _hours(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 3600, 3)


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def run(config: Config) -> dict[str, Any]:
    fleet = eight_gpu_fleet(config.clusters, config.nodes_every)
    capacity = fleet_gpu_milli(fleet)
    items = kalos_gangs(fleet)
    batch = {}
    for entry in config.batch:
        settings = Settings(entry.solver, "batch", time_limit=entry.time_limit, seed=config.seed)
        run_ = simulate(items, fleet, settings)
        summary = summarize(run_, items)
        batch[entry.label] = {
            "gpus_placed": round(summary.gpu_placed_milli / 1000, 3),
            "gangs_placed": summary.placed,
            "pct_of_bound": round(summary.placed_of_bound_pct or 0.0, 3),
            "bound_gpus": round(summary.bound_gpu_milli / 1000, 3),
            "admission": {b.label: f"{b.admitted}/{b.workloads}" for b in summary.buckets},
            "decision_s": round(run_.decisions[0].seconds, 3),
            "verifier_problems": len(summary.problems),
        }
    timed = compress_arrivals(items, load=config.load, capacity_milli=capacity)
    stream = {}
    for entry in config.stream:
        settings = Settings(entry.solver, "stream", time_limit=entry.time_limit, seed=config.seed)
        with stopwatch() as elapsed:
            run_ = simulate(timed, fleet, settings)
        summary = summarize(run_, timed)
        stats = summary.stream
        assert stats is not None
        stream[entry.label] = {
            "wait_p50_h": _hours(stats.wait_p50_s),
            "wait_p99_h": _hours(stats.wait_p99_s),
            "never_started": stats.never_started,
            "time_avg_alloc_pct": round(stats.time_avg_alloc_pct, 2),
            "offered_load_pct": round(stats.offered_load_pct, 2),
            "makespan_h": _hours(stats.makespan_s),
            "peak_queue": stats.peak_queue,
            "decisions": summary.time.decisions,
            "decision_p50_s": round(summary.time.p50_s or 0.0, 4),
            "decision_p99_s": round(summary.time.p99_s or 0.0, 4),
            "by_size": waits_by_bucket(run_, timed),
            "verifier_problems": len(summary.problems),
            "seconds": round(elapsed(), 1),
            "timeline": [
                (round(s.time_s / 3600, 3), round(s.allocated_gpu_milli / 1000, 1), s.queued)
                for s in run_.timeline
            ],
        }
    return {
        "config": {
            "clusters": config.clusters,
            "load": config.load,
            "nodes_every": config.nodes_every,
            "seed": config.seed,
        },
        "fleet": {
            "nodes": sum(len(c.nodes) for c in fleet.clusters),
            "gpus": capacity // 1000,
            "clusters": {c.name: len(c.nodes) for c in fleet.clusters},
        },
        "gangs": len(items),
        "gpus_demand": round(sum(gpu_milli(i.workload.total_requests()) for i in items) / 1000),
        "stream_window_h": _hours(timed[-1].arrival_s - timed[0].arrival_s),
        "stream_offered_load": round(offered_load(timed, capacity), 3),
        "batch": batch,
        "stream": stream,
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    fleet = result["fleet"]
    lines = [
        "# Big gangs: the 319 Kalos jobs on openb's 8-GPU nodes",
        "",
        meta_lines(meta),
        "",
        f"Fleet: {fleet['nodes']} nodes, {fleet['gpus']} GPUs in {len(fleet['clusters'])} "
        f"clusters ({', '.join(f'{k} {v} nodes' for k, v in fleet['clusters'].items())}). "
        f"{result['gangs']} gangs asking {result['gpus_demand']} GPUs. Wall time "
        f"{meta['wall_s']:.0f} s.",
        "",
        "## Batch: all gangs in one decision",
        "",
    ]
    buckets = sorted({b for row in result["batch"].values() for b in row["admission"]}, key=_order)
    lines.append(
        table(
            [
                "solver",
                "GPUs placed",
                "% of bound",
                "gangs placed",
                *(f"admitted {b}" for b in buckets),
                "decision s",
                "verifier problems",
            ],
            [
                [
                    label,
                    row["gpus_placed"],
                    row["pct_of_bound"],
                    row["gangs_placed"],
                    *(row["admission"].get(b) for b in buckets),
                    row["decision_s"],
                    row["verifier_problems"],
                ]
                for label, row in result["batch"].items()
            ],
        )
    )
    lines += [
        "",
        f"## Stream: arrivals compressed to {result['stream_offered_load']:g}× offered load "
        f"(window {result['stream_window_h']:g} h, run times as in the trace)",
        "",
        table(
            [
                "solver",
                "wait p50 h",
                "wait p99 h",
                "never started",
                "time-avg alloc %",
                "peak queue",
                "makespan h",
                "decision p50 s",
                "p99 s",
                "verifier problems",
            ],
            [
                [
                    label,
                    row["wait_p50_h"],
                    row["wait_p99_h"],
                    row["never_started"],
                    row["time_avg_alloc_pct"],
                    row["peak_queue"],
                    row["makespan_h"],
                    row["decision_p50_s"],
                    row["decision_p99_s"],
                    row["verifier_problems"],
                ]
                for label, row in result["stream"].items()
            ],
        ),
        "",
        "Wait by gang size (p50 / p99 hours; never started):",
        "",
    ]
    sizes = sorted({b for row in result["stream"].values() for b in row["by_size"]}, key=_order)
    lines.append(
        table(
            ["solver", *sizes],
            [
                [
                    label,
                    *(wait_cell(row["by_size"].get(size)) for size in sizes),
                ]
                for label, row in result["stream"].items()
            ],
        )
    )
    lines += ["", "![allocation and queue over time](bench_kalos.png)", ""]
    return "\n".join(lines)


def wait_cell(row: dict[str, Any] | None, unit: float = 3600) -> str:
    """``p50 / p99 (never started/gangs)`` of a :func:`waits_by_bucket` row, in ``unit`` s."""
    if row is None:
        return "–"

    def show(value: float | None) -> str:
        return "–" if value is None else f"{value / unit:.3g}"

    return (
        f"{show(row['wait_p50_s'])} / {show(row['wait_p99_s'])} "
        f"({row['never_started']}/{row['gangs']})"
    )


def _order(label: str) -> int:
    order = ["cpu only", "<=1 GPU", "2-8 GPUs", "9-64 GPUs", "65-512 GPUs", ">512 GPUs"]
    return order.index(label) if label in order else len(order)


def plot(result: dict[str, Any]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    for label, row in result["stream"].items():
        hours = [p[0] for p in row["timeline"]]
        top.step(hours, [p[1] for p in row["timeline"]], where="post", label=label, linewidth=1)
        bottom.step(hours, [p[2] for p in row["timeline"]], where="post", linewidth=1)
    top.axhline(result["fleet"]["gpus"], color="gray", linestyle="--", linewidth=1)
    top.set_ylabel("allocated GPUs")
    top.set_title("Kalos gangs, stream (dashed: capacity)")
    top.legend(fontsize=7)
    bottom.set_ylabel("queued gangs")
    bottom.set_xlabel("simulated hours")
    fig.tight_layout()
    fig.savefig(RESULTS / "bench_kalos.png", dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulations.bench_kalos", description=__doc__)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--load", type=float, default=1.0, help="stream offered load")
    args = parser.parse_args(argv)
    config = Config(clusters=args.clusters, load=args.load)
    meta = machine()
    with stopwatch() as elapsed:
        result = run(config)
    meta["wall_s"] = round(elapsed(), 1)
    paths = write_results("bench_kalos", {"meta": meta, **result}, markdown(result, meta))
    plot(result)
    for label, row in result["batch"].items():
        print(f"batch  {label:10s} {row['pct_of_bound']:7.2f}% of bound {row['admission']}")
    for label, row in result["stream"].items():
        print(f"stream {label:10s} wait p50 {row['wait_p50_h']} h p99 {row['wait_p99_h']} h")
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
