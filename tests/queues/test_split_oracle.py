"""The split oracle of bench_fairshare (:mod:`simulations.split_oracle`): the two readings of the
over-quota split, and the best split one decision could reach on hand-built fleets whose answer
is known."""

from __future__ import annotations

from placer.model import LABEL_QUEUE, Workload
from simulations.split_oracle import Moment, best_split, split_gap
from tests.builders.fleets import cluster, fleet, node, pod, workload
from tests.queues.conftest import gpu_job

QUOTA = {"a": 0, "b": 0}
WEIGHT = {"a": 1, "b": 1}


def test_a_queue_held_at_its_quota_with_work_waiting_counts_in_the_demand_reading() -> None:
    held = {"a": 8, "b": 0}
    waiting = {"a": 4, "b": 8}
    gangs = {"a": 1, "b": 2}
    # asking: only a is over its quota and waits -> fewer than two queues, not a moment
    assert split_gap("asking", held, waiting, gangs, QUOTA, WEIGHT) is None
    # demand: a asks 12, b 8 over quota; the 8 in use split 4 / 4 -> a is 4 of 8 GPUs off
    assert split_gap("demand", held, waiting, gangs, QUOTA, WEIGHT) == 50.0
    # both over and waiting: 6 and 2 against 4 and 4
    assert split_gap("asking", {"a": 6, "b": 2}, waiting, gangs, QUOTA, WEIGHT) == 25.0
    # demand capped: b asks 2 only (and has them), so a's 6 of 8 is its share
    assert split_gap("demand", {"a": 6, "b": 2}, {"a": 4, "b": 0}, gangs, QUOTA, WEIGHT) == 0.0
    # ... and b's 2 waiting: of the 6 in use, b is owed 2, a 4
    gap = split_gap("demand", {"a": 6, "b": 0}, {"a": 4, "b": 2}, gangs, QUOTA, WEIGHT)
    assert gap is not None and round(gap, 2) == 33.33


def oracle(
    gangs: list[Workload], started: list[int], gpus_free: int, reading: str = "demand"
) -> tuple[float | None, float | None, float | None]:
    """The oracle on one decision over ``gangs`` (queue from their label, all waiting) on one
    node of ``gpus_free`` GPUs, against a contender that started ``started``."""
    moment = Moment(
        0.0, fleet(cluster("c0", node("n0", gpus=gpus_free))), {}, tuple(range(len(gangs)))
    )
    queue_of = [g.labels[LABEL_QUEUE] for g in gangs]
    held = {q: sum(gangs[i].gpus for i in started if queue_of[i] == q) for q in QUOTA}
    waiting = {
        q: sum(g.gpus for i, g in enumerate(gangs) if queue_of[i] == q and i not in started)
        for q in QUOTA
    }
    count = {
        q: sum(1 for i in range(len(gangs)) if queue_of[i] == q and i not in started) for q in QUOTA
    }
    result = best_split(
        moment,
        gangs,
        queue_of,
        QUOTA,
        WEIGHT,
        held,
        waiting,
        count,
        reading=reading,
        evict=False,
        time_limit=5.0,
    )
    return result.contender_pp, result.lower_pp, result.upper_pp


def test_the_oracle_finds_the_split_a_decision_missed() -> None:
    # 8 free GPUs, two 4-GPU gangs in each queue: starting a's two leaves b with nothing
    gangs = [gpu_job("a1", "a", 1, 4), gpu_job("a2", "a", 1, 4)]
    gangs += [gpu_job("b1", "b", 1, 4), gpu_job("b2", "b", 1, 4)]
    contender, lower, upper = oracle(gangs, [0, 1], 8)
    assert contender == 50.0
    assert lower == 0.0 and upper == 0.0  # one gang each: 4 / 4, and it packs


def test_the_oracle_proves_a_gap_whole_gangs_force() -> None:
    # 8 free GPUs, a's one gang of 8 and b's of 4: a decision that keeps the 8 GPUs busy
    # can only start a's, 8 / 0 against 4 / 4 — no decision does better than 50 pp
    gangs = [gpu_job("a1", "a", 1, 8), gpu_job("b1", "b", 1, 4)]
    contender, lower, upper = oracle(gangs, [0], 8)
    assert contender == 50.0
    assert lower == 50.0 and upper == 50.0


def test_the_bound_counts_cores_as_well_as_gpus() -> None:
    # 8 GPUs and 64 cores: a's 4-GPU gangs are two 2-GPU pods of 1 core, b's one pod asks
    # 4 GPUs and all 64 cores: b's gang starts next to nothing, so starting a's two (8 GPUs
    # busy) is the best a decision keeping the GPUs busy can do
    gangs = [gpu_job("a1", "a", 2, 2), gpu_job("a2", "a", 2, 2)]
    gangs.append(workload("b1", ("w", 1, pod(gpus=4, cpu=64)), labels={LABEL_QUEUE: "b"}))
    contender, lower, upper = oracle(gangs, [0, 1], 8)
    assert contender == 50.0
    assert lower == 50.0 and upper == 50.0


def test_with_evictions_the_oracle_rebalances_within_the_surplus() -> None:
    # a holds the whole 8-GPU node over its quota (two 4-GPU gangs), b waits with two; the
    # contender starts nothing (8 / 0). Evicting one of a's for one of b's: 4 / 4
    from placer.solver import charge, solve

    gangs = [gpu_job("a1", "a", 1, 4), gpu_job("a2", "a", 1, 4)]
    gangs += [gpu_job("b1", "b", 1, 4), gpu_job("b2", "b", 1, 4)]
    empty = fleet(cluster("c0", node("n0", gpus=8)))
    placed = solve(gangs[:2], empty, solver="first-fit").placements
    assert len(placed) == 2
    moment = Moment(0.0, charge(empty, placed), dict(enumerate(placed)), (2, 3))
    queue_of = ["a", "a", "b", "b"]
    args = (moment, gangs, queue_of, QUOTA, WEIGHT, {"a": 8, "b": 0}, {"a": 0, "b": 8})
    kept = best_split(*args, {"a": 0, "b": 2}, reading="demand", evict=False, time_limit=5.0)
    assert (kept.contender_pp, kept.lower_pp, kept.upper_pp) == (50.0, 50.0, 50.0)
    moved = best_split(*args, {"a": 0, "b": 2}, reading="demand", evict=True, time_limit=5.0)
    assert (moved.lower_pp, moved.upper_pp) == (0.0, 0.0)
    assert len(moved.evicted) == 1 and len(moved.started) == 1
