"""Stream: arrivals and departures from openb's creation and deletion times, compressed.

Command (about 10 minutes on 2 cores)::

    python -m simulations.bench_stream
    python -m simulations.bench_stream --count 800 --load 1.1 --solvers cpsat,greedy

Workloads (benchmark-design C.2 "W4"): synthetic gangs of openb pods with the Kalos size tail
(``synthetic:gangs?seed=S&count=N`` on ``clusters/openb-4.yaml``); each arrives at the openb
creation time of its first pod's task and runs for that task's lifetime. openb itself is
lightly loaded (its tasks never occupy more than ~70 GPUs at once), so the quiet first 10 % of
arrivals are skipped and the remaining arrivals are squeezed — run times unchanged — until the
offered load is ``--load`` × the fleet's GPUs. ``placer simulate --mode stream`` replays it:
departures free capacity (``release``), the pending queue is retried, one batch decision per
epoch of ``--interval`` seconds (a controller's resync period).

Reported per solver: wait p50/p99 (overall and by gang size), gangs never started, time-averaged
GPU allocation against the offered load, peak queue, decision time p50/p99 and verifier verdicts.

Results: ``simulations/results/bench_stream.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.model import Fleet
from placer.simulate import Settings, simulate, summarize
from simulations.bench_kalos import wait_cell, waits_by_bucket
from simulations.bench_multicluster import Entry
from simulations.benchmarking import (
    RESULTS,
    busy_part,
    compress_arrivals,
    fleet_file,
    machine,
    meta_lines,
    offered_load,
    stopwatch,
    table,
    write_results,
)
from simulations.specs import resolve_workloads
from simulations.workloads import TimedWorkload, fleet_gpu_milli

__all__ = ["Config", "main", "run", "workloads"]

SOLVERS = (
    Entry("cpsat 0.5s", "cpsat", 0.5),
    Entry("greedy", "greedy"),
    Entry("karmada", "karmada"),
    Entry("first-fit", "first-fit"),
)


@dataclass(frozen=True)
class Config:
    fleet: str = "openb-4"
    count: int = 1500
    seed: int = 1
    load: float = 1.1
    #: decision epoch, seconds of compressed time.
    interval: float = 30.0
    skip: float = 0.1
    entries: tuple[Entry, ...] = SOLVERS
    fleet_object: Fleet | None = field(default=None, compare=False)


def workloads(config: Config, fleet: Fleet) -> tuple[TimedWorkload, ...]:
    """The stream: synthetic gangs with openb times, quiet start skipped, arrivals squeezed."""
    spec = f"synthetic:gangs?seed={config.seed}&count={config.count}"
    items = busy_part(resolve_workloads(spec, fleet=fleet), config.skip)
    return compress_arrivals(items, load=config.load, capacity_milli=fleet_gpu_milli(fleet))


def run(config: Config) -> dict[str, Any]:
    fleet = config.fleet_object or fleet_file(config.fleet)
    items = workloads(config, fleet)
    capacity = fleet_gpu_milli(fleet)
    results = {}
    for entry in config.entries:
        settings = Settings(
            entry.solver,
            "stream",
            time_limit=entry.time_limit,
            seed=config.seed,
            interval=config.interval,
        )
        with stopwatch() as elapsed:
            run_ = simulate(items, fleet, settings)
        summary = summarize(run_, items)
        stats = summary.stream
        assert stats is not None
        results[entry.label] = {
            "wait_p50_s": stats.wait_p50_s,
            "wait_p99_s": stats.wait_p99_s,
            "never_started": stats.never_started,
            "time_avg_alloc_pct": round(stats.time_avg_alloc_pct, 2),
            "peak_queue": stats.peak_queue,
            "makespan_h": round(stats.makespan_s / 3600, 3),
            "decisions": summary.time.decisions,
            "decision_p50_s": round(summary.time.p50_s or 0.0, 4),
            "decision_p99_s": round(summary.time.p99_s or 0.0, 4),
            "placed_of_bound_pct": round(summary.placed_of_bound_pct or 0.0, 2),
            "by_size": waits_by_bucket(run_, items),
            "verifier_problems": len(summary.problems),
            "seconds": round(elapsed(), 1),
            "timeline": [
                (round(s.time_s / 3600, 4), round(s.allocated_gpu_milli / 1000, 1), s.queued)
                for s in run_.timeline[:: max(1, len(run_.timeline) // 1500)]
            ],
        }
    return {
        "config": {
            "fleet": config.fleet,
            "count": config.count,
            "seed": config.seed,
            "load": config.load,
            "interval_s": config.interval,
            "skip": config.skip,
            "entries": [e.__dict__ for e in config.entries],
        },
        "workloads": len(items),
        "capacity_gpus": capacity // 1000,
        "window_h": round((items[-1].arrival_s - items[0].arrival_s) / 3600, 3),
        "offered_load": round(offered_load(items, capacity), 3),
        "solvers": results,
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    config = result["config"]
    lines = [
        "# Stream: synthetic gangs with openb arrivals and run times, compressed",
        "",
        meta_lines(meta),
        "",
        f"{result['workloads']} gangs (seed {config['seed']}) on `{config['fleet']}` "
        f"({result['capacity_gpus']} GPUs); arrivals over {result['window_h']:g} h, offered load "
        f"{result['offered_load']:g}× capacity; a decision every {config['interval_s']:g} s. "
        f"Wall time {meta['wall_s']:.0f} s.",
        "",
        table(
            [
                "solver",
                "wait p50 s",
                "wait p99 s",
                "never started",
                "time-avg alloc %",
                "peak queue",
                "decisions",
                "decision p50 s",
                "p99 s",
                "verifier problems",
                "run s",
            ],
            [
                [
                    label,
                    row["wait_p50_s"],
                    row["wait_p99_s"],
                    row["never_started"],
                    row["time_avg_alloc_pct"],
                    row["peak_queue"],
                    row["decisions"],
                    row["decision_p50_s"],
                    row["decision_p99_s"],
                    row["verifier_problems"],
                    row["seconds"],
                ]
                for label, row in result["solvers"].items()
            ],
        ),
        "",
        "Wait by gang size (p50 / p99 seconds; never started / gangs):",
        "",
    ]
    sizes = sorted({b for row in result["solvers"].values() for b in row["by_size"]}, key=_order)
    rows = []
    for label, row in result["solvers"].items():
        rows.append([label, *(wait_cell(row["by_size"].get(s), 1) for s in sizes)])
    lines += [table(["solver", *sizes], rows), "", "![stream](bench_stream.png)", ""]
    return "\n".join(lines)


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
    for label, row in result["solvers"].items():
        hours = [p[0] for p in row["timeline"]]
        top.step(hours, [p[1] for p in row["timeline"]], where="post", label=label, linewidth=1)
        bottom.step(hours, [p[2] for p in row["timeline"]], where="post", linewidth=1)
    top.axhline(result["capacity_gpus"], color="gray", linestyle="--", linewidth=1)
    top.set_ylabel("allocated GPUs")
    top.set_title("Stream on openb-4 (dashed: capacity)")
    top.legend(fontsize=7)
    bottom.set_ylabel("queued gangs")
    bottom.set_xlabel("simulated hours")
    fig.tight_layout()
    fig.savefig(RESULTS / "bench_stream.png", dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulations.bench_stream", description=__doc__)
    parser.add_argument("--fleet", default="openb-4")
    parser.add_argument("--count", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--load", type=float, default=1.1)
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--solvers", default=",".join(e.label for e in SOLVERS))
    args = parser.parse_args(argv)
    wanted = args.solvers.split(",")
    entries = tuple(e for e in SOLVERS if e.label in wanted or e.solver in wanted)
    config = Config(
        fleet=args.fleet,
        count=args.count,
        seed=args.seed,
        load=args.load,
        interval=args.interval,
        entries=entries,
    )
    meta = machine()
    with stopwatch() as elapsed:
        result = run(config)
    meta["wall_s"] = round(elapsed(), 1)
    paths = write_results("bench_stream", {"meta": meta, **result}, markdown(result, meta))
    plot(result)
    for label, row in result["solvers"].items():
        print(
            f"{label:10s} wait p50 {row['wait_p50_s']} s p99 {row['wait_p99_s']} s, "
            f"alloc {row['time_avg_alloc_pct']}%"
        )
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
