"""The fair-share decision: limits hard, priorities never inverted, in quota before over quota,
over-quota capacity by weight, cluster limits and hierarchy — with CP-SAT and every baseline."""

from __future__ import annotations

import random
from typing import Any

import pytest

from placer.quantity import GPU
from placer.solver import SOLVERS
from placer.solver.fairshare import IN_QUOTA, OVER_QUOTA, Running
from tests.queues.conftest import gpu_job, queue_doc, queues
from tests.solver.conftest import cluster, fleet, node


def gpus_of(result: Any, queue: str) -> int:
    return int(result.usage.used(queue, GPU))


def placed(result: Any) -> set[str]:
    return {p.workload.name for p in result.decision.placements}


def reasons_of(result: Any, name: str) -> dict[str, str]:
    return dict(next(u.reasons for u in result.decision.unplaced if u.workload.name == name))


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_limit_is_never_exceeded_and_named(solver: str, decide_fair: Any) -> None:
    the_queues = queues(queue_doc("team-a", nvidia_com__gpu={"quota": 8, "limit": 16}))
    jobs = [gpu_job(f"a{i}", "team-a", 4, 2) for i in range(3)]
    the_fleet = fleet(cluster("c0", *(node(f"n{i}") for i in range(6))))
    result = decide_fair(jobs, the_fleet, the_queues, solver=solver, time_limit=0.5)
    assert placed(result) == {"a0", "a1"}
    assert gpus_of(result, "team-a") == 16
    for text in reasons_of(result, "a2").values():
        assert "queue team-a is at its limit for nvidia.com/gpu" in text
        assert "16 in use + 8 requested > limit 16" in text


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "karmada"])
def test_a_parent_limit_bounds_its_children(solver: str, decide_fair: Any) -> None:
    the_queues = queues(
        queue_doc("dept", nvidia_com__gpu={"quota": 8, "limit": 12}),
        queue_doc("x", parent="dept", nvidia_com__gpu={"quota": 4, "limit": 12}),
        queue_doc("y", parent="dept", nvidia_com__gpu={"quota": 4, "limit": 12}),
    )
    jobs = [gpu_job(f"{q}{i}", q, 1, 4) for i in range(3) for q in ("x", "y")]
    the_fleet = fleet(cluster("c0", *(node(f"n{i}") for i in range(6))))
    result = decide_fair(jobs, the_fleet, the_queues, solver=solver, time_limit=0.5)
    assert gpus_of(result, "dept") == 12
    refused = [u for u in result.decision.unplaced]
    assert refused and all(
        "queue dept is at its limit" in t for u in refused for t in u.reasons.values()
    )


@pytest.mark.parametrize("solver", SOLVERS)
def test_in_quota_work_goes_before_over_quota_work(solver: str, decide_fair: Any) -> None:
    # 16 GPUs; team-a (nothing deserved) arrives first with 32 GPUs of work, team-b has
    # quota 8 and asks 8: team-b gets its 8, team-a the rest
    the_queues = queues(
        queue_doc("team-a", nvidia_com__gpu={"quota": 0}),
        queue_doc("team-b", nvidia_com__gpu={"quota": 8}),
    )
    jobs = [gpu_job(f"a{i}", "team-a", 1, 4) for i in range(8)]
    jobs += [gpu_job(f"b{i}", "team-b", 1, 4) for i in range(2)]
    the_fleet = fleet(cluster("c0", node("n0"), node("n1")))
    result = decide_fair(jobs, the_fleet, the_queues, solver=solver, time_limit=0.5)
    assert gpus_of(result, "team-b") == 8
    assert gpus_of(result, "team-a") == 8
    assert {
        result.tiers[j.ref] for j in jobs if j.ref in result.tiers and j.ref.name[0] == "b"
    } == {IN_QUOTA}
    text = reasons_of(result, "a7")["c0"]
    assert "over the quota of queue team-a" in text


def test_over_quota_by_a_parent_names_the_parent(decide_fair: Any) -> None:
    """x is within its own quota (4 of 4) but its department is at its quota (y runs 8 of
    dept's 8): x's job that cannot fit says the department's quota, not x's."""
    the_queues = queues(
        queue_doc("dept", nvidia_com__gpu={"quota": 8}),
        queue_doc("x", parent="dept", nvidia_com__gpu={"quota": 4}),
        queue_doc("y", parent="dept", nvidia_com__gpu={"quota": 4}),
    )
    running = [Running(gpu_job("y-old", "y", 1, 8), "c0")]
    the_fleet = fleet(cluster("c0", node("n0", used=8), node("n1", used=6)))
    result = decide_fair([gpu_job("x0", "x", 1, 4)], the_fleet, the_queues, running=running)
    text = reasons_of(result, "x0")["c0"]
    assert text.startswith(
        "over the quota of queue dept for nvidia.com/gpu: 8 in use + 4 requested > quota 8: "
    ), text


@pytest.mark.parametrize("solver", SOLVERS)
def test_priorities_are_never_inverted(solver: str, decide_fair: Any) -> None:
    # one 8-GPU node: the low-priority in-quota job of team-a arrives first, the high-priority
    # over-quota job of team-b second; the higher priority wins
    the_queues = queues(
        queue_doc("team-a", nvidia_com__gpu={"quota": 8}),
        queue_doc("team-b", nvidia_com__gpu={"quota": 0}),
    )
    jobs = [gpu_job("low", "team-a", 1, 8, priority=0), gpu_job("high", "team-b", 1, 8, priority=5)]
    the_fleet = fleet(cluster("c0", node("n0")))
    result = decide_fair(jobs, the_fleet, the_queues, solver=solver, time_limit=0.5)
    assert placed(result) == {"high"}
    assert result.tiers[jobs[1].ref] == OVER_QUOTA


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "best-fit"])
def test_over_quota_capacity_is_divided_by_weight(solver: str, decide_fair: Any) -> None:
    the_queues = queues(
        queue_doc("light", nvidia_com__gpu={"quota": 0, "overQuotaWeight": 1}),
        queue_doc("heavy", nvidia_com__gpu={"quota": 0, "overQuotaWeight": 3}),
    )
    jobs = [gpu_job(f"l{i}", "light", 1, 1) for i in range(40)]
    jobs += [gpu_job(f"h{i}", "heavy", 1, 1) for i in range(40)]
    the_fleet = fleet(cluster("c0", *(node(f"n{i}") for i in range(5))))
    result = decide_fair(jobs, the_fleet, the_queues, solver=solver, time_limit=1.0)
    assert (gpus_of(result, "light"), gpus_of(result, "heavy")) == (10, 30)


def test_weight_zero_keeps_a_queue_within_its_quota(decide_fair: Any) -> None:
    the_queues = queues(queue_doc("q", nvidia_com__gpu={"quota": 4, "overQuotaWeight": 0}))
    jobs = [gpu_job(f"j{i}", "q", 1, 4) for i in range(2)]
    result = decide_fair(jobs, fleet(cluster("c0", node("n0"))), the_queues)
    assert placed(result) == {"j0"}
    assert "overQuotaWeight is 0" in reasons_of(result, "j1")["c0"]


def test_cluster_limits_cap_a_queue_per_cluster(decide_fair: Any) -> None:
    the_queues = queues(
        queue_doc("q", nvidia_com__gpu={"quota": 32, "clusterLimits": {"east": 8}}),
    )
    jobs = [gpu_job(f"j{i}", "q", 1, 4) for i in range(4)]
    # east is fuller, so packing prefers it; the cap sends half the work west
    the_fleet = fleet(
        cluster("east", node("e0"), node("e1"), node("e2", used=4)),
        cluster("west", node("w0"), node("w1")),
    )
    result = decide_fair(jobs, the_fleet, the_queues)
    clusters = [p.cluster for p in result.decision.placements]
    assert len(clusters) == 4 and clusters.count("east") == 2


def test_running_work_counts_toward_its_queue(decide_fair: Any) -> None:
    the_queues = queues(queue_doc("q", nvidia_com__gpu={"quota": 8, "limit": 8}))
    running = [Running(gpu_job("old", "q", 1, 8), "c0")]
    result = decide_fair(
        [gpu_job("new", "q", 1, 4)],
        fleet(cluster("c0", node("n0", used=8), node("n1"))),
        the_queues,
        running=running,
    )
    assert placed(result) == set()
    assert "8 in use + 4 requested > limit 8" in reasons_of(result, "new")["c0"]


def test_unknown_queue_and_priority_class_are_refusals_not_guesses(decide_fair: Any) -> None:
    the_queues = queues(
        queue_doc("q"),
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: hi}\nvalue: 100\n",
    )
    jobs = [
        gpu_job("typo", "qq", 1, 1),
        gpu_job("classless", "q", 1, 1, priority_class="missing"),
        gpu_job("classy", "q", 1, 8, priority_class="hi"),
        gpu_job("plain", "q", 1, 8),
    ]
    result = decide_fair(jobs, fleet(cluster("c0", node("n0"))), the_queues)
    assert (
        "queue qq (label placer.dev/queue) is not defined in queues.yaml"
        in reasons_of(result, "typo")["c0"]
    )
    assert (
        "priority class missing (priorityClassName) is not defined"
        in reasons_of(result, "classless")["c0"]
    )
    # the class's priority 100 beats the plain job (priority 0) to the one node
    assert placed(result) == {"classy"}
    assert [m.priority for m in result.memberships] == [0, 0, 100, 0]


def test_a_group_is_placed_whole_across_its_queues(decide_fair: Any) -> None:
    the_queues = queues(
        queue_doc("x", nvidia_com__gpu={"quota": 8, "limit": 8}),
        queue_doc("y", nvidia_com__gpu={"quota": 8, "limit": 8}),
    )
    jobs = [
        gpu_job("g1", "x", 1, 4, group="g"),
        gpu_job("g2", "y", 1, 12, group="g"),  # passes y's limit: the whole group waits
    ]
    result = decide_fair(jobs, fleet(cluster("c0", node("n0"), node("n1"))), the_queues)
    assert placed(result) == set()
    assert "queue y is at its limit" in reasons_of(result, "g1")["c0"]


@pytest.mark.parametrize("seed", range(6))
def test_random_fleets_never_pass_a_limit_and_verify(seed: int, decide_fair: Any) -> None:
    rng = random.Random(seed)
    docs = [queue_doc("dept", nvidia_com__gpu={"quota": 24, "limit": rng.choice([24, 40])})]
    names = ["q0", "q1", "q2"]
    for name in names:
        docs.append(
            queue_doc(
                name,
                parent="dept",
                nvidia_com__gpu={
                    "quota": 8,
                    "limit": rng.choice([8, 16, 24]),
                    "overQuotaWeight": rng.choice([0, 1, 2]),
                    "clusterLimits": {"c1": rng.choice([4, 8, 16])},
                },
            )
        )
    the_queues = queues(*docs)
    jobs = [
        gpu_job(
            f"j{i}",
            rng.choice([*names, None]),
            rng.choice([1, 2]),
            rng.choice([1, 2, 4]),
            priority=rng.choice([0, 0, 5]),
        )
        for i in range(30)
    ]
    the_fleet = fleet(
        cluster("c0", *(node(f"a{i}", used=rng.choice([0, 2])) for i in range(4))),
        cluster("c1", *(node(f"b{i}") for i in range(3))),
    )
    solver = rng.choice(SOLVERS)
    result = decide_fair(jobs, the_fleet, the_queues, solver=solver, time_limit=0.5)
    # every workload is either placed or explained on every cluster
    assert len(result.decision.placements) + len(result.decision.unplaced) == len(jobs)
    for item in result.decision.unplaced:
        assert set(item.reasons) == {"c0", "c1"}
