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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from placer.model import Fleet
from placer.simulate import Run, Settings, simulate, summarize
from placer.simulate.capacity import gpu_milli
from placer.simulate.metrics import bucket_of, bucket_rank, percentile
from placer.snapshot import load_snapshot
from placer.solver.reservations import ReservationPolicy
from placer.traces.workloads import TimedWorkload

__all__ = [
    "BATCH_ENTRIES",
    "CLUSTERS",
    "RESULTS",
    "STREAM_ENTRIES",
    "Entry",
    "busy_part",
    "commit_of",
    "compress_arrivals",
    "fleet_file",
    "heading",
    "machine",
    "mean",
    "measure",
    "meta_lines",
    "offered_load",
    "pyplot",
    "save",
    "stdev",
    "stopwatch",
    "stream_figure",
    "stream_run",
    "stream_tables",
    "table",
    "virtual_fleet",
    "waits_by_bucket",
    "write_results",
]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
CLUSTERS = ROOT / "clusters"


@dataclass(frozen=True)
class Entry:
    """One contender of a benchmark: a solver at a time limit, labelled for the tables; in a
    stream, optionally with reservations and noisy run-time estimates."""

    label: str
    solver: str
    time_limit: float = 1.0
    reservations: ReservationPolicy | None = None
    #: the estimates reservations judge backfill by: the recorded run time times a factor
    #: drawn from [1 - noise, 1 + noise].
    runtime_noise: float = 0.0

    def stream_settings(self, seed: int, interval: float = 0.0) -> Settings:
        """The stream simulation's settings for this contender."""
        return Settings(
            self.solver,
            "stream",
            time_limit=self.time_limit,
            seed=seed,
            interval=interval,
            reservations=self.reservations,
            runtime_noise=self.runtime_noise,
        )


#: the contenders of the batch benchmarks: CP-SAT at the default limit and at a generous one,
#: and every baseline.
BATCH_ENTRIES = (
    Entry("cpsat 1s", "cpsat", 1.0),
    Entry("cpsat 20s", "cpsat", 20.0),
    Entry("greedy", "greedy"),
    Entry("karmada", "karmada"),
    Entry("first-fit", "first-fit"),
    Entry("best-fit", "best-fit"),
    Entry("worst-fit", "worst-fit"),
)

#: the contenders of the stream benchmarks: CP-SAT at a per-epoch limit that keeps thousands of
#: decisions affordable, the strongest baselines and Nova's fill-and-spill.
STREAM_ENTRIES = (
    Entry("cpsat 0.5s", "cpsat", 0.5),
    Entry("greedy", "greedy"),
    Entry("karmada", "karmada"),
    Entry("first-fit", "first-fit"),
)


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


def _git(*args: str, tree: Path = ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit_of(tree: Path) -> str:
    """The short commit of the checkout at ``tree``, ``+dirty`` with uncommitted changes to
    its code, ``unknown`` outside git."""
    try:
        commit = _git("rev-parse", "--short", "HEAD", tree=tree)
        # results of earlier benchmarks do not make the code dirty
        dirty = _git(
            "status", "--porcelain", "--untracked-files=no", "--", ".", ":!*/results/*", tree=tree
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


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
        "commit": commit_of(ROOT),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def _module_argv() -> list[str]:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = spec.name if spec is not None else (sys.argv[0] if sys.argv else "?")
    return [name, *sys.argv[1:]]


@contextmanager
def virtual_fleet(snapshot: Path, workdir: Path, *options: str) -> Iterator[Path]:
    """``placer fleet up SNAPSHOT OPTIONS`` in its own process; yields its kubeconfig file."""
    kubeconfig = workdir / f"kubeconfig-{time.monotonic_ns()}"
    command = [sys.executable, "-m", "placer", "fleet", "up", str(snapshot), *options]
    process = subprocess.Popen(
        [*command, "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("serving"):
                break
        else:
            raise SystemExit("placer fleet up did not start")
        yield kubeconfig
    finally:
        process.terminate()
        process.wait(timeout=30)


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
        f"Command: `{meta['command']}`.{_load(meta)}"
    )


def _load(meta: dict[str, Any]) -> str:
    """The machine's load average (1, 5, 15 min) at the start and end, when recorded: a
    shared machine's load stretches wall times (the solver's limit counts CPU time)."""
    start, end = meta.get("load_average_at_start"), meta.get("load_average_at_end")
    if not start:
        return ""
    text = f" Load average at start {start}"
    return text + (f", at end {end}." if end else ".")


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


def heading(title: str, meta: dict[str, Any], text: str) -> list[str]:
    """The first lines of a results page: title, where it ran, what it ran, wall time."""
    return [f"# {title}", "", meta_lines(meta), "", f"{text} Wall time {meta['wall_s']:.0f} s.", ""]


def measure(
    name: str,
    run: Callable[[], dict[str, Any]],
    markdown: Callable[[dict[str, Any], dict[str, Any]], str],
    plot: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[dict[str, Any], list[Path]]:
    """Run a benchmark with its ``meta`` record and write its result files."""
    meta = machine()
    with stopwatch() as elapsed:
        result = run()
    meta["wall_s"] = round(elapsed(), 1)
    meta["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    paths = write_results(name, {"meta": meta, **result}, markdown(result, meta))
    if plot is not None and (plt := pyplot()) is not None:
        plot(result)
        plt.close("all")
        paths.append(RESULTS / f"{name}.png")
    return result, paths


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or ``None`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is a dev dependency
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    return plt


def save(fig: Any, name: str) -> None:
    """Write ``results/<name>.png``."""
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=110)


def stream_figure(
    name: str, series: dict[str, Sequence[Sequence[float]]], capacity: float, title: str
) -> None:
    """Allocated GPUs and queue length over time per solver; ``series`` rows are
    ``(hours, allocated GPUs, queued)``."""
    plt = pyplot()
    if plt is None:
        return
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    for label, points in series.items():
        hours = [p[0] for p in points]
        top.step(hours, [p[1] for p in points], where="post", label=label, linewidth=1)
        bottom.step(hours, [p[2] for p in points], where="post", linewidth=1)
    top.axhline(capacity, color="gray", linestyle="--", linewidth=1)
    top.set_ylabel("allocated GPUs")
    top.set_title(f"{title} (dashed: capacity)")
    top.legend(fontsize=7)
    bottom.set_ylabel("queued workloads")
    bottom.set_xlabel("simulated hours")
    save(fig, name)


# --------------------------------------------------------------------------------------------
# stream runs (bench_stream, bench_kalos)


def stream_run(items: Sequence[TimedWorkload], fleet: Fleet, settings: Settings) -> dict[str, Any]:
    """One stream simulation reduced to the numbers the stream tables show (times in s)."""
    with stopwatch() as elapsed:
        run = simulate(items, fleet, settings)
    seconds = elapsed()
    summary = summarize(run, items)
    stats = summary.stream
    if stats is None:  # pragma: no cover - settings.mode is stream
        raise ValueError("stream_run needs a stream simulation")
    step = max(1, len(run.timeline) // 1500)
    return {
        "wait_p50_s": _round(stats.wait_p50_s),
        "wait_p99_s": _round(stats.wait_p99_s),
        "never_started": stats.never_started,
        "time_avg_alloc_pct": round(stats.time_avg_alloc_pct, 2),
        "offered_load_pct": round(stats.offered_load_pct, 2),
        "gpu_time_of_bound_pct": round(stats.gpu_time_of_bound_pct or 0.0, 2),
        "gpu_hours_in_window": round(stats.gpu_time_milli_s / 3.6e6, 1),
        "gpu_hours_bound": round(stats.gpu_time_bound_milli_s / 3.6e6, 1),
        "placed_of_bound_pct": round(summary.placed_of_bound_pct or 0.0, 2),
        "peak_queue": stats.peak_queue,
        "makespan_s": _round(stats.makespan_s),
        "decisions": summary.time.decisions,
        "decision_p50_s": round(summary.time.p50_s or 0.0, 4),
        "decision_p99_s": round(summary.time.p99_s or 0.0, 4),
        "decision_cpu_p99_s": round(summary.time.cpu_p99_s or 0.0, 4),
        "statuses": dict(summary.statuses),
        "by_size": waits_by_bucket(run, items),
        "verifier_problems": len(summary.problems),
        # evictions (queue preemption, or reservations forcing their gangs in)
        "preemptions": len(run.preemptions),
        "evicted_gangs": sum(len(p.victims) for p in run.preemptions),
        "lost_gpu_hours": round(sum(p.lost_gpu_seconds for p in run.preemptions) / 3600, 1),
        "seconds": round(seconds, 1),
        "timeline": [
            (round(s.time_s / 3600, 4), round(s.allocated_gpu_milli / 1000, 1), s.queued)
            for s in run.timeline[::step]
        ],
    }


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def waits_by_bucket(run: Run, items: Sequence[TimedWorkload]) -> dict[str, dict[str, Any]]:
    """Wait p50/p99 (s) and never-started count per gang-size bucket of a stream run."""
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
        for label, row in sorted(buckets.items(), key=lambda item: bucket_rank(item[0]))
    }


def stream_tables(rows: dict[str, dict[str, Any]], unit: str = "s") -> list[str]:
    """Markdown: the stream table per solver and the waits by gang size, times in ``unit``
    (``s`` or ``h``)."""
    scale = 3600.0 if unit == "h" else 1.0

    def show(value: float | None) -> str:
        return "–" if value is None else f"{value / scale:.3g}"

    columns = (
        ("wait p50", lambda r: show(r["wait_p50_s"])),
        ("wait p99", lambda r: show(r["wait_p99_s"])),
        ("never started", lambda r: r["never_started"]),
        ("time-avg alloc %", lambda r: r["time_avg_alloc_pct"]),
        ("offered %", lambda r: r["offered_load_pct"]),
        ("GPU-time % of bound", lambda r: r["gpu_time_of_bound_pct"]),
        ("placed % of bound", lambda r: r["placed_of_bound_pct"]),
        ("peak queue", lambda r: r["peak_queue"]),
        (f"makespan {unit}", lambda r: show(r["makespan_s"])),
        ("decisions", lambda r: r["decisions"]),
        ("decision p50 s", lambda r: r["decision_p50_s"]),
        ("p99 s", lambda r: r["decision_p99_s"]),
        ("CPU p99 s", lambda r: r["decision_cpu_p99_s"]),
        ("statuses", lambda r: ", ".join(f"{k} {v}" for k, v in r["statuses"].items())),
        ("verifier problems", lambda r: r["verifier_problems"]),
        ("run s", lambda r: r["seconds"]),
    )
    header = ["solver"] + [name if "wait" not in name else f"{name} {unit}" for name, _ in columns]
    lines = [table(header, [[label] + [f(r) for _, f in columns] for label, r in rows.items()])]
    sizes = sorted({b for r in rows.values() for b in r["by_size"]}, key=bucket_rank)
    by_size = []
    for label, r in rows.items():
        cells: list[object] = [label]
        for size in sizes:
            b = r["by_size"].get(size)
            cells.append(
                f"{show(b['wait_p50_s'])} / {show(b['wait_p99_s'])} "
                f"({b['never_started']}/{b['gangs']})"
                if b
                else None
            )
        by_size.append(cells)
    bounds = {r["gpu_hours_bound"] for r in rows.values()}
    lines += [
        "",
        "GPU-time % of bound: GPU-hours the gangs held inside the arrival window over the most "
        f"any policy could hold there (the stream's fluid bound B_time, "
        f"{', '.join(f'{b:,g}' for b in sorted(bounds))} GPU-hours); placed % of bound: GPUs "
        "ever placed over B_placed, every gang that could run on the fleet alone counted once "
        '(`simulations/README.md`, "How placements are scored").',
    ]
    lines += [
        "",
        f"Wait by gang size: p50 / p99 in {unit} (never started / workloads):",
        "",
        table(["solver", *sizes], by_size),
    ]
    return lines
