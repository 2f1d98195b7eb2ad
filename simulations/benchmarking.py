"""What every benchmark script shares: the record of where and how it ran, and result files.

A result counts only with its context, so each ``simulations/bench_*.py`` writes
``simulations/results/<name>.json`` holding ``meta`` — machine (CPU model, cores, memory),
versions (Python, OR-Tools, numpy, placer and its git commit), the UTC date, the exact command,
the seeds and the wall time of the run — next to its numbers, plus a Markdown page
``<name>.md`` with the tables (and PNG plots when matplotlib is there). Runs are by hand, not
in CI; the small configurations the tests use never write here.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from placer.model import Fleet
from placer.simulate.capacity import gpu_milli
from placer.snapshot import load_snapshot
from simulations.workloads import TimedWorkload

__all__ = [
    "CLUSTERS",
    "RESULTS",
    "busy_part",
    "compress_arrivals",
    "fleet_file",
    "machine",
    "mean",
    "meta_lines",
    "offered_load",
    "stdev",
    "stopwatch",
    "table",
    "write_results",
]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
CLUSTERS = ROOT / "clusters"


def fleet_file(name: str) -> Fleet:
    """A committed example fleet (``clusters/<name>.yaml``)."""
    return load_snapshot(CLUSTERS / f"{name}.yaml")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine() -> dict[str, Any]:
    """Where and with what the benchmark runs."""
    return {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([Path(sys.executable).name, "-m", *_module_argv()]),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "ortools": _version("ortools"),
        "numpy": _version("numpy"),
        "placer": _version("placer"),
        "commit": _commit(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def _module_argv() -> list[str]:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = spec.name if spec is not None else (sys.argv[0] if sys.argv else "?")
    return [name, *sys.argv[1:]]


def mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def stdev(values: Sequence[float]) -> float | None:
    return round(statistics.stdev(values), 3) if len(values) > 1 else None


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """``with stopwatch() as elapsed: ...; elapsed()`` — wall seconds since entry."""
    started = time.perf_counter()
    yield lambda: time.perf_counter() - started


def write_results(name: str, data: dict[str, Any], markdown: str) -> list[Path]:
    """Write ``results/<name>.json`` and ``results/<name>.md``; returns the paths."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path = RESULTS / f"{name}.json"
    md_path = RESULTS / f"{name}.md"
    json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    md_path.write_text(markdown, encoding="utf-8")
    return [json_path, md_path]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""

    def cell(value: object) -> str:
        if value is None:
            return "–"
        if isinstance(value, float):
            return f"{value:,.2f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"
        return str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def meta_lines(meta: dict[str, Any]) -> str:
    """The ``meta`` record as a short Markdown paragraph."""
    return (
        f"Run {meta['date_utc']} on {meta['cpu']} ({meta['cores']} cores, "
        f"{meta['memory_gib']} GiB), {meta['platform']}; Python {meta['python']}, OR-Tools "
        f"{meta['ortools']}, numpy {meta['numpy']}, placer {meta['placer']} at {meta['commit']}. "
        f"Command: `{meta['command']}`."
    )


def offered_load(items: Sequence[TimedWorkload], capacity_milli: int) -> float:
    """Mean GPU demand of the running workloads over the arrival window, if none waited.

    Each workload counts from its arrival for its duration, clipped at the last arrival (work
    beyond the window does not load the window); as a share of the fleet's GPUs. Items without
    a duration run to the end of the window.
    """
    if not items or not capacity_milli:
        return 0.0
    first, last = items[0].arrival_s, items[-1].arrival_s
    if last <= first:
        return 0.0
    work = 0.0
    for item in items:
        end = last if item.duration_s is None else min(last, item.arrival_s + item.duration_s)
        work += gpu_milli(item.workload.total_requests()) * (end - item.arrival_s)
    return work / ((last - first) * capacity_milli)


def compress_arrivals(
    items: Sequence[TimedWorkload], *, load: float, capacity_milli: int
) -> tuple[TimedWorkload, ...]:
    """Squeeze the arrival times (durations kept) until the offered load is ``load``.

    Traces record arrivals and run times of one cluster at its own, often low, load; a stream
    benchmark needs the fleet busy. Compressing only the arrivals raises the load while keeping
    the arrival pattern (bursts, quiet hours) and every workload's run time. The factor is
    found by bisection (the offered load grows as arrivals get closer).
    """
    first = items[0].arrival_s if items else 0.0

    def squeezed(factor: float) -> tuple[TimedWorkload, ...]:
        return tuple(replace(i, arrival_s=first + (i.arrival_s - first) * factor) for i in items)

    low, high = 1e-9, 1.0
    if offered_load(squeezed(high), capacity_milli) >= load:
        return tuple(items)
    if offered_load(squeezed(low), capacity_milli) < load:
        raise ValueError(f"the workloads cannot offer a load of {load:g} however squeezed")
    for _ in range(60):
        middle = (low * high) ** 0.5
        if offered_load(squeezed(middle), capacity_milli) >= load:
            low = middle
        else:
            high = middle
    return squeezed(low)


def busy_part(items: Sequence[TimedWorkload], skip: float) -> tuple[TimedWorkload, ...]:
    """The items after the first ``skip`` share of arrivals, re-based to start at 0.

    openb's creation times are very uneven (10 % of tasks over the first 119 of 149 days);
    skipping the quiet start keeps a stream from idling for most of its window.
    """
    start = items[int(skip * len(items))].arrival_s if items else 0.0
    return tuple(replace(i, arrival_s=i.arrival_s - start) for i in items if i.arrival_s >= start)
