"""Benchmark: a ``placer simulate`` sweep in parallel processes against the same sweep serially.

Issue 18, target 7: a capacity-planning sweep (seeds × loads × drained clusters × solvers) runs
its independent simulations in ``--jobs N`` processes (default: the cores) with the figures of
a serial run; report the speed-up on this machine.

The sweep: openb split into 4 clusters (``clusters/openb-4.yaml``), synthetic gangs (at most
5 % of the largest cluster each) at loads 1.0 and 1.3, every drain set (none, then each cluster
alone), seeds 1 and 2, greedy and Karmada's rule: 2 × 5 × 2 = 20 points, 40 runs. Deterministic
solvers, so that serial and parallel figures can be compared exactly (CP-SAT's search stops on
CPU time, which varies from run to run: docs/simulate.md). Each repetition runs the sweep once with
``--jobs 1`` and once with ``--jobs N`` (alternating which goes first), each as its own
``placer simulate`` process; the wall seconds and the CPU seconds of the process and its
workers are recorded, and the figures of the two (all but the measured seconds) must be equal.

Run: ``python -m simulations.bench_sweep`` (about 10 minutes on 2 cores). Results in
``simulations/results/bench_sweep.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from placer.cli._sweep import outcomes
from placer.simulate.sweep import default_jobs
from simulations.benchmarking import heading, measure, table

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "clusters" / "openb-4.yaml"
CLUSTERS = ("aws-use1", "gcp-usc1", "azure-weu", "onprem-hz")


def sweep_argv(jobs: int, *, quick: bool) -> list[str]:
    drains = ["none", *CLUSTERS[: 1 if quick else None]]
    argv = [
        sys.executable,
        "-m",
        "placer",
        "simulate",
        "--snapshot",
        str(SNAPSHOT),
        "--workloads",
        "synthetic:gangs?cap=0.05",
        "--solver",
        "greedy,karmada",
        "--seed",
        "1,2",
        "--load",
        "1.0,1.3",
        "--jobs",
        str(jobs),
        "-o",
        "json",
    ]
    for drain in drains:
        argv += ["--drain-sweep", drain]
    return argv


def timed(argv: list[str]) -> tuple[float, float, dict[str, Any]]:
    """Wall and CPU seconds (the process and its workers) of one sweep, and its document."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    sweep: dict[str, Any] = json.loads(done.stdout)
    return wall, cpu, sweep


def run(jobs: int, repeat: int, quick: bool) -> dict[str, Any]:
    load_start = [round(x, 2) for x in os.getloadavg()]
    rows: dict[int, dict[str, list[float]]] = {1: {"wall_s": [], "cpu_s": []}}
    rows[jobs] = {"wall_s": [], "cpu_s": []}
    identical = True
    reference: list[dict[str, Any]] | None = None
    sweep_info: dict[str, Any] = {}
    for i in range(repeat):
        order = [1, jobs] if i % 2 == 0 else [jobs, 1]
        for n in order:
            wall, cpu, sweep = timed(sweep_argv(n, quick=quick))
            rows[n]["wall_s"].append(round(wall, 2))
            rows[n]["cpu_s"].append(round(cpu, 2))
            figures = outcomes(sweep)
            reference = figures if reference is None else reference
            identical = identical and figures == reference
            sweep_info = sweep["sweep"]
            print(f"{i + 1}/{repeat} jobs {n}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    medians = {
        n: {
            "median_wall_s": round(statistics.median(r["wall_s"]), 2),
            "median_cpu_s": round(statistics.median(r["cpu_s"]), 2),
        }
        for n, r in rows.items()
    }
    return {
        "sweep": {
            "argv": sweep_argv(jobs, quick=quick)[3:],
            "points": sweep_info.get("points"),
            "runs": sweep_info.get("runs"),
        },
        "jobs": jobs,
        "repeat": repeat,
        "runs_by_jobs": {str(n): r for n, r in rows.items()},
        "medians_by_jobs": {str(n): m for n, m in medians.items()},
        "speedup_wall": round(medians[1]["median_wall_s"] / medians[jobs]["median_wall_s"], 2),
        "identical_to_serial": identical,
        "load_average_at_start": load_start,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    jobs = result["jobs"]
    lines = heading(
        "bench_sweep: a `placer simulate` sweep in parallel processes",
        meta,
        f"{result['sweep']['points']} points, {result['sweep']['runs']} runs "
        f"(`placer {' '.join(result['sweep']['argv'])}`), {result['repeat']} repetitions "
        f"alternating `--jobs 1` and `--jobs {jobs}`; load average "
        f"{result['load_average_at_start']} at the start, {result['load_average_at_end']} "
        "at the end.",
    )
    rows = []
    for n, medians in result["medians_by_jobs"].items():
        walls = ", ".join(f"{w:.1f}" for w in result["runs_by_jobs"][n]["wall_s"])
        rows.append([f"`--jobs {n}`", medians["median_wall_s"], medians["median_cpu_s"], walls])
    lines += [
        table(["sweep", "wall s (median)", "CPU s (median)", "wall s per run"], rows),
        "",
        f"Speed-up (median wall, serial / `--jobs {jobs}`): **{result['speedup_wall']}x**. "
        "Figures identical to the serial run's (every row but the measured seconds): "
        f"**{'yes' if result['identical_to_serial'] else 'NO'}**.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="default: the cores")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a small sweep; print, no files")
    args = parser.parse_args(argv)
    if args.jobs < 2:
        raise SystemExit("--jobs must be 2 or more to compare with a serial run")
    if args.quick:
        print(json.dumps(run(args.jobs, 1, True), indent=1))
        return 0
    result, paths = measure("bench_sweep", lambda: run(args.jobs, args.repeat, False), markdown)
    print("speed-up", result["speedup_wall"], "identical", result["identical_to_serial"])
    print("wrote", ", ".join(str(p) for p in paths))
    return 0 if result["identical_to_serial"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
