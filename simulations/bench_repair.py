"""What the priority repair costs in the stream: bench_fairshare's ``placer`` with and without it.

Command (a few minutes on 2 cores)::

    python -m simulations.bench_repair --count 250

The stream, fleet and queues are ``bench_fairshare``'s (seed, count, load, interval and solver
time limit as there; contender ``placer``: queues, fair share, preemption). It is replayed
twice in this process, side by side: with the priority repair
(:mod:`placer.solver.priority_repair`, ``Settings.priority_repair``) and without. Reported for
each: the process's CPU seconds for the whole replay and per decision epoch, the repair's own
CPU seconds (per call and per epoch), its calls, the workloads it started and took back, and
bench_fairshare's suspected priority inversions (a gang started while a higher-priority gang of
at most as many GPUs waited) and those confirmed node by node (the waiting gang packs on the
fleet the decision left with the started one released). The machine's load average is recorded
at start and end. The two replays may take different paths (CP-SAT's time limits on a loaded
machine): the repair's own CPU seconds are the cost; the whole replay's ratio is a rough one.

Results: ``simulations/results/bench_repair.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from placer.simulate.engine import simulate as simulate_stream
from simulations.bench_fairshare import (
    Config,
    _recorder,
    _settings,
    confirm_inversions,
    measures,
    tenancy,
    unplaceable,
)
from simulations.bench_fairshare import workloads as fairshare_workloads
from simulations.benchmarking import heading, measure, table
from simulations.split_oracle import Moment

__all__ = ["main", "run"]

#: the two replays, in the order they run.
VARIANTS = ("with repair", "without repair")


def run(config: Config) -> dict[str, Any]:
    fleet, capacity, sizes = tenancy(config)
    items = fairshare_workloads(config, fleet, [n for n, _, _ in sizes])
    never = unplaceable(items, fleet)
    load_start = os.getloadavg()
    rows: dict[str, Any] = {}
    for variant in VARIANTS:
        settings = replace(
            _settings("placer", config, sizes), priority_repair=variant == "with repair"
        )
        moments: list[Moment] = []
        cpu = time.process_time()
        wall = time.perf_counter()
        result = simulate_stream(items, fleet, settings, observe=_recorder(moments))
        cpu_s = time.process_time() - cpu
        wall_s = time.perf_counter() - wall
        epochs = len(result.timeline)
        measured = measures(result, items, sizes, capacity, config.interval, False, never)
        suspected = measured["suspected_inversions"]
        confirm_inversions(result, moments, items, suspected)
        rows[variant] = {
            "epochs": epochs,
            "cpu_s": round(cpu_s, 2),
            "wall_s": round(wall_s, 2),
            "cpu_ms_per_epoch": round(cpu_s / epochs * 1000, 1) if epochs else None,
            "repair_calls": result.repair_calls,
            "repair_cpu_s": round(result.repair_cpu_seconds, 3),
            "repair_cpu_ms_per_call": round(
                result.repair_cpu_seconds / result.repair_calls * 1000, 2
            )
            if result.repair_calls
            else None,
            "repair_cpu_ms_per_epoch": round(result.repair_cpu_seconds / epochs * 1000, 2)
            if epochs
            else None,
            "repair_started": result.repair_started,
            "repair_took_back": result.repair_unstarted,
            "suspected_priority_inversions": measured["suspected_priority_inversions"],
            "confirmed_inversions": sum(1 for x in suspected if x["fits"]),
            "preemptions": len(result.preemptions),
        }
        print(f"{variant}: {rows[variant]}", file=sys.stderr)
    with_, without = rows["with repair"], rows["without repair"]
    return {
        "config": {
            k: config.__dict__[k]
            for k in ("fleet", "clusters", "count", "seed", "load", "interval", "time_limit")
        },
        "workloads": len(items),
        "variants": rows,
        "cpu_ratio_with_over_without": round(with_["cpu_s"] / without["cpu_s"], 3)
        if without["cpu_s"]
        else None,
        "load_average": {
            "start": [round(x, 2) for x in load_start],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    config = result["config"]
    lines = heading(
        "bench_repair: the priority repair's cost in the stream",
        meta,
        f"bench_fairshare's `placer` stream (seed {config['seed']}, {result['workloads']} gangs, "
        f"first {config['clusters']} clusters of {config['fleet']}, load {config['load']}, "
        f"one decision every {config['interval']:g} s, CP-SAT {config['time_limit']} s), "
        "replayed with and without the priority repair in one process. Load average "
        f"{result['load_average']['start']} at start, {result['load_average']['end']} at end.",
    )
    keys = [
        ("epochs", "epochs"),
        ("cpu_s", "CPU s"),
        ("cpu_ms_per_epoch", "CPU ms / epoch"),
        ("repair_calls", "repair calls"),
        ("repair_cpu_s", "repair CPU s"),
        ("repair_cpu_ms_per_call", "repair CPU ms / call"),
        ("repair_cpu_ms_per_epoch", "repair CPU ms / epoch"),
        ("repair_started", "started by it"),
        ("repair_took_back", "taken back"),
        ("suspected_priority_inversions", "suspected inversions"),
        ("confirmed_inversions", "confirmed node by node"),
        ("preemptions", "preemptions"),
    ]
    rows = [[name, *(row[k] for k, _ in keys)] for name, row in result["variants"].items()]
    lines.append(table(["replay", *(label for _, label in keys)], rows))
    lines.append("")
    lines.append(f"CPU with / without the repair: {result['cpu_ratio_with_over_without']}.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulations.bench_repair", description=__doc__)
    parser.add_argument("--count", type=int, default=250)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--clusters", type=int, default=2, help="first N clusters (0: all)")
    parser.add_argument("--load", type=float, default=1.2)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--time-limit", type=float, default=0.3)
    args = parser.parse_args(argv)
    config = Config(
        clusters=args.clusters,
        count=args.count,
        seed=args.seed,
        load=args.load,
        interval=args.interval,
        time_limit=args.time_limit,
    )
    result, paths = measure("bench_repair", lambda: run(config), markdown)
    for name, row in result["variants"].items():
        print(f"{name}: {row}")
    print("CPU with / without:", result["cpu_ratio_with_over_without"])
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
