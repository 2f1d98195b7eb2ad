"""FGD replay: placer's online mode on Alibaba's openb cluster, next to FGD's published curves.

Command (about 10 minutes on 2 cores)::

    python -m simulations.bench_fgd        # default, gpuspec33, multigpu20; seeds 42-51
    python -m simulations.bench_fgd --variants default --seeds 42-44 --workers 1

Protocol (FGD, Weng et al., ATC '23, as :func:`placer.traces.openb.fgd_replay` reads it from their
simulator): the single 1,213-node openb cluster (6,212 GPUs, GPU sharing per device), the task
list shuffled and tuned to 130 % of GPU capacity with each seed of 42–51, tasks placed one at a
time in that order, nothing departs, a task that does not fit stays unplaced. placer runs
``placer simulate --mode online`` on it (``cpsat`` solver: the best-ranked cluster, and inside
it the node that adds the least GPU fragmentation for the trace's pod mix — FGD's own idea,
our code). Reported: the GPU allocation ratio after each arrival level (50 … 130 % of capacity)
— the x-axis of FGD's figure 7 — next to the six published policies' curves (mean of their 10
seeds), FGD's fragmentation measure at 130 %, and the verifier's verdict on every decision.

Results: ``simulations/results/bench_fgd.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from placer.model import Fleet
from placer.simulate import Settings, simulate, summarize
from placer.simulate.capacity import gpu_milli
from placer.traces.openb import fgd_replay, read_fgd_results, read_openb_nodes, read_openb_tasks
from placer.traces.workloads import TimedWorkload, fleet_gpu_milli
from simulations.benchmarking import heading, mean, measure, pyplot, save, stdev, stopwatch, table
from simulations.fleets import OPENB_SITE, make_fleet, openb_fleet

__all__ = [
    "ARRIVED",
    "POLICIES",
    "Config",
    "allocation_curve",
    "main",
    "published",
    "replay",
    "run",
]

VARIANTS = ("default", "gpuspec33", "multigpu20")
SEEDS = tuple(range(42, 52))
#: arrival levels (% of GPU capacity) of FGD's published curves.
ARRIVED = (50, 80, 90, 100, 110, 120, 130)
POLICIES = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD")


@dataclass(frozen=True)
class Config:
    """What to run: task lists, seeds, load; ``nodes_every`` > 1 keeps every k-th node only."""

    variants: tuple[str, ...] = VARIANTS
    seeds: tuple[int, ...] = SEEDS
    load: float = 1.3
    solver: str = "cpsat"
    nodes_every: int = 1
    workers: int = 2


def openb_cluster(nodes_every: int = 1) -> Fleet:
    """FGD's cluster (every ``nodes_every``-th node when subsampling)."""
    if nodes_every == 1:
        return openb_fleet(1)
    return make_fleet([read_openb_nodes("gpu")[::nodes_every]], sites=[OPENB_SITE])


def allocation_curve(
    items: Sequence[TimedWorkload],
    clusters: Sequence[str | None],
    capacity: int,
    *,
    load: float = 1.3,
) -> dict[int, float]:
    """Allocated GPUs (% of capacity) when the arrived request first reaches each level.

    The replay is tuned to stop just short of ``load`` (the next task would overshoot it), so
    the level ``100 × load`` itself is the allocation at the end.
    """
    curve: dict[int, float] = {}
    levels = list(ARRIVED)
    arrived = placed = 0
    for item, cluster in zip(items, clusters, strict=True):
        milli = gpu_milli(item.workload.total_requests())
        arrived += milli
        placed += milli if cluster is not None else 0
        while levels and arrived >= levels[0] * capacity / 100:
            curve[levels.pop(0)] = round(100.0 * placed / capacity, 3)
    for level in levels:
        if level <= round(100 * load):
            curve[level] = round(100.0 * placed / capacity, 3)
    return curve


def replay(variant: str, seed: int, config: Config) -> dict[str, Any]:
    """One seed of one task list: placer's online replay and its metrics."""
    with stopwatch() as elapsed:
        fleet = openb_cluster(config.nodes_every)
        capacity = fleet_gpu_milli(fleet)
        items = fgd_replay(
            read_openb_tasks(variant), capacity_gpu_milli=capacity, load=config.load, seed=seed
        )
        run_ = simulate(items, fleet, Settings(solver=config.solver, mode="online", seed=seed))
        summary = summarize(run_, items)
        clusters = [o.cluster for o in run_.outcomes]
        curve = allocation_curve(items, clusters, capacity, load=config.load)
    return {
        "variant": variant,
        "seed": seed,
        "tasks": len(items),
        "placed": summary.placed,
        "alloc_pct": round(summary.alloc_pct, 3),
        "fgd_frag_pct": round(100.0 * summary.fragmentation.fgd_gpu_milli / capacity, 3),
        "curve": curve,
        "decision_s": round(summary.time.total_s, 2),
        "per_task_ms": round(1000 * (summary.time.per_workload_s or 0.0), 3),
        "verifier_problems": len(summary.problems),
        "seconds": round(elapsed(), 2),
    }


def published(variant: str) -> dict[str, dict[int, dict[str, float]]]:
    """FGD's released results for a task list: policy -> arrived % -> alloc/std/frag."""
    table_: dict[str, dict[int, dict[str, float]]] = {}
    for row in read_fgd_results():
        if row.variant == variant:
            table_.setdefault(row.policy, {})[row.arrived_pct] = {
                "alloc_pct": row.alloc_pct,
                "alloc_std": row.alloc_std,
                "frag_pct": row.frag_pct,
            }
    return table_


def run(config: Config) -> dict[str, Any]:
    """Every (variant, seed) replay and the per-variant comparison with the published curves."""
    jobs = [(v, s) for v in config.variants for s in config.seeds]
    if config.workers > 1:
        with ProcessPoolExecutor(max_workers=config.workers) as pool:
            futures = [pool.submit(replay, v, s, config) for v, s in jobs]
            runs = [f.result() for f in futures]
    else:
        runs = [replay(v, s, config) for v, s in jobs]
    capacity = fleet_gpu_milli(openb_cluster(config.nodes_every)) / 1000
    variants: dict[str, Any] = {}
    top = max(ARRIVED)
    for variant in config.variants:
        mine = [r for r in runs if r["variant"] == variant]
        allocs = [r["alloc_pct"] for r in mine]
        pub = published(variant)
        at_top = {p: pub[p][top] for p in POLICIES if p in pub and top in pub[p]}
        best_baseline = max((v["alloc_pct"] for p, v in at_top.items() if p != "FGD"), default=None)
        ours = mean(allocs)
        fgd = at_top.get("FGD", {}).get("alloc_pct")
        variants[variant] = {
            "seeds": [r["seed"] for r in mine],
            "alloc_pct_mean": ours,
            "alloc_pct_std": stdev(allocs),
            "alloc_pct_min": min(allocs),
            "alloc_pct_max": max(allocs),
            "fgd_frag_pct_mean": mean([r["fgd_frag_pct"] for r in mine]),
            "curve_mean": {
                level: mean([r["curve"][level] for r in mine if level in r["curve"]])
                for level in ARRIVED
            },
            "published_at_130": at_top,
            "published_curves": {
                p: {lvl: v["alloc_pct"] for lvl, v in sorted(c.items())} for p, c in pub.items()
            },
            "points_vs_fgd": round(ours - fgd, 3) if ours is not None and fgd else None,
            "gpus_vs_fgd": round((ours - fgd) / 100 * capacity, 1) if ours and fgd else None,
            "points_vs_best_baseline": round(ours - best_baseline, 3)
            if ours is not None and best_baseline is not None
            else None,
            "verifier_problems": sum(r["verifier_problems"] for r in mine),
        }
    return {
        "config": config.__dict__,
        "capacity_gpus": capacity,
        "runs": runs,
        "variants": variants,
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = heading(
        "FGD replay: placer online vs published policies (openb, 130 % load)",
        meta,
        f"Seeds {', '.join(map(str, result['config']['seeds']))}; solver "
        f"`{result['config']['solver']}` in online mode; capacity {result['capacity_gpus']:g} "
        "GPUs.",
    )
    rows = []
    for variant, v in result["variants"].items():
        pub = v["published_at_130"]
        rows.append(
            [
                variant,
                f"{v['alloc_pct_mean']:.2f} ± {v['alloc_pct_std'] or 0:.2f}",
                *(pub.get(p, {}).get("alloc_pct") for p in POLICIES),
                v["points_vs_fgd"],
                v["points_vs_best_baseline"],
                v["fgd_frag_pct_mean"],
                pub.get("FGD", {}).get("frag_pct"),
                v["verifier_problems"],
            ]
        )
    lines += [
        "GPU allocation ratio (% of capacity) when the arrived request is 130 % of capacity:",
        "",
        table(
            [
                "task list",
                "placer online",
                *POLICIES,
                "placer − FGD (points)",
                "placer − best non-FGD",
                "placer frag %",
                "FGD frag %",
                "verifier problems",
            ],
            rows,
        ),
        "",
        "Allocation curve (mean over seeds, % of capacity) by arrived request:",
        "",
    ]
    curve_rows = []
    for variant, v in result["variants"].items():
        curve_rows.append([f"{variant}: placer", *(v["curve_mean"].get(a) for a in ARRIVED)])
        for policy in ("BestFit", "FGD"):
            curve = v["published_curves"].get(policy, {})
            curve_rows.append([f"{variant}: {policy}", *(curve.get(a) for a in ARRIVED)])
    lines += [table(["", *(f"{a} %" for a in ARRIVED)], curve_rows), ""]
    lines += ["![allocation curves](bench_fgd.png)", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any]) -> None:
    """placer's curve over the published ones, per task list."""
    plt = pyplot()
    variants = result["variants"]
    fig, axes = plt.subplots(1, len(variants), figsize=(5 * len(variants), 4), squeeze=False)
    for ax, (variant, v) in zip(axes[0], variants.items(), strict=True):
        for policy in POLICIES:
            curve = v["published_curves"].get(policy, {})
            if curve:
                ax.plot(list(curve), list(curve.values()), marker=".", linewidth=1, label=policy)
        ours = v["curve_mean"]
        ax.plot(list(ours), list(ours.values()), "k-o", linewidth=2, label="placer online")
        ax.plot([50, 100, 130], [50, 100, 100], color="gray", linestyle=":", linewidth=1)
        ax.set_title(f"openb {variant}")
        ax.set_xlabel("arrived GPU request, % of capacity")
        ax.set_ylabel("GPUs allocated, % of capacity")
        ax.set_ylim(75, 101)
        ax.set_xlim(75, 132)
        ax.legend(fontsize=7, loc="lower right")
    save(fig, "bench_fgd")


def _seeds(text: str) -> tuple[int, ...]:
    if "-" in text:
        low, high = text.split("-", 1)
        return tuple(range(int(low), int(high) + 1))
    return tuple(int(s) for s in text.split(","))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulations.bench_fgd", description=__doc__)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seeds", default="42-51", help="e.g. 42-51 or 42,43")
    parser.add_argument("--workers", type=int, default=2, help="parallel replays (default 2)")
    parser.add_argument("--solver", default="cpsat")
    args = parser.parse_args(argv)
    config = Config(
        variants=tuple(args.variants.split(",")),
        seeds=_seeds(args.seeds),
        solver=args.solver,
        workers=args.workers,
    )
    result, paths = measure("bench_fgd", lambda: run(config), markdown, plot)
    for variant, v in result["variants"].items():
        print(
            f"{variant}: placer {v['alloc_pct_mean']:.2f}% (FGD "
            f"{v['published_at_130'].get('FGD', {}).get('alloc_pct')}%, gap "
            f"{v['points_vs_fgd']} points; vs best baseline {v['points_vs_best_baseline']})"
        )
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
