"""Elastic components in the solver: placed at the largest count that fits, never below the
minimum, by CP-SAT and every baseline in both modes; after priorities and fair share; checked by
the verifier and covered by the bounds."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from placer.model import ComponentDemand, Decision, Workload
from placer.policy import PlacementPolicy
from placer.solver import SOLVERS, solve, verify
from placer.solver.fairshare import Running, solve_fair
from tests.builders.fleets import cluster, fleet, node, pod, workload
from tests.queues.conftest import queue_doc, queues


def elastic(name: str, low: int, high: int, *, gpus: int = 1, **kwargs: object) -> Workload:
    """A workload of one launcher pod (no GPU) and ``low..high`` workers of ``gpus`` GPUs."""
    base = workload(name, ("launcher", 1, pod(0, 1)), ("worker", low, pod(gpus, 1)), **kwargs)
    launcher, worker = base.components
    return replace(base, components=(launcher, replace(worker, max_replicas=high)))


def workers(decision: Decision, name: str) -> int:
    placement = next(p for p in decision.placements if p.workload.name == name)
    return Counter(p.component for p in placement.pods)["worker"]


CASES = [(s, m) for s in SOLVERS for m in ("batch", "online")]


@pytest.mark.parametrize(("solver", "mode"), CASES, ids=[f"{s}-{m}" for s, m in CASES])
def test_largest_count_that_fits(solver: str, mode: str) -> None:
    # 2 nodes of 8 GPUs with 3 taken: 13 free GPUs, so 13 of at most 20 workers
    fleet_ = fleet(cluster("a", node("a0", 8, 3), node("a1", 8)))
    job = elastic("job", 2, 20)
    decision = solve([job], fleet_, solver=solver, mode=mode)
    assert workers(decision, "job") == 13
    assert verify(decision, [job], fleet_) == []
    placement = decision.placements[0]
    assert placement.requests["nvidia.com/gpu"] == 13
    assert decision.summary.placed_requests["nvidia.com/gpu"] == 13
    assert decision.summary.bound["tightest_gpu"] >= 13


@pytest.mark.parametrize("solver", SOLVERS)
def test_never_below_the_minimum(solver: str) -> None:
    fleet_ = fleet(cluster("a", node("a0", 4)))
    fits_min = elastic("fits", 4, 10)
    decision = solve([fits_min], fleet_, solver=solver)
    assert workers(decision, "fits") == 4
    too_big = elastic("big", 5, 10)
    decision = solve([too_big], fleet_, solver=solver)
    assert decision.placements == ()
    assert [u.workload.name for u in decision.unplaced] == ["big"]


def test_growth_comes_after_priorities_and_placing_others() -> None:
    # 8 GPUs: the elastic job's minimum (2) and the rigid job (4) both fit; the elastic job
    # grows into what is left (2 more), never taking the rigid job's room
    fleet_ = fleet(cluster("a", node("a0", 8)))
    job = elastic("job", 2, 8, priority=5)
    rigid = workload("rigid", ("worker", 4, pod(1, 1)))
    decision = solve([job, rigid], fleet_)
    assert {p.workload.name for p in decision.placements} == {"job", "rigid"}
    assert workers(decision, "job") == 4
    assert verify(decision, [job, rigid], fleet_) == []


def test_higher_priority_elastic_job_grows_first() -> None:
    fleet_ = fleet(cluster("a", node("a0", 8)))
    low = elastic("low", 1, 8, priority=1)
    high = elastic("high", 1, 8, priority=9)
    decision = solve([low, high], fleet_)
    assert (workers(decision, "high"), workers(decision, "low")) == (7, 1)


def test_fair_share_grows_within_the_queues_limit() -> None:
    the_queues = queues(queue_doc("team", nvidia_com__gpu={"quota": 2, "limit": 5}))
    fleet_ = fleet(cluster("a", node("a0", 8), node("a1", 8)))
    job = elastic("job", 2, 12, labels={"placer.dev/queue": "team"})
    fair = solve_fair([job], fleet_, the_queues)
    assert workers(fair.decision, "job") == 5
    assert fair.usage.used("team", "nvidia.com/gpu") == 5
    assert verify(fair.decision, [job], fleet_) == []


def test_verifier_refuses_counts_out_of_range_and_gaps() -> None:
    fleet_ = fleet(cluster("a", node("a0", 8)))
    job = elastic("job", 2, 4)
    decision = solve([job], fleet_)
    assert workers(decision, "job") == 4
    placement = decision.placements[0]
    fewer = [p for p in placement.pods if not (p.component == "worker" and p.index >= 1)]
    below = replace(decision, placements=(replace(placement, pods=tuple(fewer)),))
    assert "pod ('worker', '', 1) has no node" in " ".join(verify(below, [job], fleet_))
    gap = [p for p in placement.pods if not (p.component == "worker" and p.index == 2)]
    holed = replace(decision, placements=(replace(placement, pods=tuple(gap)),))
    assert "pod ('worker', '', 2) has no node" in " ".join(verify(holed, [job], fleet_))
    extra = replace(placement.pods[-1], index=4)
    above = replace(decision, placements=(replace(placement, pods=(*placement.pods, extra)),))
    assert "unexpected pod ('worker', '', 4)" in " ".join(verify(above, [job], fleet_))


def test_bounds_cover_the_extra_pods() -> None:
    # 16 free GPUs, elastic demand 2..24: every bound is at least the 16 placed
    fleet_ = fleet(cluster("a", node("a0", 8), node("a1", 8)))
    job = elastic("job", 2, 24)
    decision = solve([job], fleet_)
    assert workers(decision, "job") == 16
    bound = decision.summary.bound
    assert {k: v for k, v in bound.items() if v < 16} == {}
    assert bound["capacity_gpu"] == 16


def test_bounds_cap_the_extra_pods_by_one_allowed_cluster() -> None:
    # two clusters of 16 free GPUs, elastic demand 2..24: the job goes to one cluster, so it
    # places at most 16 (the fleet's 32 free and the 24 asked do not bound it)
    fleet_ = fleet(
        cluster("a", node("a0", 8), node("a1", 8)), cluster("b", node("b0", 8), node("b1", 8))
    )
    job = elastic("job", 2, 24)
    decision = solve([job], fleet_)
    assert workers(decision, "job") == 16
    bound = decision.summary.bound
    assert bound["tightest_gpu"] == 16
    assert {k: v for k, v in bound.items() if v < 16} == {}


def test_bounds_cap_the_extra_pods_by_the_copies_the_nodes_hold() -> None:
    # one node of 8 GPUs holds two 3-GPU workers (6 GPUs), not the 8 free
    fleet_ = fleet(cluster("a", node("a0", 8)))
    job = elastic("job", 1, 5, gpus=3)
    decision = solve([job], fleet_)
    assert workers(decision, "job") == 2
    assert decision.summary.bound["tightest_gpu"] == 6


def test_rigid_components_are_untouched() -> None:
    fleet_ = fleet(cluster("a", node("a0", 8)))
    rigid = workload("rigid", ("worker", 3, pod(1, 1)))
    decision = solve([rigid], fleet_)
    assert workers(decision, "rigid") == 3
    assert ComponentDemand("w", "", 3, pod(1)).elastic is False


def test_a_running_grown_workload_counts_its_placed_size_in_its_queue() -> None:
    the_queues = queues(queue_doc("team", nvidia_com__gpu={"quota": 2, "limit": 5}))
    fleet_ = fleet(cluster("a", node("a0", 8), node("a1", 8)))
    labels = {"placer.dev/queue": "team"}
    running = elastic("running", 2, 12, labels=labels)
    grown = {"cpu": 6000, "memory": 6 * 2**30, "nvidia.com/gpu": 5}  # launcher + 5 workers
    newcomer = workload("new", ("worker", 1, pod(1, 1)), labels=labels)
    fair = solve_fair([newcomer], fleet_, the_queues, running=[Running(running, "a", grown)])
    assert fair.decision.placements == ()
    assert "limit" in " ".join(fair.decision.unplaced[0].reasons.values())
    # counted at its minimum (2 GPUs), the same newcomer would fit under the limit
    fair = solve_fair([newcomer], fleet_, the_queues, running=[Running(running, "a")])
    assert [p.workload.name for p in fair.decision.placements] == ["new"]


@pytest.mark.parametrize("solver", SOLVERS)
def test_moves_to_an_equally_preferred_cluster_where_it_grows_more(solver: str) -> None:
    # pack puts work on the fuller cluster "a" (2 GPUs free); "b" has 8 free: the job takes b
    fleet_ = fleet(
        cluster("a", node("a0", 8, 6), node("a1", 8, 8)),
        cluster("b", node("b0", 8), node("b1", 8, 8)),
    )
    job = elastic("job", 2, 16)
    decision = solve([job], fleet_, solver=solver)
    assert (decision.placements[0].cluster, workers(decision, "job")) == ("b", 8)
    assert verify(decision, [job], fleet_) == []


def test_a_preferred_cluster_is_not_traded_for_more_replicas() -> None:
    fleet_ = fleet(
        cluster("a", node("a0", 8, 6), node("a1", 8, 8)),
        cluster("b", node("b0", 8), node("b1", 8, 8)),
    )
    job = elastic("job", 2, 16)
    policy = PlacementPolicy(name="on-prem-first", preferred_clusters=("a", "b"))
    decision = solve([job], fleet_, policies=[policy])
    assert (decision.placements[0].cluster, workers(decision, "job")) == ("a", 2)
