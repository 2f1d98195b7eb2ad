"""``placer simulate`` sweeps: several seeds, loads and sets of drained clusters at once.

``--seed 1,2,3`` (or ``1-3``), ``--load 1.1,1.3`` and ``--drain-sweep SET`` (repeatable; SET is
``none`` or comma-separated clusters) span a grid; each combination (a *point*) is simulated by
every ``--solver`` on the identical input, as one ``placer simulate`` would. ``--load`` sets the
``load`` of every trace/generator spec of ``--workloads``; ``--seed`` is the solver's seed and
the seed of specs that name none, as for one run; ``--drain CLUSTER`` stays drained at every
point. The runs go to :func:`placer.simulate.sweep.run_tasks`: ``--jobs N`` worker processes
(default: the cores), or ``--ray ADDRESS``; the figures equal a serial run's (``--jobs 1``).
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import parse_qsl, urlencode

from placer.cli._output import print_table
from placer.cli._types import SEED
from placer.errors import UsageError
from placer.model import Fleet

if TYPE_CHECKING:
    from placer.simulate import Settings, Timed

__all__ = [
    "Point",
    "drain_set",
    "load_list",
    "outcomes",
    "points",
    "render_sweep",
    "run_sweep",
    "seed_list",
    "sources_at_load",
    "with_load",
]

#: how many points one sweep may have (a typo in a range should not start a week of runs).
MAX_POINTS = 10_000
#: the fields of a comparison row that are measured seconds, not outcomes.
TIMING_FIELDS = ("decision_p50_s", "decision_p99_s", "seconds")


def seed_list(text: str) -> list[int]:
    """``7``, ``1,2,3`` or ``1-5`` (inclusive), mixed: the seeds in the order given."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        if dash and low:
            first, last = SEED(low), SEED(high)
            if last < first or last - first >= MAX_POINTS:
                raise argparse.ArgumentTypeError(f"bad seed range {part!r}")
            seeds.extend(range(first, last + 1))
        else:
            seeds.append(SEED(part))
    return list(dict.fromkeys(seeds))


def load_list(text: str) -> list[float]:
    """``1.3`` or ``1.1,1.2,1.3``: loads (the fleet's GPUs asked for, 1 = all of them)."""
    loads: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a load: {part!r} (e.g. 1.3)") from None
        if not 0 < value <= 10:
            raise argparse.ArgumentTypeError(f"a load is above 0 and at most 10, got {part}")
        loads.append(value)
    return list(dict.fromkeys(loads))


def drain_set(text: str) -> tuple[str, ...]:
    """``none`` or ``east,west``: the clusters drained together at one point of a sweep."""
    if text.strip().lower() == "none":
        return ()
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise argparse.ArgumentTypeError("give cluster names (comma-separated) or none")
    return names


@dataclass(frozen=True)
class Point:
    """One combination of a sweep."""

    seed: int
    load: float | None
    drained: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "load": self.load, "drained": list(self.drained)}


def points(
    seeds: Sequence[int], loads: Sequence[float | None], drain_sets: Sequence[tuple[str, ...]]
) -> list[Point]:
    """Every combination, drained sets outermost, seeds innermost."""
    grid = [
        Point(seed, load, drained)
        for drained, load, seed in itertools.product(drain_sets, loads, seeds)
    ]
    if len(grid) > MAX_POINTS:
        raise UsageError(f"the sweep has {len(grid)} points, more than {MAX_POINTS}")
    return grid


def with_load(source: str, load: float) -> str:
    """The spec ``source`` with its ``load`` parameter set to ``load``."""
    base, _, query = source.partition("?")
    params = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "load"]
    return f"{base}?{urlencode([*params, ('load', repr(load))], safe=':')}"


def sources_at_load(
    sources: Sequence[str], load: float | None, is_spec: Callable[[str], bool]
) -> list[str]:
    """``sources`` with the ``load`` of every spec set to ``load`` (``None``: as given).

    Raises:
        UsageError: a source is a manifest, which has no load to set.
    """
    if load is None:
        return list(sources)
    manifests = [s for s in sources if not is_spec(s)]
    if manifests:
        raise UsageError(
            f"--load applies to trace and generator specs; {manifests[0]} is a manifest",
            hint="drop --load, or give the workloads as a spec (trace:..., synthetic:...)",
        )
    return [with_load(s, load) for s in sources]


LoadItems = Callable[[Sequence[str], int], "list[Timed]"]
Drain = Callable[[Fleet, Sequence[str]], Fleet]


def run_sweep(
    grid: Sequence[Point],
    *,
    sources: Sequence[str],
    is_spec: Callable[[str], bool],
    load_items: LoadItems,
    fleet: Fleet,
    drain: Drain,
    settings: Sequence[Settings],
    jobs: int | None,
    ray_address: str | None,
    inputs: dict[str, Any],
) -> dict[str, Any]:
    """Simulate every point of ``grid`` with every one of ``settings`` (their seed replaced by
    the point's); the sweep's JSON document.

    ``load_items(sources, seed)`` gives the workloads of the sources (specs already carrying the
    point's load); ``drain(fleet, names)`` the fleet with ``names`` drained.
    """
    from placer.simulate.export import document
    from placer.simulate.sweep import Task, backend_name, default_jobs, run_tasks

    for point in grid:  # a manifest among the sources: refused before anything runs
        sources_at_load(sources, point.load, is_spec)
    started = time.monotonic()
    cached_items: dict[tuple[float | None, int], list[Timed]] = {}
    cached_fleets: dict[tuple[str, ...], Fleet] = {}
    tasks: list[Task] = []
    for point in grid:
        key = (point.load, point.seed)
        if key not in cached_items:
            given = sources_at_load(sources, point.load, is_spec)
            cached_items[key] = load_items(given, point.seed)
        if point.drained not in cached_fleets:
            cached_fleets[point.drained] = drain(fleet, point.drained)
        for setting in settings:
            tasks.append(
                Task(
                    tuple(cached_items[key]),
                    cached_fleets[point.drained],
                    replace(setting, seed=point.seed),
                )
            )
    workers = default_jobs() if jobs is None else jobs
    runs = run_tasks(tasks, jobs=workers, ray_address=ray_address)
    results = []
    per_point = len(settings)
    for index, point in enumerate(grid):
        items = cached_items[(point.load, point.seed)]
        simulated = cached_fleets[point.drained]
        # the same fleet object for every run of a point, as in one process (stream bounds)
        point_runs = [replace(r, before=simulated) for r in runs[index * per_point :][:per_point]]
        doc = document(point_runs, items, inputs={}, drained=point.drained)
        results.append(
            {**point.as_dict(), "workloads": len(items), "comparison": doc["comparison"]}
        )
    return {
        "input": inputs,
        "sweep": {
            "points": len(grid),
            "runs": len(tasks),
            "jobs": workers,
            "backend": backend_name(len(tasks), workers, ray_address),
            "seconds": round(time.monotonic() - started, 3),
        },
        "points": results,
    }


def outcomes(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """The sweep's rows without the measured seconds: what must equal a serial run's."""
    return [
        {
            **{k: v for k, v in point.items() if k != "comparison"},
            "comparison": [
                {k: v for k, v in row.items() if k not in TIMING_FIELDS}
                for row in point["comparison"]
            ],
        }
        for point in sweep["points"]
    ]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}%"


def render_sweep(sweep: dict[str, Any], out: TextIO) -> None:
    """The sweep as text: one row per point and solver."""
    inputs, info = sweep["input"], sweep["sweep"]
    out.write(
        f"Sweep: {info['points']} points × {len(inputs['solvers'])} solver(s) = "
        f"{info['runs']} runs on {inputs['snapshot']}, mode {inputs['mode']}; "
        f"{info['backend']} (jobs {info['jobs']}), {info['seconds']:.1f}s\n\n"
    )
    stream = inputs["mode"] == "stream"
    header: list[object] = ["SEED", "LOAD", "DRAINED", "SOLVER", "PLACED", "GPUS PLACED"]
    header += ["% OF BOUND", "ALLOC %"]
    if stream:
        header += ["WAIT P50", "GPU-TIME % OF BOUND"]
    header.append("VERIFIER")
    rows: list[list[object]] = [header]
    for point in sweep["points"]:
        for row in point["comparison"]:
            cells: list[object] = [
                point["seed"],
                "-" if point["load"] is None else point["load"],
                ",".join(point["drained"]) or "-",
                row["solver"],
                f"{row['placed']}/{row['workloads']}",
                row["gpus_placed"],
                _pct(row["placed_of_bound_pct"]),
                _pct(row["alloc_pct"]),
            ]
            if stream:
                wait = row["wait_p50_s"]
                cells += ["-" if wait is None else f"{wait}s", _pct(row["gpu_time_of_bound_pct"])]
            problems = row["verifier_problems"]
            cells.append("ok" if not problems else f"{problems} PROBLEMS")
            rows.append(cells)
    print_table(rows, out)
