"""simulations/bench_cli and bench_sweep: what they compute from their runs (the runs themselves
take minutes: they are benchmarks, not tests)."""

from __future__ import annotations

from pathlib import Path

from simulations import bench_cli, bench_sweep

META = {
    "wall_s": 1.0,
    "date_utc": "2026-12-01T00:00:00Z",
    "cpu": "test",
    "cores": 2,
    "memory_gib": 1,
    "platform": "Linux",
    "python": "3.11",
    "ortools": "9",
    "numpy": "2",
    "placer": "0.1.0",
    "commit": "abc",
    "command": "python -m simulations.bench_sweep",
    "load_average_at_start": [1.0, 1.0, 1.0],
}


def test_import_seconds_adds_the_top_level_imports() -> None:
    stderr = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       100 |        100 |   encodings.utf_8\n"
        "import time:       200 |     250000 | placer.cli\n"
        "import time:       300 |     125000 | numpy\n"
    )
    assert bench_cli.import_seconds(stderr) == 0.375


def test_the_summary_compares_medians_with_the_baseline() -> None:
    codes = [
        bench_cli.Code("baseline", Path("/b"), Path()),
        bench_cli.Code("current", Path("/c"), Path()),
    ]

    def row(wall: float, cpu: float) -> dict[str, float]:
        return {"median_wall_s": wall, "median_cpu_s": cpu}

    runs = {
        "runs": {
            "warm": {"get": {"baseline": row(0.8, 0.6), "current": row(0.3, 0.25)}},
            "cold": {"get": {"baseline": row(1.5, 1.0), "current": row(0.9, 0.7)}},
        },
        "import_s": {"get": {"baseline": 0.5, "current": 0.2}},
    }
    summary = bench_cli.summarize(runs, codes)["get"]
    assert summary["met"] is True  # 0.3 <= 0.35
    assert summary["ratio_warm"] == 0.375
    assert summary["baseline_cold_median_s"] == 1.5
    runs["runs"]["warm"]["get"]["current"] = row(0.36, 0.3)
    assert bench_cli.summarize(runs, codes)["get"]["met"] is False


def test_the_sweep_page_says_the_speed_up_and_whether_identical() -> None:
    result = {
        "sweep": {"argv": ["simulate", "--jobs", "2"], "points": 2, "runs": 4},
        "jobs": 2,
        "repeat": 1,
        "runs_by_jobs": {"1": {"wall_s": [10.0]}, "2": {"wall_s": [6.0]}},
        "medians_by_jobs": {
            "1": {"median_wall_s": 10.0, "median_cpu_s": 9.0},
            "2": {"median_wall_s": 6.0, "median_cpu_s": 10.0},
        },
        "speedup_wall": 1.67,
        "identical_to_serial": False,
        "load_average_at_start": [1.0],
        "load_average_at_end": [1.0],
    }
    page = bench_sweep.markdown(result, META)
    assert "**1.67x**" in page
    assert "**NO**" in page
    assert "--drain-sweep" in " ".join(bench_sweep.sweep_argv(2, quick=False))
