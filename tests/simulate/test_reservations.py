"""Reservations in the stream: a starving gang starts, backfill never delays a reservation's
start (replayed on the simulated clock), reservations are released with their gang, and work
without an estimate never enters reserved nodes."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from placer.model import Fleet
from placer.simulate import Run, Settings, simulate
from placer.simulate.reserving import Reserver, runtime_estimates
from placer.solver.reservations import ANNOTATION_EXPECTED_RUNTIME, ReservationPolicy

NOW = ReservationPolicy(after_s=0.0, max_reservations=2)


def _starving(kit: Any) -> tuple[list[Any], Fleet]:
    """One cluster of four 8-GPU nodes; three one-node jobs run from t=0 to 100; a four-node
    gang arrives at t=1; one-node jobs of 100 s keep arriving every 30 s until t=2000 (the
    cluster is never empty at once), and a 50-s job arrives at t=40 (it may backfill)."""
    items = [kit.Item(kit.gang(f"s{i}", 1, gpus=8), 0.0, 100.0) for i in range(3)]
    items.append(kit.Item(kit.gang("big", 4, gpus=8), 1.0, 500.0))
    items += [kit.Item(kit.gang(f"t{k:03d}", 1, gpus=8), 30.0 * k, 100.0) for k in range(1, 67)]
    items.append(kit.Item(kit.gang("short", 1, gpus=8), 40.0, 50.0))
    items.sort(key=lambda item: item.arrival_s)
    return items, kit.fleet(4)


def _index(items: list[Any], name: str) -> int:
    return next(i for i, item in enumerate(items) if item.workload.ref.name == name)


@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
def test_a_starving_gang_starts_when_its_reservation_says(kit: Any, solver: str) -> None:
    items, fleet = _starving(kit)
    big, short = _index(items, "big"), _index(items, "short")
    without = simulate(items, fleet, Settings(solver, "stream", time_limit=0.3))
    with_ = simulate(items, fleet, Settings(solver, "stream", time_limit=0.3, reservations=NOW))
    assert without.outcomes[big].start_s is not None and without.outcomes[big].start_s > 1900
    (record,) = [r for r in with_.reservations if r.workload == big]
    assert (record.cluster, record.start_s, record.planned_s) == ("c0", 100.0, 1.0)
    assert with_.outcomes[big].start_s == 100.0
    assert (record.outcome, record.ended_s) == ("placed", 100.0)
    # the 50-s job ends before the reservation starts: it backfills at once
    assert with_.outcomes[short].start_s == 40.0
    assert not [p for r in (without, with_) for d in r.decisions for p in d.problems]


def _backfill_violations(
    run: Run, items: list[Any], runtimes: list[float | None], interval: float = 0.0
) -> list[str]:
    """Replays the run on the simulated clock: every workload started on a node while a
    reservation held it must be the reservation's gang, or have an estimate and be over (by
    its recorded end) before the reservation's start; each gang starts at the first decision
    epoch at or after its planned start, and no reservation expires."""
    problems = []
    for position, record in enumerate(run.reservations):
        # gangs of reservations planned before this one may use its nodes: it was planned
        # around them
        earlier = {r.workload for r in run.reservations[:position]}
        held_until = record.ended_s if record.ended_s is not None else float("inf")
        gang = run.outcomes[record.workload]
        due = math.ceil(record.start_s / interval) * interval if interval else record.start_s
        if record.outcome == "placed" and (gang.start_s or 0.0) > due:
            problems.append(f"{items[record.workload].workload.ref} started after its reservation")
        if record.outcome.startswith("replanned: expired"):
            problems.append(f"{items[record.workload].workload.ref}'s reservation expired")
        for i, outcome in enumerate(run.outcomes):
            if i == record.workload or i in earlier or outcome.placement is None:
                continue
            if outcome.start_s is None or not record.planned_s < outcome.start_s < held_until:
                continue
            if outcome.placement.cluster != record.cluster:
                continue
            if not {p.node for p in outcome.placement.pods} & set(record.nodes):
                continue
            if runtimes[i] is None:
                problems.append(
                    f"{items[i].workload.ref} without an estimate entered a reserved node"
                )
            elif outcome.end_s is None or outcome.end_s > record.start_s:
                problems.append(f"{items[i].workload.ref} backfilled past t={record.start_s:g}")
    return problems


@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
@pytest.mark.parametrize(("seed", "interval"), [(1, 0.0), (2, 0.0), (3, 25.0), (4, 0.0)])
def test_backfill_never_delays_a_reservations_start(
    kit: Any, solver: str, seed: int, interval: float
) -> None:
    items = kit.random_stream(seed, count=80, horizon=400.0)
    fleet = kit.fleet(3, 2)
    policy = ReservationPolicy(after_s=30.0, max_reservations=2)
    settings = Settings(solver, "stream", time_limit=0.2, interval=interval, reservations=policy)
    run = simulate(items, fleet, settings)
    runtimes = runtime_estimates(
        [i.workload for i in items], [i.duration_s for i in items], trace=True, noise=0, seed=0
    )
    assert run.reservations, "the stream should make some gang wait long enough"
    assert _backfill_violations(run, items, runtimes, interval) == []
    assert not [p for d in run.decisions for p in d.problems]


def _annotated(item: Any, runtime: str) -> Any:
    workload = item.workload
    annotations = {**workload.annotations, ANNOTATION_EXPECTED_RUNTIME: runtime}
    return type(item)(replace(workload, annotations=annotations), item.arrival_s, item.duration_s)


def test_work_without_an_estimate_never_enters_reserved_nodes(kit: Any) -> None:
    """Without the trace's run times only annotated work has an estimate: the first jobs and
    the gang say how long they run, the 50-s job too and backfills; the one-node jobs that
    say nothing wait for the gang, though a node stays free until it starts."""
    items, fleet = _starving(kit)
    for name, runtime in (("s0", "100s"), ("s1", "100s"), ("s2", "100s"), ("big", "500s")):
        items[_index(items, name)] = _annotated(items[_index(items, name)], runtime)
    short = _index(items, "short")
    items[short] = _annotated(items[short], "50s")
    settings = Settings("greedy", "stream", reservations=NOW, trace_estimates=False)
    run = simulate(items, fleet, settings)
    runtimes = runtime_estimates(
        [i.workload for i in items], [i.duration_s for i in items], trace=False, noise=0, seed=0
    )
    assert runtimes.count(None) == len(items) - 5
    assert _backfill_violations(run, items, runtimes) == []
    assert run.outcomes[short].start_s == 40.0
    assert run.outcomes[_index(items, "big")].start_s == 100.0
    assert run.outcomes[_index(items, "t001")].start_s == 600.0  # 30 s, no estimate: after big


def test_without_estimates_of_the_running_work_no_start_can_be_planned(kit: Any) -> None:
    items, fleet = _starving(kit)
    settings = Settings("greedy", "stream", reservations=NOW, trace_estimates=False)
    run = simulate(items, fleet, settings)
    assert _index(items, "big") not in {r.workload for r in run.reservations}


def test_noisy_estimates_are_deterministic_and_bounded(kit: Any) -> None:
    workloads = [kit.gang(f"w{i}", 1, gpus=1) for i in range(200)]
    durations = [100.0] * 200
    noisy = runtime_estimates(workloads, durations, trace=True, noise=0.5, seed=7)
    assert noisy == runtime_estimates(workloads, durations, trace=True, noise=0.5, seed=7)
    assert noisy != runtime_estimates(workloads, durations, trace=True, noise=0.5, seed=8)
    assert all(50.0 <= (e or 0.0) <= 150.0 for e in noisy)
    assert min(e or 0.0 for e in noisy) < 60.0 and max(e or 0.0 for e in noisy) > 140.0
    with pytest.raises(ValueError, match="noise"):
        runtime_estimates(workloads, durations, trace=True, noise=1.0, seed=7)


def test_a_bad_annotation_names_the_workload(kit: Any) -> None:
    bad = kit.gang("bad", 1, gpus=1)
    bad = type(bad)(**{**bad.__dict__, "annotations": {ANNOTATION_EXPECTED_RUNTIME: "soon"}})
    with pytest.raises(
        ValueError, match=f"JobSet/test/bad: annotation {ANNOTATION_EXPECTED_RUNTIME}"
    ):
        simulate(
            [kit.Item(bad, 0.0, 10.0)], kit.fleet(1), Settings("greedy", "stream", reservations=NOW)
        )


def test_noisy_estimates_still_start_the_gang(kit: Any) -> None:
    items, fleet = _starving(kit)
    big = _index(items, "big")
    settings = Settings("greedy", "stream", reservations=NOW, runtime_noise=0.5, seed=3)
    run = simulate(items, fleet, settings)
    assert (run.outcomes[big].start_s or 1e9) < 400.0
    assert [r.outcome for r in run.reservations if r.workload == big][-1] == "placed"


def test_a_reservation_is_released_when_its_gang_leaves_the_queue(kit: Any) -> None:
    items, fleet = _starving(kit)
    workloads = [i.workload for i in items]
    reserver = Reserver(
        workloads,
        [i.arrival_s for i in items],
        [i.duration_s for i in items],
        NOW,
        (),
        0,
    )
    big = _index(items, "big")
    # nothing runs: the gang's reservation starts now, on the empty fleet
    assert reserver.reserve(fleet, [big], {}, {}, 1.0)
    assert [r.workload for r in reserver.reservations] == [workloads[big].ref]
    assert reserver.review(fleet, [], 2.0)  # deleted: no longer queued
    assert reserver.reservations == []
    assert (reserver.records[-1].outcome, reserver.records[-1].ended_s) == ("gone", 2.0)


def test_reservations_need_a_stream(kit: Any) -> None:
    items, fleet = _starving(kit)
    with pytest.raises(ValueError, match="stream"):
        simulate(items, fleet, Settings("greedy", "batch", reservations=NOW))


def test_a_gang_whose_priority_says_so_gets_a_reservation_at_once(kit: Any) -> None:
    items, fleet = _starving(kit)
    big = _index(items, "big")
    items[big] = kit.Item(replace(items[big].workload, priority=100), 1.0, 500.0)
    late = ReservationPolicy(after_s=10_000.0, priority=100)
    run = simulate(items, fleet, Settings("greedy", "stream", reservations=late))
    (record,) = run.reservations
    assert (record.workload, record.planned_s, record.reason) == (big, 1.0, "priority 100 >= 100")
    assert run.outcomes[big].start_s == 100.0
    waited = simulate(
        items, fleet, Settings("greedy", "stream", reservations=replace(late, priority=None))
    )
    assert not waited.reservations  # nobody waits 10,000 s


def test_a_drain_horizon_starts_the_gang_within_the_horizon_without_evicting(kit: Any) -> None:
    """Two clusters of four 8-GPU nodes. Eight one-node jobs of 1,000 s arrive at t=0, one-node
    jobs of 150 s keep arriving every 30 s, and a four-node gang of 180 s arrives at t=1. Without a
    horizon the long jobs fill both clusters and the gang's reservation starts at 1,000 s; with
    a 200-s horizon on c0 only work of at most 200 s runs there (half the long jobs wait), so
    the gang starts on c0 within 200 s of its reservation, and nothing is evicted."""
    items = [kit.Item(kit.gang(f"long{i}", 1, gpus=8), 0.0, 1000.0) for i in range(8)]
    items.append(kit.Item(kit.gang("big", 4, gpus=8), 1.0, 180.0))
    items += [kit.Item(kit.gang(f"t{k:03d}", 1, gpus=8), 30.0 * k, 150.0) for k in range(60)]
    items.sort(key=lambda item: item.arrival_s)
    fleet = kit.fleet(4, 4)
    big = _index(items, "big")
    horizon = replace(NOW, horizon_s=200.0, horizon_cluster="c0")
    without = simulate(items, fleet, Settings("greedy", "stream", reservations=NOW))
    with_ = simulate(items, fleet, Settings("greedy", "stream", reservations=horizon))
    assert without.outcomes[big].start_s == 1000.0
    record = [r for r in with_.reservations if r.workload == big][-1]
    assert record.cluster == "c0" and record.outcome == "placed"
    start = with_.outcomes[big].start_s
    assert start is not None and start <= record.planned_s + 200.0
    assert with_.preemptions == ()
    on_c0 = [
        (items[i].workload.ref.name, items[i].duration_s)
        for i, o in enumerate(with_.outcomes)
        if o.cluster == "c0" and i != big
    ]
    assert on_c0 and all((d or math.inf) <= 200.0 for _, d in on_c0)
    assert any(
        o.cluster == "c0" and items[i].duration_s == 1000.0 for i, o in enumerate(without.outcomes)
    )
    runtimes = [i.duration_s for i in items]
    assert _backfill_violations(with_, items, runtimes) == []
    assert not [p for d in with_.decisions for p in d.problems]
