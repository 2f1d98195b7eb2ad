"""A queue's order (priority, then creation time, then input position, then name) and its
place in the decision: among equal priorities of one queue an earlier workload that fits is
never left waiting while a later one starts in its room (BestEffortFIFO: an earlier one that
fits nowhere does not hold the later ones back)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

import pytest

from placer.definitions import Catalog, decompose
from placer.model import Unplaced
from placer.queues import membership, order_key
from placer.queues.report import pending_order
from placer.simulate import Settings, simulate
from placer.solver import SOLVERS
from tests.queues.conftest import gpu_job, queue_doc, queues
from tests.simulate.conftest import Item
from tests.solver.conftest import cluster, fleet, node, pod, workload

TEAM_A = queue_doc("team-a", nvidia_com__gpu={"quota": 64})


def placed(result: Any) -> set[str]:
    return {p.workload.name for p in result.decision.placements}


def reasons_of(result: Any, name: str) -> dict[str, str]:
    return dict(next(u.reasons for u in result.decision.unplaced if u.workload.name == name))


def one_gang_room() -> Any:
    """One cluster whose free GPUs (8 + 4) hold both gangs below on their totals, but only
    one of them on its nodes: a 5- or a 7-GPU pod fits the 8-GPU node alone."""
    return fleet(cluster("c0", node("n0"), node("n1", used=4)))


def test_the_key_is_priority_then_creation_then_position_then_name() -> None:
    old = gpu_job("zeta", "team-a", 1, 1, created=100.0)
    new = gpu_job("alpha", "team-a", 1, 1, created=200.0)
    unborn = gpu_job("beta", "team-a", 1, 1)
    assert order_key(old, 0, 5) < order_key(new, 0, 0)  # creation time before position
    assert order_key(new, 10, 9) < order_key(old, 0, 0)  # priority before creation time
    assert order_key(new, 0, 9) < order_key(unborn, 0, 0)  # not created yet: after the created
    assert order_key(unborn, 0, 0)[1] == math.inf
    assert order_key(unborn, 0, 1) < order_key(gpu_job("aaa", "team-a", 1, 1), 0, 2)
    assert order_key(old, 0, 1) < order_key(gpu_job("zzz", "team-a", 1, 1, created=100.0), 0, 1)
    # a stream's arrival time stands for the creation time
    assert order_key(unborn, 0, 0, created=50.0) < order_key(old, 0, 1)


def test_pending_order_lists_a_queues_own_waiting_work_first_to_start_first() -> None:
    the_queues = queues(TEAM_A, queue_doc("team-b", nvidia_com__gpu={"quota": 8}))
    waiting = [
        gpu_job("late", "team-a", 1, 1, created=300.0),
        gpu_job("b-job", "team-b", 1, 1),
        gpu_job("early", "team-a", 1, 1, created=100.0),
        gpu_job("urgent", "team-a", 1, 1, created=400.0, priority=5),
        gpu_job("unborn", "team-a", 1, 1),
    ]
    order = pending_order([(w, membership(w, the_queues)) for w in waiting])
    assert order == {
        "team-a": ["default/urgent", "default/early", "default/late", "default/unborn"],
        "team-b": ["default/b-job"],
    }


def test_a_workload_is_created_at_its_creation_timestamp() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "creationTimestamp": "2026-12-02T13:00:00Z"},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
            }
        },
    }
    assert decompose(job, Catalog.builtin()).workload.created == 1796216400.0
    del job["metadata"]["creationTimestamp"]  # type: ignore[attr-defined]
    assert decompose(job, Catalog.builtin()).workload.created is None


@pytest.mark.parametrize("solver", SOLVERS)
def test_an_earlier_workload_gets_the_room_a_later_one_would_take(
    solver: str, decide_fair: Any
) -> None:
    # without the order, CP-SAT and greedy start the larger, later gang (more GPUs placed)
    jobs = [gpu_job("early", "team-a", 1, 5), gpu_job("late", "team-a", 1, 7)]
    result = decide_fair(jobs, one_gang_room(), queues(TEAM_A), solver=solver, time_limit=0.5)
    assert placed(result) == {"early"}
    if solver in ("cpsat", "greedy"):
        for text in reasons_of(result, "late").values():
            assert "its room went to early, earlier in queue team-a" in text
            assert "first in, first out" in text


def test_creation_time_orders_before_the_input_order(decide_fair: Any) -> None:
    jobs = [
        gpu_job("newer", "team-a", 1, 5, created=200.0),
        gpu_job("older", "team-a", 1, 7, created=100.0),
    ]
    assert placed(decide_fair(jobs, one_gang_room(), queues(TEAM_A))) == {"older"}
    jobs = [
        gpu_job("newer", "team-a", 1, 7, created=200.0),
        gpu_job("older", "team-a", 1, 5, created=100.0),
    ]
    assert placed(decide_fair(jobs, one_gang_room(), queues(TEAM_A))) == {"older"}


def test_an_earlier_workload_that_fits_nowhere_does_not_block(decide_fair: Any) -> None:
    jobs = [gpu_job("huge", "team-a", 1, 16), gpu_job("late", "team-a", 1, 7)]
    assert placed(decide_fair(jobs, one_gang_room(), queues(TEAM_A))) == {"late"}


def test_priority_comes_before_the_order(decide_fair: Any) -> None:
    jobs = [gpu_job("early", "team-a", 1, 7), gpu_job("urgent", "team-a", 1, 5, priority=10)]
    assert placed(decide_fair(jobs, one_gang_room(), queues(TEAM_A))) == {"urgent"}


def test_the_order_is_per_queue(decide_fair: Any) -> None:
    the_queues = queues(TEAM_A, queue_doc("team-b", nvidia_com__gpu={"quota": 64}))
    jobs = [gpu_job("b-early", "team-b", 1, 5), gpu_job("a-late", "team-a", 1, 7)]
    # the two queues are equals in the fair order, and the solver places the most GPUs
    assert placed(decide_fair(jobs, one_gang_room(), the_queues)) == {"a-late"}


def test_in_quota_comes_before_the_order(decide_fair: Any) -> None:
    # early (7 GPUs) would pass team-a's quota of 6, late (5) is within it: late runs in
    # quota, and early may not take its room over quota
    the_queues = queues(queue_doc("team-a", nvidia_com__gpu={"quota": 6}))
    jobs = [gpu_job("early", "team-a", 1, 7), gpu_job("late", "team-a", 1, 5)]
    assert placed(decide_fair(jobs, one_gang_room(), the_queues)) == {"late"}


def test_a_stream_starts_equal_work_of_a_queue_in_arrival_order() -> None:
    # a blocker holds the 8-GPU node until t=100; two gangs wait for it, the later one larger.
    # The items are listed late first: the arrival time, not the list, orders them.
    items = [
        Item(gpu_job("late", "team-a", 1, 7), arrival_s=10.0, duration_s=50.0),
        Item(gpu_job("early", "team-a", 1, 5), arrival_s=5.0, duration_s=50.0),
        Item(gpu_job("blocker", "team-a", 1, 8), arrival_s=0.0, duration_s=100.0),
    ]
    run = simulate(
        items, one_gang_room(), Settings(mode="stream", queues=queues(TEAM_A), time_limit=0.2)
    )
    assert all(not record.problems for record in run.decisions)
    starts = {items[i].workload.ref.name: o.start_s for i, o in enumerate(run.outcomes)}
    assert starts == {"blocker": 0.0, "early": 100.0, "late": 150.0}


def test_decisions_the_order_repaired_pass_the_verifier(decide_fair: Any) -> None:
    # random gangs (whole and shared GPUs) decided in two tiers on nodes partly used, so
    # placements of different solver calls plan the same devices and charging moves them: a
    # swap must give back the devices a placement holds, not those it planned
    rng = random.Random(7)
    the_queues = queues(queue_doc("team-a", nvidia_com__gpu={"quota": 24}))
    swaps = 0
    for round_ in range(24):
        nodes = [
            node(f"n{i}", devices=[rng.choice([0, 1000, 1000, 500]) for _ in range(8)])
            for i in range(6)
        ]
        the_fleet = fleet(cluster("c0", *nodes[:3]), cluster("c1", *nodes[3:]))
        jobs = [
            workload(
                f"j{i}",
                ("w", rng.randint(1, 3), pod(gpus=rng.choice([1, 2, 4, 6]))),
                ("s", rng.randint(0, 2), pod(share=rng.choice([250, 500]))),
                labels={"placer.dev/queue": "team-a"},
            )
            for i in range(14)
        ]
        solver = SOLVERS[round_ % len(SOLVERS)]
        result = decide_fair(jobs, the_fleet, the_queues, solver=solver, time_limit=0.3)
        swaps += sum(
            "first in, first out" in text
            for item in result.decision.unplaced
            for text in item.reasons.values()
        )
    assert swaps > 0


def test_a_workload_that_gave_its_room_back_starts_where_else_it_fits(
    decide_fair: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a solver that starts the last workload it is offered (first fit) and no other: it puts
    # the later 5-GPU gang on c0's 8-GPU node, the only one the earlier 7-GPU gang fits. The
    # repair gives that room to the earlier one; the later one then starts on c1.
    import placer.solver.fairshare as fairshare

    real = fairshare.solve

    def last_only(workloads: Any, the_fleet: Any, **kwargs: Any) -> Any:
        last = len(workloads) - 1
        excluded = (kwargs.pop("exclusions", None) or {}).get(last)
        kwargs["solver"] = "first-fit"
        decision = real(workloads[-1:], the_fleet, exclusions={0: excluded or {}}, **kwargs)
        skipped = tuple(
            Unplaced(w.ref, dict.fromkeys(the_fleet.names, "not taken by this solver"))
            for w in workloads[:-1]
        )
        return replace(decision, unplaced=skipped + decision.unplaced)

    monkeypatch.setattr(fairshare, "solve", last_only)
    the_fleet = fleet(cluster("c0", node("n0")), cluster("c1", node("m0", used=2)))
    jobs = [gpu_job("early", "team-a", 1, 7), gpu_job("late", "team-a", 1, 5)]
    result = decide_fair(jobs, the_fleet, queues(TEAM_A))
    assert {p.workload.name: p.cluster for p in result.decision.placements} == {
        "early": "c0",
        "late": "c1",
    }
