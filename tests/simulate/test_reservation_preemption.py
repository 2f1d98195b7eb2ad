"""Preemption for reservations in the stream: a reserved gang that waited too long starts at
once, evicting whole gangs of lower priority (never higher, never protected) that go back to
the queue and lose their run; backfill still never delays a reservation."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from placer.simulate import Run, Settings, simulate
from placer.simulate.reserving import runtime_estimates
from placer.solver.preempt import LABEL_PREEMPTIBLE
from placer.solver.reservation_preemption import RESERVATION
from placer.solver.reservations import ReservationPolicy
from placer.solver.state import gpu_milli
from tests.simulate.test_reservations import _backfill_violations, _index

FORCE = ReservationPolicy(after_s=0.0, preempt_after_s=100.0, preempt_slack_s=0.0)


def _busy_cluster(kit: Any) -> list[Any]:
    """One cluster of four 8-GPU nodes, each held from t=0 or t=10 by a job of 10,000 s: one
    protected, one of higher priority, an old one (t=0) and a young one (t=10); then a
    one-node gang of priority 1 arrives at t=20 and runs 500 s."""

    def job(name: str, priority: int = 0, **labels: str) -> Any:
        workload = kit.gang(name, 1, gpus=8)
        return replace(workload, priority=priority, labels={**workload.labels, **labels})

    return [
        kit.Item(job("protected", **{LABEL_PREEMPTIBLE: "false"}), 0.0, 10_000.0),
        kit.Item(job("higher", priority=5), 0.0, 10_000.0),
        kit.Item(job("old"), 0.0, 10_000.0),
        kit.Item(job("young"), 10.0, 10_000.0),
        kit.Item(job("big", priority=1), 20.0, 500.0),
    ]


def _problems(run: Run) -> list[str]:
    return [p for d in run.decisions for p in d.problems]


@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
def test_a_reserved_gang_that_waited_too_long_starts_by_evicting_the_youngest(
    kit: Any, solver: str
) -> None:
    items = _busy_cluster(kit)
    fleet = kit.fleet(4)
    big, young = _index(items, "big"), _index(items, "young")
    waiting = simulate(
        items,
        fleet,
        Settings(
            solver, "stream", time_limit=0.3, reservations=replace(FORCE, preempt_after_s=None)
        ),
    )
    assert waiting.outcomes[big].start_s == 10_000.0  # its reservation's start
    assert not waiting.preemptions
    run = simulate(items, fleet, Settings(solver, "stream", time_limit=0.3, reservations=FORCE))
    # the stream wakes up at t=20+100 for it: nothing else happens then
    assert run.outcomes[big].start_s == 120.0
    (record,) = run.preemptions
    assert (record.time_s, record.preemptor, record.victims) == (
        120.0,
        big,
        ((young, RESERVATION),),
    )
    assert record.lost_gpu_seconds == 8 * 110.0
    # the young job went back to the queue and ran again once the gang was done
    assert run.outcomes[young].start_s == 620.0
    for name in ("protected", "higher", "old"):
        assert run.outcomes[_index(items, name)].start_s == 0.0
    (reserved,) = [r for r in run.reservations if r.workload == big]
    assert (reserved.start_s, reserved.outcome, reserved.ended_s) == (10_000.0, "placed", 120.0)
    assert _problems(run) == []


def test_nothing_is_evicted_for_a_gang_of_the_same_priority_and_size(kit: Any) -> None:
    items = _busy_cluster(kit)
    big = _index(items, "big")
    items[big] = kit.Item(replace(items[big].workload, priority=0), 20.0, 500.0)
    run = simulate(items, kit.fleet(4), Settings("greedy", "stream", reservations=FORCE))
    assert not run.preemptions
    assert run.outcomes[big].start_s == 10_000.0


def test_a_gang_is_evicted_whole_and_the_forced_gang_starts(kit: Any) -> None:
    """A two-node gang holds both nodes; a one-node gang of higher priority is forced in: the
    whole gang goes (not one pod), and starts again when the forced gang is done."""
    pair = kit.Item(kit.gang("pair", 2, gpus=8), 0.0, 10_000.0)
    one = kit.Item(replace(kit.gang("one", 1, gpus=8), priority=1), 5.0, 300.0)
    run = simulate([pair, one], kit.fleet(2), Settings("greedy", "stream", reservations=FORCE))
    (record,) = run.preemptions
    assert record.victims == ((0, RESERVATION),) and record.gpu_milli == 16_000
    assert run.outcomes[1].start_s == 105.0
    assert run.outcomes[0].start_s == 405.0  # the whole gang again, after the forced one
    assert _problems(run) == []


def _late_starts(run: Run, items: list[Any]) -> list[str]:
    """Gangs whose reservation ended placed but later than its start (at an epoch: the stream
    decides at every event, and wakes up for each start)."""
    late = []
    for record in run.reservations:
        if record.outcome == "placed" and (record.ended_s or 0.0) > record.start_s:
            late.append(f"{items[record.workload].workload.ref} started after its reservation")
    return late


@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
@pytest.mark.parametrize("seed", [1, 2, 5])
def test_backfill_never_delays_a_reservation_and_victims_follow_the_rule(
    kit: Any, solver: str, seed: int
) -> None:
    """The replay of test_reservations (work started on reserved nodes, by its last run, ended
    before the reservation's start) with evictions: a gang's own start is read from its
    reservation's record, as an evicted gang starts again later."""
    items = kit.random_stream(seed, count=80, horizon=400.0)
    fleet = kit.fleet(3, 2)
    policy = ReservationPolicy(
        after_s=30.0, max_reservations=2, preempt_after_s=60.0, preempt_slack_s=20.0
    )
    run = simulate(items, fleet, Settings(solver, "stream", time_limit=0.2, reservations=policy))
    runtimes = runtime_estimates(
        [i.workload for i in items], [i.duration_s for i in items], trace=True, noise=0, seed=0
    )
    assert run.reservations and run.preemptions
    evicted = {victim for record in run.preemptions for victim, _ in record.victims}
    violations = [
        problem
        for problem in _backfill_violations(run, items, runtimes)
        if "started after its reservation" not in problem
    ]
    assert violations == []
    assert _late_starts(run, items) == []
    assert _problems(run) == []
    for record in run.preemptions:
        mine = items[record.preemptor].workload
        assert record.victims
        for victim, reason in record.victims:
            theirs = items[victim].workload
            assert reason == RESERVATION
            assert theirs.priority <= mine.priority
            assert gpu_milli(theirs.total_requests()) < gpu_milli(mine.total_requests())
    # an evicted gang went back to the queue: it kept no start from before its eviction
    last = {v: r.time_s for r in run.preemptions for v, _ in r.victims}
    assert all((run.outcomes[i].start_s or math.inf) >= last[i] for i in evicted)


def test_preemption_needs_reservations_to_wait_first(kit: Any) -> None:
    with pytest.raises(ValueError, match="preempt_after_s"):
        ReservationPolicy(preempt_after_s=-5.0)
