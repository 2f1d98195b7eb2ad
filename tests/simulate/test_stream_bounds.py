"""The stream's own bounds (placer.simulate.streambound), worked out by hand, and the stream
metrics that use them: a workload that waits through many decisions counts once."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from placer.simulate import Settings, simulate, summarize
from placer.simulate.streambound import stream_bounds


def _refused_then_placed(kit: Any) -> list[Any]:
    """Three 5-GPU pods leave c0 (3 nodes) with 3 free GPUs per node, 9 in all, more than the
    8 of c1's one empty node. ``b`` (one 8-GPU pod) arrives: worst-fit picks c0 by its free
    total, finds no node there and places nothing although c1 would take it; when ``f0``
    leaves at t=10, c0 has an empty node and worst-fit places ``b`` there."""
    items = [
        kit.Item(kit.gang(f"f{k}", 1, gpus=5), 0.0, 10.0 if k == 0 else 100.0) for k in range(3)
    ]
    items.append(kit.Item(kit.gang("b", 1, gpus=8), 1.0, 50.0))
    return items


def test_a_workload_refused_then_placed_counts_once(kit: Any) -> None:
    items = _refused_then_placed(kit)
    run = simulate(items, kit.fleet(3, 1), Settings(solver="worst-fit", mode="stream"))
    assert [o.start_s for o in run.outcomes] == [0.0, 0.0, 0.0, 10.0]
    refused = [d for d in run.decisions if d.placed < d.workloads]
    assert refused and refused[0].bound_gpu_milli == 8000  # c1 could have taken b at t=1
    summary = summarize(run, items)
    # every workload placed, so 100 % of what any policy could place over the stream; the
    # sum of the decisions' bounds would count b twice (8000 + 8000 + 15000 = 31000)
    assert summary.gpu_placed_milli == 23000
    assert summary.bound_gpu_milli == 23000
    assert summary.placed_of_bound_pct == pytest.approx(100.0)


def test_the_gpu_time_bound_is_the_fluid_optimum(kit: Any) -> None:
    # one 8-GPU node; a (4 GPUs) from 0, b (8 GPUs) from 30, d (no GPU) closes the window at 60
    items = [
        kit.Item(kit.gang("a", 1, gpus=4), 0.0, 100.0),
        kit.Item(kit.gang("b", 1, gpus=8), 30.0, 100.0),
        kit.Item(kit.gang("d", 1, cpu=1), 60.0, 5.0),
    ]
    fleet = kit.fleet(1)
    bounds = stream_bounds(items, fleet)
    assert bounds.capacity_milli == 8000
    assert (bounds.window_start_s, bounds.window_end_s) == (0.0, 60.0)
    # [0, 30]: only a can run (4 GPUs); [30, 60]: a and b together are capped at 8 GPUs.
    # Below min(offered, capacity) = 8 GPUs x 60 s: nothing can run before it arrives.
    assert bounds.gpu_time_milli_s == 4000 * 30 + 8000 * 30
    assert bounds.placed_gpu_milli == 12000
    run = simulate(items, fleet, Settings(solver="cpsat", mode="stream"))
    stream = summarize(run, items, bounds=bounds).stream
    assert stream is not None
    # a runs alone on 4 GPUs; b waits until a leaves at 100, after the window
    assert stream.gpu_time_milli_s == pytest.approx(4000 * 60)
    assert stream.gpu_time_of_bound_pct == pytest.approx(100 * 240000 / 360000)


def test_workloads_that_never_leave_share_the_capacity(kit: Any) -> None:
    items = [kit.Item(kit.gang(f"w{k}", 1, gpus=8), float(k), None) for k in range(3)]
    bounds = stream_bounds(items, kit.fleet(1))
    assert bounds.placed_gpu_milli == 8000  # all three are runnable, one fits at the end


def test_a_workload_no_node_accepts_is_outside_the_bound(kit: Any) -> None:
    big = kit.gang("big", 3, gpus=8)  # 24 GPUs: more than the 16 of the one cluster
    pinned = kit.gang("pinned", 1, gpus=1)
    component = pinned.components[0]
    pod = replace(component.pod, node_selector={"gpu": "h100"})
    pinned = replace(pinned, components=(replace(component, pod=pod),))
    cpu = kit.gang("huge-cpu", 1, cpu=100)  # one pod of 100 cpu; nodes have 64
    ok = kit.gang("ok", 1, gpus=2)
    items = [kit.Item(w, float(i), 10.0) for i, w in enumerate([big, pinned, cpu, ok])]
    bounds = stream_bounds(items, kit.fleet(2))
    assert bounds.runnable == (False, False, False, True)
    assert bounds.placed_gpu_milli == 2000
    run = simulate(items, kit.fleet(2), Settings(solver="cpsat", mode="stream"))
    summary = summarize(run, items, bounds=bounds)
    assert summary.placed == 1 and summary.placed_of_bound_pct == pytest.approx(100.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_solver_beats_the_stream_bounds(kit: Any, seed: int) -> None:
    items = kit.random_stream(seed)
    fleet = kit.fleet(2, 1)
    bounds = stream_bounds(items, fleet)
    for solver in ("cpsat", "greedy", "first-fit"):
        run = simulate(items, fleet, Settings(solver=solver, mode="stream", time_limit=0.2))
        summary = summarize(run, items, bounds=bounds)
        stream = summary.stream
        assert stream is not None and stream.gpu_time_of_bound_pct is not None
        assert summary.gpu_placed_milli <= bounds.placed_gpu_milli
        assert stream.gpu_time_milli_s <= bounds.gpu_time_milli_s
