"""Scaling: decision time against pending workloads and against clusters.

Command (about 5 minutes on 2 cores)::

    python -m simulations.bench_scaling
    python -m simulations.bench_scaling --sizes 10,100,1000 --clusters 2,8,32 --seeds 1

Three curves, all through ``placer simulate`` (so each decision includes building the model,
the LP bounds, explanations of every refusal and the independent verifier is run after it):

* **pending workloads** — one batch decision of K synthetic gangs (K = 10 … 1,000) on openb
  split into 8 clusters; CP-SAT at 1 s and the greedy baseline;
* **clusters** — one batch decision of 200 gangs on openb split into N = 2 … 32 clusters;
* **online** — the controller path: a stream of 300 gangs arriving one by one on openb-16,
  nothing departing, one decision per arrival on the fleet charged with everything before it
  (``--mode stream``); latency p50/p99 per decision.

Wall times on a shared 2-core machine are noisy; the load average at the start is recorded,
and ratios are only quoted between runs of the same script.

Results: ``simulations/results/bench_scaling.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from placer.model import Fleet
from placer.simulate import Settings, simulate, summarize
from placer.simulate.metrics import percentile
from placer.traces.specs import resolve_workloads
from placer.traces.workloads import TimedWorkload
from simulations.benchmarking import heading, measure, pyplot, save, table
from simulations.fleets import openb_fleet

__all__ = ["Config", "batch_point", "main", "online_latency", "run"]

ONLINE_COLUMNS = (
    "decisions",
    "p50_s",
    "p99_s",
    "max_s",
    "cpu_p50_s",
    "cpu_p99_s",
    "placed",
    "verifier_problems",
)


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (10, 50, 100, 200, 500, 1000)
    clusters: tuple[int, ...] = (2, 4, 8, 16, 32)
    seeds: tuple[int, ...] = (1, 2, 3)
    size_fleet: int = 8
    cluster_size: int = 200
    online_fleet: int = 16
    online_count: int = 300
    time_limit: float = 1.0
    solvers: tuple[str, ...] = ("cpsat", "greedy")


def batch_point(fleet: Fleet, count: int, seeds: Sequence[int], config: Config) -> dict[str, Any]:
    """Batch decisions of ``count`` gangs on ``fleet``, one per seed and solver."""
    point: dict[str, Any] = {}
    for solver in config.solvers:
        seconds, cpu, pct, statuses = [], [], [], []
        for seed in seeds:
            items = resolve_workloads(f"synthetic:gangs?seed={seed}&count={count}", fleet=fleet)
            settings = Settings(solver, "batch", time_limit=config.time_limit, seed=seed)
            run_ = simulate(items, fleet, settings)
            summary = summarize(run_, items)
            if summary.problems:
                raise SystemExit(f"verifier: {summary.problems[:3]}")
            seconds.append(run_.decisions[0].seconds)
            cpu.append(run_.decisions[0].cpu_seconds)
            pct.append(summary.placed_of_bound_pct or 0.0)
            statuses.append(run_.decisions[0].status)
        point[solver] = {
            "seconds": [round(s, 4) for s in seconds],
            "max_s": round(max(seconds), 4),
            "median_s": round(percentile(seconds, 50) or 0.0, 4),
            "cpu_s": [round(c, 4) for c in cpu],
            "cpu_max_s": round(max(cpu), 4),
            "pct_of_bound": [round(p, 2) for p in pct],
            "statuses": statuses,
            "over_limit": sum(1 for s in seconds if s > config.time_limit * 1.05),
        }
    return point


def online_latency(config: Config) -> dict[str, Any]:
    """One decision per arriving gang on a fleet that fills up (the controller path)."""
    fleet = openb_fleet(config.online_fleet)
    items = resolve_workloads(
        f"synthetic:gangs?seed=1&count={config.online_count}&time_scale=0.001", fleet=fleet
    )
    # one arrival per second, nothing departs: every decision is one workload
    spaced = [TimedWorkload(item.workload, float(i)) for i, item in enumerate(items)]
    result = {}
    for solver in config.solvers:
        settings = Settings(solver, "stream", time_limit=config.time_limit, seed=1)
        run_ = simulate(spaced, fleet, settings)
        seconds = [d.seconds for d in run_.decisions]
        cpu = [d.cpu_seconds for d in run_.decisions]
        result[solver] = {
            "decisions": len(seconds),
            "p50_s": round(percentile(seconds, 50) or 0.0, 4),
            "p99_s": round(percentile(seconds, 99) or 0.0, 4),
            "max_s": round(max(seconds), 4),
            "cpu_p50_s": round(percentile(cpu, 50) or 0.0, 4),
            "cpu_p99_s": round(percentile(cpu, 99) or 0.0, 4),
            "placed": sum(1 for o in run_.outcomes if o.cluster is not None),
            "verifier_problems": sum(len(d.problems) for d in run_.decisions),
        }
    return result


def run(config: Config) -> dict[str, Any]:
    size_fleet = openb_fleet(config.size_fleet)
    by_size = {
        count: batch_point(size_fleet, count, config.seeds, config) for count in config.sizes
    }
    by_clusters = {
        n: batch_point(openb_fleet(n), config.cluster_size, config.seeds, config)
        for n in config.clusters
    }
    return {
        "config": config.__dict__,
        "by_size": by_size,
        "by_clusters": by_clusters,
        "online": online_latency(config),
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    config = result["config"]
    solvers = config["solvers"]

    def rows(points: dict[Any, Any]) -> list[list[object]]:
        out: list[list[object]] = []
        for key, point in points.items():
            row: list[object] = [key]
            for solver in solvers:
                p = point[solver]
                row += [p["median_s"], p["max_s"], p["cpu_max_s"], f"{min(p['pct_of_bound']):.1f}"]
            row.append(point[solvers[0]]["over_limit"])
            out.append(row)
        return out

    header = [
        h
        for s in solvers
        for h in (f"{s} median s", f"{s} max s", f"{s} max CPU s", f"{s} min % of bound")
    ]
    lines = heading(
        "Scaling: decision time against pending workloads and clusters",
        meta,
        f"Seeds {', '.join(map(str, config['seeds']))}; time limit {config['time_limit']:g} s; "
        f"every decision verified. Load average at start {meta['load_average_at_start']} (the "
        "machine is shared: read ratios, not absolutes).",
    )
    lines += [
        f"## Pending workloads (openb in {config['size_fleet']} clusters)",
        "",
        table(["workloads", *header, f"{solvers[0]} over limit"], rows(result["by_size"])),
        "",
        f"## Clusters ({config['cluster_size']} workloads)",
        "",
        table(["clusters", *header, f"{solvers[0]} over limit"], rows(result["by_clusters"])),
        "",
        f"## Online: one decision per arriving gang (openb-{config['online_fleet']}, "
        f"{config['online_count']} gangs)",
        "",
        table(
            [
                "solver",
                "decisions",
                "p50 s",
                "p99 s",
                "max s",
                "CPU p50 s",
                "CPU p99 s",
                "placed",
                "verifier problems",
            ],
            [[s, *(r[k] for k in ONLINE_COLUMNS)] for s, r in result["online"].items()],
        ),
        "",
        "![scaling](bench_scaling.png)",
        "",
    ]
    return "\n".join(lines)


def plot(result: dict[str, Any]) -> None:
    plt = pyplot()
    solvers = result["config"]["solvers"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for solver in solvers:
        sizes = list(result["by_size"])
        left.plot(sizes, [result["by_size"][k][solver]["max_s"] for k in sizes], "o-", label=solver)
        ns = list(result["by_clusters"])
        right.plot(ns, [result["by_clusters"][n][solver]["max_s"] for n in ns], "o-", label=solver)
    for ax, xlabel in ((left, "pending workloads"), (right, "clusters")):
        ax.axhline(result["config"]["time_limit"], color="gray", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("decision wall time, s (max over seeds)")
        ax.legend(fontsize=8)
    left.set_title("Batch decision time vs workloads")
    right.set_title("Batch decision time vs clusters")
    save(fig, "bench_scaling")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simulations.bench_scaling", description=__doc__
    )
    parser.add_argument("--sizes", default="10,50,100,200,500,1000")
    parser.add_argument("--clusters", default="2,4,8,16,32")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--time-limit", type=float, default=1.0)
    args = parser.parse_args(argv)
    config = Config(
        sizes=_ints(args.sizes),
        clusters=_ints(args.clusters),
        seeds=_ints(args.seeds),
        time_limit=args.time_limit,
    )
    result, paths = measure("bench_scaling", lambda: run(config), markdown, plot)
    for key, point in result["by_size"].items():
        print(f"K={key}: " + ", ".join(f"{s} max {p['max_s']} s" for s, p in point.items()))
    for key, point in result["by_clusters"].items():
        print(f"N={key}: " + ", ".join(f"{s} max {p['max_s']} s" for s, p in point.items()))
    print("online:", result["online"])
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
