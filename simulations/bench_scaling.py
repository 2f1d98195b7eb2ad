"""Scaling: decision time and quality against pending workloads, clusters and fleet size.

Command (about 10 minutes on 2 cores)::

    python -m simulations.bench_scaling
    python -m simulations.bench_scaling --sizes 10,100,1000 --clusters 2,8,32 --seeds 1 \
        --scale 1000x32

Four curves, all through ``placer simulate`` (so each decision includes building the model,
the LP bounds, explanations of every refusal; the independent verifier is run after it):

* **pending workloads** — one batch decision of K synthetic gangs (K = 10 … 1,000) on openb
  split into 8 clusters; CP-SAT at 1 s and the greedy baseline;
* **clusters** — one batch decision of 200 gangs on openb split into N = 2 … 32 clusters;
* **fleet scale** — gangs and clusters growing together, up to 1,000 gangs on 32 clusters
  and 2,000 on 64, on openb split by GPU model into up to 32 clusters per copy of its nodes
  (:func:`simulations.fleets.replicated_openb`; 64 clusters are two copies, every node
  distinct), gangs drawn for the whole fleet with seeds 1-5; CP-SAT at 1 s next to greedy
  and Karmada on the same input, placed GPUs as a share of the tightest bound any of them
  reported, and the peak memory a CP-SAT decision allocates (``tracemalloc``, in a separate
  untimed run);
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
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from placer.model import Fleet
from placer.simulate import Settings, simulate, summarize
from placer.simulate.metrics import percentile
from placer.traces.specs import resolve_workloads
from placer.traces.workloads import TimedWorkload
from simulations.benchmarking import heading, measure, pyplot, save, table
from simulations.fleets import openb_fleet, replicated_openb

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
    #: (gangs, clusters) of the fleet-scale curve, its seeds and the solvers compared there.
    scale: tuple[tuple[int, int], ...] = ((250, 8), (500, 16), (1000, 32), (2000, 64))
    scale_seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    scale_solvers: tuple[str, ...] = ("cpsat", "greedy", "karmada")


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


def scale_point(gangs: int, clusters: int, config: Config) -> dict[str, Any]:
    """Batch decisions of ``gangs`` gangs on ``clusters`` clusters, every scale solver on the
    same input per seed; shares of the tightest bound any of them reported."""
    fleet = replicated_openb(clusters)
    rows: dict[str, dict[str, list[Any]]] = {
        s: {"seconds": [], "cpu": [], "gpus": [], "statuses": []} for s in config.scale_solvers
    }
    bounds: list[float] = []
    for seed in config.scale_seeds:
        items = resolve_workloads(f"synthetic:gangs?seed={seed}&count={gangs}", fleet=fleet)
        bound = float("inf")
        for solver in config.scale_solvers:
            settings = Settings(solver, "batch", time_limit=config.time_limit, seed=seed)
            run_ = simulate(items, fleet, settings)
            record = run_.decisions[0]
            if record.problems:
                raise SystemExit(f"verifier: {record.problems[:3]}")
            rows[solver]["seconds"].append(record.seconds)
            rows[solver]["cpu"].append(record.cpu_seconds)
            rows[solver]["gpus"].append(record.placed_gpu_milli / 1000)
            rows[solver]["statuses"].append(record.status)
            bound = min(bound, record.bound_gpu_milli / 1000)
        bounds.append(bound)
    point: dict[str, Any] = {"gangs": gangs, "clusters": clusters, "bound_gpus": bounds}
    for solver, row in rows.items():
        pct = [100 * g / b for g, b in zip(row["gpus"], bounds, strict=True)]
        point[solver] = {
            "seconds": [round(s, 4) for s in row["seconds"]],
            "p50_s": round(percentile(row["seconds"], 50) or 0.0, 4),
            "p99_s": round(percentile(row["seconds"], 99) or 0.0, 4),
            "cpu_max_s": round(max(row["cpu"]), 4),
            "pct_of_bound": [round(p, 2) for p in pct],
            "pct_min": round(min(pct), 2),
            "pct_mean": round(sum(pct) / len(pct), 2),
            "gpus": [round(g, 2) for g in row["gpus"]],
            "statuses": row["statuses"],
        }
    baselines = [s for s in config.scale_solvers if s != "cpsat"]
    if "cpsat" in rows and baselines:
        point["cpsat"]["at_least_best_baseline"] = sum(
            1
            for k in range(len(bounds))
            if rows["cpsat"]["gpus"][k] >= max(rows[b]["gpus"][k] for b in baselines) - 1e-9
        )
        point["cpsat"]["memory_mib"] = _peak_memory(fleet, gangs, config)
    return point


def _peak_memory(fleet: Fleet, gangs: int, config: Config) -> float:
    """Peak memory (MiB) Python allocates during one CP-SAT decision of the first seed
    (``tracemalloc``: numpy's arrays included, OR-Tools' own C++ allocations not)."""
    seed = config.scale_seeds[0]
    items = resolve_workloads(f"synthetic:gangs?seed={seed}&count={gangs}", fleet=fleet)
    settings = Settings("cpsat", "batch", time_limit=config.time_limit, seed=seed)
    tracemalloc.start()
    try:
        simulate(items, fleet, settings)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return round(peak / 2**20, 1)


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
    started = time.perf_counter()
    scale = [scale_point(gangs, clusters, config) for gangs, clusters in config.scale]
    scale_wall = time.perf_counter() - started
    return {
        "config": config.__dict__,
        "by_size": by_size,
        "by_clusters": by_clusters,
        "scale": scale,
        "scale_wall_s": round(scale_wall, 1),
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
        *_scale_lines(result),
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


def _scale_lines(result: dict[str, Any]) -> list[str]:
    config = result["config"]
    points = result.get("scale") or []
    if not points:
        return []
    solvers = config["scale_solvers"]
    baselines = [s for s in solvers if s != "cpsat"]
    rows = []
    for point in points:
        cpsat = point["cpsat"]
        row: list[object] = [
            f"{point['gangs']:,} x {point['clusters']}",
            cpsat["p50_s"],
            cpsat["p99_s"],
            cpsat["cpu_max_s"],
            f"{cpsat['pct_mean']:.2f} ({cpsat['pct_min']:.2f})",
        ]
        for baseline in baselines:
            b = point[baseline]
            row += [f"{b['pct_mean']:.2f} ({b['pct_min']:.2f})", b["p50_s"]]
        row += [
            f"{cpsat.get('at_least_best_baseline', 0)}/{len(point['bound_gpus'])}",
            cpsat.get("memory_mib"),
        ]
        rows.append(row)
    header = [
        "gangs x clusters",
        "cpsat p50 s",
        "cpsat p99 s",
        "cpsat max CPU s",
        "cpsat % of bound, mean (min)",
    ]
    for baseline in baselines:
        header += [f"{baseline} % of bound, mean (min)", f"{baseline} p50 s"]
    header += ["cpsat >= best baseline", "cpsat peak MiB"]
    seeds = ", ".join(map(str, config["scale_seeds"]))
    return [
        "## Fleet scale (openb split by model, 32 clusters per copy of its nodes)",
        "",
        f"Seeds {seeds}; every solver on the same input; % of the tightest bound any of them "
        "reported; decision seconds are wall time (the limit counts CPU time: see the max CPU "
        f"column). Wall time of this part {result.get('scale_wall_s', 0):.0f} s.",
        "",
        table(header, rows),
        "",
    ]


def plot(result: dict[str, Any]) -> None:
    plt = pyplot()
    solvers = result["config"]["solvers"]
    points = result.get("scale") or []
    fig, axes = plt.subplots(1, 3 if points else 2, figsize=(15 if points else 10, 4))
    left, right = axes[0], axes[1]
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
    if points:
        ax = axes[2]
        labels = [f"{p['gangs']}x{p['clusters']}" for p in points]
        xs = list(range(len(points)))
        ax.plot(xs, [p["cpsat"]["p99_s"] for p in points], "o-", label="cpsat p99 s")
        ax.plot(xs, [p["cpsat"]["cpu_max_s"] for p in points], "s--", label="cpsat max CPU s")
        for baseline in result["config"]["scale_solvers"][1:]:
            ax.plot(xs, [p[baseline]["p50_s"] for p in points], ".:", label=f"{baseline} p50 s")
        ax.axhline(result["config"]["time_limit"], color="gray", linestyle="--", linewidth=1)
        ax.set_xticks(xs, labels)
        ax.set_xlabel("gangs x clusters")
        ax.set_ylabel("decision seconds")
        ax.set_yscale("log")
        quality = ax.twinx()
        for solver, style in zip(
            result["config"]["scale_solvers"], ("g-^", "r:v", "b:x"), strict=False
        ):
            quality.plot(
                xs, [p[solver]["pct_mean"] for p in points], style, label=f"{solver} % of bound"
            )
        quality.set_ylabel("placed GPUs, % of bound (mean)")
        ax.legend(fontsize=7, loc="upper left")
        quality.legend(fontsize=7, loc="lower right")
        ax.set_title("Fleet scale: time and quality")
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
    parser.add_argument(
        "--scale",
        default="250x8,500x16,1000x32,2000x64",
        help="fleet-scale points, GANGSxCLUSTERS (empty: none)",
    )
    parser.add_argument("--scale-seeds", default="1,2,3,4,5")
    args = parser.parse_args(argv)
    config = Config(
        sizes=_ints(args.sizes),
        clusters=_ints(args.clusters),
        seeds=_ints(args.seeds),
        time_limit=args.time_limit,
        scale=tuple(
            (int(g), int(c)) for g, c in (p.split("x") for p in args.scale.split(",") if p)
        ),
        scale_seeds=_ints(args.scale_seeds),
    )
    result, paths = measure("bench_scaling", lambda: run(config), markdown, plot)
    for key, point in result["by_size"].items():
        print(f"K={key}: " + ", ".join(f"{s} max {p['max_s']} s" for s, p in point.items()))
    for key, point in result["by_clusters"].items():
        print(f"N={key}: " + ", ".join(f"{s} max {p['max_s']} s" for s, p in point.items()))
    for point in result["scale"]:
        print(
            f"{point['gangs']}x{point['clusters']}: "
            + ", ".join(
                f"{s} {point[s]['pct_mean']}% p99 {point[s]['p99_s']} s"
                for s in result["config"]["scale_solvers"]
            )
        )
    print("online:", result["online"])
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
