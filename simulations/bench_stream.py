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

With reservations (:data:`RESERVING`, ``--no-reservations`` leaves them out) CP-SAT runs the
stream again: gangs above 64 GPUs waiting half an hour get nodes held, the rest backfills, with
exact run-time estimates and with ±50 % noise on them.

Reported per solver: wait p50/p99 (overall and by gang size), gangs never started, time-averaged
GPU allocation against the offered load, peak queue, decision time p50/p99 and verifier verdicts.

Results: ``simulations/results/bench_stream.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from placer.model import Fleet
from placer.solver.reservations import ReservationPolicy
from placer.traces.specs import resolve_workloads
from placer.traces.workloads import TimedWorkload, fleet_gpu_milli
from simulations.benchmarking import (
    STREAM_ENTRIES,
    Entry,
    busy_part,
    compress_arrivals,
    fleet_file,
    heading,
    measure,
    offered_load,
    stream_figure,
    stream_run,
    stream_tables,
)

__all__ = ["Config", "main", "run", "workloads"]

#: reservations for the gangs above 64 GPUs that waited half an hour, four at a time
#: (docs/reservations.md).
LARGE_GANGS = ReservationPolicy(after_s=1800.0, min_gpus=65, max_reservations=4)
RESERVING = (
    Entry("cpsat 0.5s + reservations", "cpsat", 0.5, LARGE_GANGS),
    Entry("cpsat 0.5s + reservations ±50%", "cpsat", 0.5, LARGE_GANGS, runtime_noise=0.5),
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
    entries: tuple[Entry, ...] = STREAM_ENTRIES
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
    results = {
        entry.label: stream_run(items, fleet, entry.stream_settings(config.seed, config.interval))
        for entry in config.entries
    }
    return {
        "config": {
            "fleet": config.fleet,
            "count": config.count,
            "seed": config.seed,
            "load": config.load,
            "interval_s": config.interval,
            "skip": config.skip,
            "entries": [asdict(e) for e in config.entries],
        },
        "workloads": len(items),
        "capacity_gpus": capacity // 1000,
        "window_h": round((items[-1].arrival_s - items[0].arrival_s) / 3600, 3),
        "offered_load": round(offered_load(items, capacity), 3),
        "solvers": results,
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    config = result["config"]
    lines = heading(
        "Stream: synthetic gangs with openb arrivals and run times, compressed",
        meta,
        f"{result['workloads']} gangs (seed {config['seed']}) on `{config['fleet']}` "
        f"({result['capacity_gpus']} GPUs); arrivals over {result['window_h']:g} h, offered load "
        f"{result['offered_load']:g}× capacity; a decision every {config['interval_s']:g} s.",
    )
    lines += [*stream_tables(result["solvers"], "s"), "", "![stream](bench_stream.png)", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any]) -> None:
    series = {label: row["timeline"] for label, row in result["solvers"].items()}
    title = f"Stream on {result['config']['fleet']}"
    stream_figure("bench_stream", series, result["capacity_gpus"], title)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulations.bench_stream", description=__doc__)
    parser.add_argument("--fleet", default="openb-4")
    parser.add_argument("--count", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--load", type=float, default=1.1)
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--solvers", default=",".join(e.label for e in STREAM_ENTRIES))
    parser.add_argument(
        "--no-reservations",
        action="store_true",
        help="leave out the runs with reservations (cpsat with exact and ±50 %% estimates)",
    )
    args = parser.parse_args(argv)
    wanted = args.solvers.split(",")
    entries = tuple(e for e in STREAM_ENTRIES if e.label in wanted or e.solver in wanted)
    if not args.no_reservations:
        entries += RESERVING
    config = Config(
        fleet=args.fleet,
        count=args.count,
        seed=args.seed,
        load=args.load,
        interval=args.interval,
        entries=entries,
    )
    result, paths = measure("bench_stream", lambda: run(config), markdown, plot)
    for label, row in result["solvers"].items():
        print(
            f"{label:10s} wait p50 {row['wait_p50_s']} s p99 {row['wait_p99_s']} s, "
            f"alloc {row['time_avg_alloc_pct']}%"
        )
    print("wrote", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
