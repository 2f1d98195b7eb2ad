"""Stream mode: the queue invariant, determinism, and the departure bookkeeping."""

from __future__ import annotations

from typing import Any

import pytest

from placer.model import GPU_SHARE, Fleet, Node, Placement, Workload
from placer.quantity import GPU
from placer.simulate import Run, Settings, simulate
from placer.simulate.capacity import used_gpu_milli
from placer.solver import charge


def _copies(workload: Workload, node: Node) -> int:
    """How many pods of the workload's one component fit on ``node`` (exact for one shape)."""
    (component,) = workload.components
    requests = component.pod.requests
    free = node.free
    most = node.free_pods
    for name, amount in requests.items():
        if name not in (GPU, GPU_SHARE) and amount:
            most = min(most, free.get(name, 0) // amount)
    devices = node.gpu_devices or ()
    if requests.get(GPU):
        most = min(most, sum(1 for d in devices if d >= 1000) // requests[GPU])
    if requests.get(GPU_SHARE):
        most = min(most, sum(d // requests[GPU_SHARE] for d in devices))
    return max(most, 0)


def fits_alone(workload: Workload, fleet: Fleet) -> bool:
    """Whether the workload's pods all fit in one cluster, by exhaustive per-node counting."""
    (component,) = workload.components
    return any(
        sum(_copies(workload, n) for n in c.nodes) >= component.replicas
        for c in fleet.clusters
        if c.reachable
    )


def queue_violations(run: Run, items: list[Any], fleet: Fleet) -> list[str]:
    """Every (epoch, workload) where the queue held a workload that fitted the free capacity.

    The fleet at each epoch is rebuilt from the initial fleet and the placements running then
    (not from the engine's own bookkeeping), the queue from arrivals and start times.
    """
    problems = []
    for sample in run.timeline:
        now = sample.time_s
        running: list[Placement] = []
        queued: list[int] = []
        for i, (item, outcome) in enumerate(zip(items, run.outcomes, strict=True)):
            started = outcome.start_s is not None and outcome.start_s <= now
            if started and (outcome.end_s is None or outcome.end_s > now):
                assert outcome.placement is not None
                running.append(outcome.placement)
            elif not started and item.arrival_s <= now:
                queued.append(i)
        assert len(queued) == sample.queued, f"queue length at t={now}"
        free = charge(fleet, running)
        for i in queued:
            if fits_alone(items[i].workload, free):
                problems.append(f"t={now:.1f}: {items[i].workload.ref} fits but waits")
    return problems


def test_the_oracle_sees_a_fitting_workload(kit: Any) -> None:
    small = kit.fleet(1)
    assert fits_alone(kit.gang("a", 1, gpus=8), small)
    assert fits_alone(kit.gang("b", 4, share=500), small)
    assert not fits_alone(kit.gang("c", 2, gpus=8), small)
    assert not fits_alone(kit.gang("d", 17, share=500), small)


#: the node-aware solvers; first-fit, best-fit and worst-fit choose on cluster totals (Nova's
#: way) and may leave a workload waiting that fits elsewhere (a realisation failure).
@pytest.mark.parametrize("solver", ["cpsat", "greedy", "karmada"])
@pytest.mark.parametrize(("seed", "interval"), [(1, 0.0), (2, 0.0), (3, 25.0)])
def test_the_queue_never_holds_a_workload_that_fits(
    kit: Any, solver: str, seed: int, interval: float
) -> None:
    items = kit.random_stream(seed)
    fleet = kit.fleet(3, 2)
    run = simulate(
        items, fleet, Settings(solver=solver, mode="stream", seed=seed, interval=interval)
    )
    assert max(s.queued for s in run.timeline) > 0, "the stream must build a queue to test"
    assert sum(1 for o in run.outcomes if o.start_s is not None) > len(items) // 2
    assert queue_violations(run, items, fleet) == []
    assert all(not d.problems for d in run.decisions)


def test_a_queued_workload_starts_when_a_departure_frees_room(kit: Any) -> None:
    items = [
        kit.Item(kit.gang("first", 2, gpus=8), 0.0, 100.0),
        kit.Item(kit.gang("second", 2, gpus=8), 10.0, 50.0),
    ]
    run = simulate(items, kit.fleet(2), Settings(mode="stream"))
    first, second = run.outcomes
    assert (first.start_s, first.end_s) == (0.0, 100.0)
    assert (second.start_s, second.end_s) == (100.0, 150.0)
    assert [(s.time_s, s.queued) for s in run.timeline] == [
        (0.0, 0),
        (10.0, 1),
        (100.0, 0),
        (150.0, 0),
    ]


def test_stream_is_deterministic_for_a_seed(kit: Any) -> None:
    items = kit.random_stream(7)
    settings = Settings(solver="cpsat", mode="stream", seed=7)
    one = simulate(items, kit.fleet(3, 2), settings)
    two = simulate(items, kit.fleet(3, 2), settings)
    assert [(o.cluster, o.start_s, o.end_s) for o in one.outcomes] == [
        (o.cluster, o.start_s, o.end_s) for o in two.outcomes
    ]
    assert [o.placement for o in one.outcomes] == [o.placement for o in two.outcomes]
    assert one.timeline == two.timeline


def test_departures_give_everything_back(kit: Any) -> None:
    fleet = kit.fleet(3, 2)
    items = [
        i
        for i in kit.random_stream(4)
        if i.duration_s is not None and fits_alone(i.workload, fleet)
    ]
    run = simulate(items, fleet, Settings(solver="greedy", mode="stream"))
    assert all(o.start_s is not None for o in run.outcomes)

    def state(f: Fleet) -> list[tuple[str, dict[str, int], int, object]]:
        return [
            (n.name, {k: v for k, v in n.free.items() if v}, n.free_pods, n.gpu_devices)
            for c in f.clusters
            for n in c.nodes
        ]

    assert state(run.after) == state(fleet)
    assert run.timeline[-1].allocated_gpu_milli == 0
    last_arrival = max(i.arrival_s for i in items)
    at_last_arrival = [s for s in run.timeline if s.time_s <= last_arrival][-1]
    assert used_gpu_milli(run.loaded) == at_last_arrival.allocated_gpu_milli > 0


def test_a_workload_that_never_fits_keeps_its_reason(kit: Any) -> None:
    items = [
        kit.Item(kit.gang("huge", 9, gpus=8), 0.0, 10.0),
        kit.Item(kit.gang("ok", 1, gpus=1), 1.0, 5.0),
    ]
    run = simulate(items, kit.fleet(2, 3), Settings(mode="stream"))
    huge, ok = run.outcomes
    assert huge.start_s is None and huge.cluster is None
    assert set(huge.reasons) == {"c0", "c1"}
    assert "needs 72 GPUs" in huge.reasons["c0"]
    # 72 GPUs exceed what either cluster has even empty: not a wait, a refusal for good
    assert huge.reasons["c0"].startswith("can never fit")
    assert ok.start_s == 1.0


def test_an_observer_sees_each_decisions_input_before_it_is_taken(kit: Any) -> None:
    from placer.simulate.engine import simulate as simulate_stream

    items = [
        kit.Item(kit.gang("first", 2, gpus=8), 0.0, 100.0),
        kit.Item(kit.gang("second", 2, gpus=8), 10.0, 50.0),
    ]
    fleet = kit.fleet(2)
    seen: list[tuple[float, list[int], tuple[int, ...], int]] = []

    def observe(t: float, at: Fleet, running: Any, queue: Any) -> None:
        seen.append((t, sorted(running), tuple(queue), used_gpu_milli(at) // 1000))

    simulate_stream(items, fleet, Settings(mode="stream"), observe=observe)
    # departures gone and arrivals queued, nothing of this decision placed yet
    assert seen == [
        (0.0, [], (0,), 0),
        (10.0, [0], (1,), 16),
        (100.0, [], (1,), 0),
        (150.0, [], (), 0),
    ]
