"""Issue 4's acceptance cases on hand-made fleets where the right answer is known.

Every decision goes through the ``decide`` fixture, which runs the independent verifier.
"""

from __future__ import annotations

import gc
from dataclasses import replace
from typing import Any

import pytest

from placer.model import Taint, Toleration
from placer.policy import PlacementPolicy
from placer.solver import SOLVERS
from placer.solver.decide import MODES


def test_8_gpu_pod_goes_where_one_node_has_8_free(kit: Any, decide: Any) -> None:
    split = kit.cluster("split", kit.node("a0", used=4), kit.node("a1", used=4))
    whole = kit.cluster("whole", kit.node("b0", used=0))
    job = kit.workload("train", ("worker", 1, kit.pod(gpus=8)))
    decision = decide([job], kit.fleet(split, whole))
    assert kit.where(decision) == {"train": "whole"}
    assert decision.placements[0].pods[0].node == "b0"


def test_8_gpu_pod_refused_when_8_free_gpus_sit_on_two_nodes(kit: Any, decide: Any) -> None:
    split = kit.cluster("split", kit.node("a0", used=4), kit.node("a1", used=4))
    job = kit.workload("train", ("worker", 1, kit.pod(gpus=8)))
    for solver in SOLVERS:
        decision = decide([job], kit.fleet(split), solver=solver)
        assert decision.placements == ()
        text = kit.reasons(decision, "train")["split"]
        assert 'for a pod of component "worker" (needs 8, largest free block 4)' in text
        assert decision.summary.bound["cluster_lp_gpu"] == 8.0
        assert decision.summary.bound["node_lp_gpu"] == 0.0


def test_batch_places_everything_where_online_strands_the_big_gang(kit: Any, decide: Any) -> None:
    # fill-and-spill prefers "big"; arriving first, the small job takes it one at a time
    big = kit.cluster("big", kit.node("b0"))
    small = kit.cluster("small", kit.node("s0", gpus=4))
    policy = PlacementPolicy(name="fill", preferred_clusters=("big", "small"))
    jobs = [
        kit.workload("small-job", ("worker", 1, kit.pod(gpus=4))),
        kit.workload("big-job", ("worker", 1, kit.pod(gpus=8))),
    ]
    the_fleet = kit.fleet(big, small)
    online = decide(jobs, the_fleet, policies=[policy], mode="online")
    assert kit.where(online) == {"small-job": "big"}
    assert "capacity taken by workloads placed before it" in kit.reasons(online, "big-job")["big"]
    batch = decide(jobs, the_fleet, policies=[policy], mode="batch")
    assert kit.where(batch) == {"small-job": "small", "big-job": "big"}
    assert batch.summary.status == "optimal"


def test_priority_is_never_inverted(kit: Any, decide: Any) -> None:
    # the low-priority gang is worth more GPUs, but priorities are lexicographic
    the_fleet = kit.fleet(kit.cluster("only", kit.node("n0")))
    low = kit.workload("low", ("worker", 2, kit.pod(gpus=4)), priority=0)
    high = kit.workload("high", ("worker", 1, kit.pod(gpus=2)), priority=10)
    for solver in SOLVERS:
        decision = decide([low, high], the_fleet, solver=solver)
        assert kit.where(decision) == {"high": "only"}, solver
        if solver == "cpsat":
            assert kit.reasons(decision, "low")["only"].startswith(
                "displaced by higher-priority workloads (JobSet/default/high)"
            )


def test_each_priority_level_gets_what_it_would_get_alone(kit: Any, decide: Any) -> None:
    nodes = [kit.node(f"n{i}", used=i % 5) for i in range(6)]
    the_fleet = kit.fleet(kit.cluster("a", *nodes[:3]), kit.cluster("b", *nodes[3:]))
    jobs = [
        kit.workload(f"j{i}", ("w", 1 + i % 3, kit.pod(gpus=1 + (i * 3) % 8)), priority=i % 3)
        for i in range(12)
    ]
    everything = decide(jobs, the_fleet)
    for level in (2, 1):
        top = [j for j in jobs if j.priority >= level]
        alone = decide(top, the_fleet)
        placed_all = {n for n in kit.where(everything) if int(n[1:]) % 3 >= level}
        assert placed_all == set(kit.where(alone))


def test_pins_and_cluster_selectors_are_honoured(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(
        kit.cluster("east", kit.node("e0"), labels={"region": "us-east"}),
        kit.cluster("west", kit.node("w0"), labels={"region": "us-west"}),
    )
    pinned = kit.workload("pinned", ("w", 1, kit.pod(gpus=1)), pinned_cluster="west")
    free = kit.workload("free", ("w", 1, kit.pod(gpus=1)), namespace="team-a")
    from placer.policy import NAME_LABEL, LabelSelector

    policy = PlacementPolicy(
        name="east-only",
        namespace_selector=LabelSelector(match_labels={NAME_LABEL: "team-a"}),
        cluster_selector=LabelSelector(match_labels={"region": "us-east"}),
    )
    decision = decide([pinned, free], the_fleet, policies=[policy])
    assert kit.where(decision) == {"pinned": "west", "free": "east"}


def test_contradictory_pin_and_selector_is_refused_with_the_reason(kit: Any, decide: Any) -> None:
    from placer.policy import LabelSelector

    the_fleet = kit.fleet(
        kit.cluster("east", kit.node("e0"), labels={"region": "us-east"}),
        kit.cluster("west", kit.node("w0"), labels={"region": "us-west"}),
    )
    job = kit.workload("job", ("w", 1, kit.pod(gpus=1)), pinned_cluster="west")
    policy = PlacementPolicy(
        name="east-only", cluster_selector=LabelSelector(match_labels={"region": "us-east"})
    )
    decision = decide([job], the_fleet, policies=[policy])
    assert decision.placements == ()
    why = kit.reasons(decision, "job")
    assert "pinned here by placer.dev/cluster, but policy east-only excludes" in why["west"]
    assert why["east"] == "the workload is pinned to cluster west (placer.dev/cluster)"


def test_taints_need_tolerations_and_gpu_models_need_matching_nodes(kit: Any, decide: Any) -> None:
    taint = Taint(key="dedicated", value="training", effect="NoSchedule")
    h100 = {"nvidia.com/gpu.product": "H100"}
    the_fleet = kit.fleet(
        kit.cluster("tainted", kit.node("t0", labels=h100, taints=[taint])),
        kit.cluster("a100", kit.node("a0", labels={"nvidia.com/gpu.product": "A100"})),
    )
    wants_h100 = kit.pod(gpus=4, selector=h100)
    plain = kit.workload("plain", ("w", 1, wants_h100))
    decision = decide([plain], the_fleet)
    assert decision.placements == ()
    why = kit.reasons(decision, "plain")
    assert why["tainted"] == (
        'taint dedicated=training:NoSchedule not tolerated by component "w" (on all 1 nodes)'
    )
    assert why["a100"] == (
        'node selector nvidia.com/gpu.product=H100 of component "w" matches no node'
    )
    tolerating = replace(wants_h100, tolerations=(Toleration(key="dedicated", operator="Exists"),))
    ok = kit.workload("ok", ("w", 1, tolerating))
    assert kit.where(decide([ok], the_fleet)) == {"ok": "tainted"}


@pytest.mark.parametrize("mode", MODES)
def test_identical_input_and_seed_give_identical_decisions(
    kit: Any, decide: Any, mode: str
) -> None:
    nodes = [kit.node(f"n{i}", used=(i * 3) % 8) for i in range(12)]
    the_fleet = kit.fleet(*(kit.cluster(f"c{i}", *nodes[i * 3 : i * 3 + 3]) for i in range(4)))
    jobs = [
        kit.workload(f"j{i}", ("w", 1 + i % 4, kit.pod(gpus=1 + (i * 5) % 8, cpu=1 + i % 7)))
        for i in range(40)
    ]
    # a generous limit: every search step is bounded by work (CP-SAT's deterministic time,
    # fixed sweep counts); the wall-clock limit is only a safety net, never reached here
    first = decide(jobs, the_fleet, mode=mode, seed=7, time_limit=30)
    second = decide(jobs, the_fleet, mode=mode, seed=7, time_limit=30)
    assert first.summary.seconds < 10
    assert first.placements == second.placements
    assert first.unplaced == second.unplaced
    assert replace(first.summary, seconds=0) == replace(second.summary, seconds=0)


def test_a_group_lands_in_one_cluster_or_not_at_all(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(
        kit.cluster("a", kit.node("a0", used=4)), kit.cluster("b", kit.node("b0", used=2))
    )
    first = kit.workload("first", ("w", 1, kit.pod(gpus=4)), group="g")
    second = kit.workload("second", ("w", 1, kit.pod(gpus=2)), group="g")
    decision = decide([first, second], the_fleet)
    assert kit.where(decision) == {"first": "b", "second": "b"}
    too_big = kit.workload("third", ("w", 1, kit.pod(gpus=4)), group="g")
    refused = decide([first, second, too_big], the_fleet)
    assert refused.placements == ()
    assert kit.reasons(refused, "third")["b"].startswith("group g (3 workload(s)): ")


def test_gpu_value_outweighs_many_cpu_pods(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(kit.cluster("c", kit.node("n0", cpu=64)))
    gang = kit.workload("gang", ("w", 1, kit.pod(gpus=8, cpu=40)))
    cpu_pods = [kit.workload(f"cpu{i}", ("w", 1, kit.pod(cpu=8))) for i in range(8)]
    decision = decide([*cpu_pods, gang], the_fleet)
    assert "gang" in kit.where(decision)
    assert len(decision.placements) == 4  # the gang plus the three cpu pods that still fit


def test_a_decision_leaves_the_garbage_collector_as_it_found_it(kit: Any, decide: Any) -> None:
    # paused during a decision (its pauses would land anywhere in the time limit), restored
    # after, also when the caller had it off
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0")))
    jobs = [kit.workload("j", ("w", 1, kit.pod(gpus=1)))]
    before = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            decide(jobs, the_fleet)
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if before else gc.disable)()


def test_one_workload_goes_to_the_best_ranked_cluster_where_it_fits_at_once(
    kit: Any, decide: Any
) -> None:
    # the fuller cluster comes first by preference but has no room: greedy's answer (the
    # next cluster) is the decision's, proven so without the LPs or the search
    full = kit.cluster("full", kit.node("f0", used=6), kit.node("f1", used=8))
    empty = kit.cluster("empty", kit.node("e0"))
    job = kit.workload("train", ("worker", 1, kit.pod(gpus=4)))
    decision = decide([job], kit.fleet(full, empty))
    assert kit.where(decision) == {"train": "empty"}
    assert decision.summary.status == "optimal"
    assert decision.summary.bound["class_lp_gpu"] == 4.0  # the placed GPUs: no LP solved
