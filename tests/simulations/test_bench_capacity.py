"""bench_capacity's short version: the script runs, the watch controller's capacity equals the
listing controller's node by node every cycle, and its capacity steps send no LIST."""

from __future__ import annotations

from simulations import bench_capacity


def test_the_short_benchmark_runs_and_its_checks_hold() -> None:
    args = ["--members", "2", "--nodes", "30", "--pods", "200", "--cycles", "3", "--no-write"]
    parsed = bench_capacity.parser().parse_args(args)
    report = bench_capacity.run(parsed)
    summary = report["summary"]
    assert summary["equal_node_by_node"] == 3
    assert summary["free_room_equal"] == 3
    assert summary["watch"]["lists_total"] == 0
    assert summary["list"]["lists_total"] > 0  # the count sees lists when there are some
    assert all(row["watch"]["cpu_ms"] > 0 for row in report["cycles"])
