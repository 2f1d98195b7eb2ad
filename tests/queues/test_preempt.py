"""Choosing victims: reclaim over-quota work of other queues, preempt lower priorities in the
queue, protected work never, gangs whole, fewest GPUs then workloads then priority then age —
the least GPUs any eviction that packs needs (checked by brute force on small fleets)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

import pytest

from placer.model import Fleet, Workload
from placer.quantity import MEMORY
from placer.queues import QueueSet, Usage, membership
from placer.solver import charge, release, solve
from placer.solver import packer as packer_module
from placer.solver.preempt import (
    FAIR_SHARE,
    MAX_ROUNDS,
    PREEMPT,
    RECLAIM,
    Victim,
    _realise,
    find_victims,
)
from tests.builders.fleets import GIB, cluster, fleet, node, pod, workload
from tests.queues.conftest import gpu_job, queue_doc, queues


def running(
    jobs: Sequence[Workload], the_fleet: Fleet, the_queues: QueueSet
) -> tuple[Fleet, list[Victim], Usage]:
    """``jobs`` placed on ``the_fleet`` one by one (job i started at time i)."""
    victims = []
    usage = Usage(the_queues)
    for i, job in enumerate(jobs):
        decision = solve([job], the_fleet, solver="first-fit")
        assert decision.placements, job.ref
        placement = decision.placements[0]
        the_fleet = charge(the_fleet, [placement])
        victims.append(Victim(job, placement, started=float(i)))
        usage.add(membership(job, the_queues).queue, job.total_requests(), placement.cluster)
    return the_fleet, victims, usage


TWO_TEAMS = queues(
    queue_doc("team-a", nvidia_com__gpu={"quota": 0}),
    queue_doc("team-b", nvidia_com__gpu={"quota": 8}),
)


def test_in_quota_work_reclaims_over_quota_work_of_another_queue() -> None:
    jobs = [gpu_job("a1", "team-a", 1, 4), gpu_job("a2", "team-a", 1, 4)]
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", node("n0"))), TWO_TEAMS)
    eviction = find_victims(gpu_job("b1", "team-b", 1, 4), the_fleet, victims, TWO_TEAMS, usage)
    assert eviction is not None
    # the youngest of two equal victims goes
    assert [(v.workload.name, v.reason) for v in eviction.victims] == [("a2", RECLAIM)]
    assert eviction.cluster == "c0" and eviction.placement.cluster == "c0"


def test_fewest_gpus_then_fewest_workloads_then_youngest() -> None:
    jobs = [
        gpu_job("small-old", "team-a", 1, 2),
        gpu_job("small-young", "team-a", 1, 2),
        gpu_job("big", "team-a", 1, 4),
    ]
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", node("n0"))), TWO_TEAMS)
    three = find_victims(gpu_job("b3", "team-b", 1, 3), the_fleet, victims, TWO_TEAMS, usage)
    assert three is not None and [v.workload.name for v in three.victims] == ["big"]
    two = find_victims(gpu_job("b2", "team-b", 1, 2), the_fleet, victims, TWO_TEAMS, usage)
    assert two is not None and [v.workload.name for v in two.victims] == ["small-young"]


def test_a_gang_is_evicted_whole() -> None:
    jobs = [gpu_job("gang", "team-a", 4, 2)]  # four pods of 2 GPUs, one workload
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", node("n0"))), TWO_TEAMS)
    eviction = find_victims(gpu_job("b1", "team-b", 1, 2), the_fleet, victims, TWO_TEAMS, usage)
    assert eviction is not None
    assert [(v.workload.name, v.gpu_milli) for v in eviction.victims] == [("gang", 8000)]


def test_protected_in_quota_and_unreclaimable_work_is_never_evicted() -> None:
    protected = gpu_job("keep", "team-a", 1, 8, protected=True)
    the_fleet, victims, usage = running([protected], fleet(cluster("c0", node("n0"))), TWO_TEAMS)
    assert find_victims(gpu_job("b", "team-b", 1, 4), the_fleet, victims, TWO_TEAMS, usage) is None
    # team-a within its quota of 8: nothing to reclaim
    within = queues(
        queue_doc("team-a", nvidia_com__gpu={"quota": 8}),
        queue_doc("team-b", nvidia_com__gpu={"quota": 8}),
    )
    the_fleet, victims, usage = running(
        [gpu_job("a", "team-a", 1, 8)], fleet(cluster("c0", node("n0"))), within
    )
    assert find_victims(gpu_job("b", "team-b", 1, 4), the_fleet, victims, within, usage) is None
    # team-a over its quota but not reclaimable
    closed = queues(
        "apiVersion: placer.dev/v1alpha1\nkind: Queue\nmetadata: {name: team-a}\n"
        "spec: {reclaimable: false, resources: {nvidia.com/gpu: {quota: 0}}}\n",
        queue_doc("team-b", nvidia_com__gpu={"quota": 8}),
    )
    the_fleet, victims, usage = running(
        [gpu_job("a", "team-a", 1, 8)], fleet(cluster("c0", node("n0"))), closed
    )
    assert find_victims(gpu_job("b", "team-b", 1, 4), the_fleet, victims, closed, usage) is None


def test_only_over_quota_resources_are_reclaimed() -> None:
    # team-a deserves 4 and runs 8: at most 4 GPUs of it can be reclaimed
    the_queues = queues(
        queue_doc("team-a", nvidia_com__gpu={"quota": 4}),
        queue_doc("team-b", nvidia_com__gpu={"quota": 8}),
    )
    jobs = [gpu_job("a1", "team-a", 1, 4), gpu_job("a2", "team-a", 1, 4)]
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", node("n0"))), the_queues)
    assert (
        find_victims(gpu_job("b8", "team-b", 1, 8), the_fleet, victims, the_queues, usage) is None
    )
    four = find_victims(gpu_job("b4", "team-b", 1, 4), the_fleet, victims, the_queues, usage)
    assert four is not None and len(four.victims) == 1


def test_over_quota_preemptors_do_not_reclaim_but_preempt_lower_priorities_in_their_queue() -> None:
    jobs = [gpu_job("low", "team-b", 1, 8, priority=0)]
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", node("n0"))), TWO_TEAMS)
    high = gpu_job("high", "team-b", 1, 4, priority=10)
    eviction = find_victims(high, the_fleet, victims, TWO_TEAMS, usage)
    assert eviction is not None and [(v.workload.name, v.reason) for v in eviction.victims] == [
        ("low", PREEMPT)
    ]
    same = gpu_job("same", "team-b", 1, 4, priority=0)
    assert find_victims(same, the_fleet, victims, TWO_TEAMS, usage) is None
    # team-a is over quota (quota 0): it may not reclaim from anyone
    the_fleet, victims, usage = running(
        [gpu_job("a", "team-a", 1, 8)], fleet(cluster("c0", node("n0"))), TWO_TEAMS
    )
    assert find_victims(gpu_job("a2", "team-a", 1, 4), the_fleet, victims, TWO_TEAMS, usage) is None


def test_a_higher_priority_victim_is_never_reclaimed() -> None:
    jobs = [gpu_job("vip", "team-a", 1, 8, priority=9)]
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", node("n0"))), TWO_TEAMS)
    assert find_victims(gpu_job("b", "team-b", 1, 4), the_fleet, victims, TWO_TEAMS, usage) is None


def test_victims_are_the_fewest_gpus_that_pack_by_brute_force() -> None:
    for seed in range(8):
        rng = random.Random(seed)
        jobs = [
            gpu_job(f"a{i}", "team-a", rng.choice([1, 2]), rng.choice([1, 2, 4])) for i in range(7)
        ]
        the_fleet = fleet(cluster("c0", node("n0"), node("n1")), cluster("c1", node("m0")))
        placed_jobs = []
        for job in jobs:  # keep those that fit
            if solve([job], the_fleet, solver="first-fit").placements:
                placed_jobs.append(job)
                the_fleet = charge(
                    the_fleet, solve([job], the_fleet, solver="first-fit").placements
                )
        base = fleet(cluster("c0", node("n0"), node("n1")), cluster("c1", node("m0")))
        charged, victims, usage = running(placed_jobs, base, TWO_TEAMS)
        preemptor = gpu_job("b", "team-b", 1, rng.choice([2, 4, 8]))
        if solve([preemptor], charged, solver="first-fit").placements:
            continue  # fits without evicting anything
        eviction = find_victims(preemptor, charged, victims, TWO_TEAMS, usage)
        least = None
        for size in range(1, len(victims) + 1):
            for subset in itertools.combinations(victims, size):
                clusters = {v.placement.cluster for v in subset}
                if len(clusters) != 1:
                    continue
                name = clusters.pop()
                if _realise(preemptor, charged, name, subset, (), 0) is not None:
                    gpus = sum(v.workload.gpus for v in subset)
                    least = gpus if least is None else min(least, gpus)
        if least is None:
            assert eviction is None
        else:
            assert eviction is not None
            assert eviction.gpu_milli == least * 1000, seed


def test_a_sibling_reclaims_under_a_parent_at_its_quota() -> None:
    # dept deserves 16 and runs 16, all of it y's (8 over y's quota): x's in-quota job takes 8
    # back from its sibling; the parent's use does not change, so its quota is no obstacle
    the_queues = queues(
        queue_doc("dept", nvidia_com__gpu={"quota": 16}),
        queue_doc("x", parent="dept", nvidia_com__gpu={"quota": 8}),
        queue_doc("y", parent="dept", nvidia_com__gpu={"quota": 8}),
    )
    jobs = [gpu_job(f"y{i}", "y", 1, 4) for i in range(4)]
    the_fleet, victims, usage = running(
        jobs, fleet(cluster("c0", node("n0"), node("n1"))), the_queues
    )
    eviction = find_victims(gpu_job("x1", "x", 1, 8), the_fleet, victims, the_queues, usage)
    assert eviction is not None and eviction.gpu_milli == 8000
    assert all(v.reason == RECLAIM for v in eviction.victims)


def test_fair_share_reclaim_evicts_down_to_the_weighted_share_and_never_back() -> None:
    """Both queues over their quota (0), equal weights: team-b, holding nothing, may reclaim
    from team-a's 8 over-quota GPUs only while team-a keeps at least what team-b will hold —
    2 GPUs for a 2-GPU job, never a 6-GPU job (it would leave team-a 2 below team-b's 6) —
    and never without ``fair_share``; the evicted work cannot reclaim it back."""
    even = queues(
        queue_doc("team-a", nvidia_com__gpu={"quota": 0}),
        queue_doc("team-b", nvidia_com__gpu={"quota": 0}),
    )
    jobs = [gpu_job(f"a{i}", "team-a", 1, 2) for i in range(4)]
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", node("n0"))), even)
    small = gpu_job("b-small", "team-b", 1, 2)
    assert find_victims(small, the_fleet, victims, even, usage) is None
    eviction = find_victims(small, the_fleet, victims, even, usage, fair_share=True)
    assert eviction is not None
    assert [(v.workload.name, v.reason) for v in eviction.victims] == [("a3", FAIR_SHARE)]
    big = gpu_job("b-big", "team-b", 1, 6)
    assert find_victims(big, the_fleet, victims, even, usage, fair_share=True) is None
    # after the eviction: team-a 6, team-b 2; a3 back in the queue may not take it back
    kept = [v for v in victims if v.workload.ref.name != "a3"]
    after = charge(release(the_fleet, [victims[3].placement]), [eviction.placement])
    usage.remove("team-a", jobs[3].total_requests(), "c0")
    usage.add("team-b", small.total_requests(), "c0")
    mine = Victim(small, eviction.placement, started=9.0)
    back = find_victims(jobs[3], after, [*kept, mine], even, usage, fair_share=True)
    assert back is None


def cpu_job(name: str, queue: str, gpus: int, cores: int) -> Workload:
    """One pod of ``gpus`` GPUs and ``cores`` cores in ``queue``."""
    return workload(name, ("w", 1, pod(gpus=gpus, cpu=cores)), labels={"placer.dev/queue": queue})


def test_victims_free_every_resource_the_preemptor_asks_on_one_node() -> None:
    """Ten nodes of 8 GPUs and 16 cores, each running a 1-GPU, 1-core job and a 7-GPU,
    14-core job over their queue's quota, 1 core idle on each. A job of 1 GPU and 4 cores
    packs only where the large job goes: evicting a small one frees a GPU but 2 cores. The
    node rows count cores per node (the cluster's 10 idle cores hide it), so the first set
    the model chooses packs (GPU rows alone cut ten 1-GPU sets, more than ``MAX_ROUNDS``)."""
    jobs = []
    for i in range(10):
        jobs += [cpu_job(f"small{i}", "team-a", 1, 1), cpu_job(f"large{i}", "team-a", 7, 14)]
    nodes = [node(f"n{i}", cpu=16) for i in range(10)]
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", *nodes)), TWO_TEAMS)
    assert all(v.placement.pods[0].node == f"n{i // 2}" for i, v in enumerate(victims))
    preemptor = cpu_job("b", "team-b", 1, 4)
    assert len(victims) // 2 > MAX_ROUNDS
    eviction = find_victims(preemptor, the_fleet, victims, TWO_TEAMS, usage)
    assert eviction is not None
    # the youngest large job: the fewest GPUs that pack
    assert [v.workload.name for v in eviction.victims] == ["large9"]
    assert eviction.placement.pods[0].node == "n9"


def test_victims_free_room_only_on_nodes_the_preemptor_may_use() -> None:
    """The preemptor (4 GPUs) selects nodes labelled pool=b. Nine pool-a nodes each run two
    4-GPU jobs, the one pool-b node an 8-GPU job: the model evicts the 8-GPU job at once, not
    the cheaper ones on nodes the preemptor may not use (18 of them, more than MAX_ROUNDS)."""
    nodes = [node(f"n{i}", labels={"pool": "a"}) for i in range(9)]
    nodes.append(node("n9", labels={"pool": "b"}))
    jobs = [gpu_job(f"a{i}", "team-a", 1, 4) for i in range(18)]
    jobs.append(gpu_job("a-big", "team-a", 1, 8))
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", *nodes)), TWO_TEAMS)
    assert victims[-1].placement.pods[0].node == "n9"
    preemptor = workload(
        "b", ("w", 1, pod(gpus=4, selector={"pool": "b"})), labels={"placer.dev/queue": "team-b"}
    )
    eviction = find_victims(preemptor, the_fleet, victims, TWO_TEAMS, usage)
    assert eviction is not None
    assert [v.workload.name for v in eviction.victims] == ["a-big"]


MILLI = queues(
    queue_doc("team-a", **{"placer_dev__gpu-milli": {"quota": 0}}),
    queue_doc("team-b", **{"placer_dev__gpu-milli": {"quota": 1000}}),
)


def share_job(name: str, queue: str, share: int) -> Workload:
    return workload(name, ("w", 1, pod(share=share)), labels={"placer.dev/queue": queue})


def test_a_shared_gpu_preemptor_gets_a_device_freed_not_the_node_total() -> None:
    """Two devices, 100 thousandths of each used by others and 500 by a team-a shared pod:
    800 are free on the node, but no device has the 600 a team-b pod needs. The device rows
    see it: the youngest pod goes (the model without them chose to evict nothing, which did
    not pack, and its cut of the empty set ended the search)."""
    jobs = [share_job("a0", "team-a", 500), share_job("a1", "team-a", 500)]
    the_node = node("n0", gpus=2, devices=(900, 900))
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", the_node)), MILLI)
    assert [v.placement.pods[0].devices for v in victims] == [(0,), (1,)]
    eviction = find_victims(share_job("b", "team-b", 600), the_fleet, victims, MILLI, usage)
    assert eviction is not None
    assert [v.workload.name for v in eviction.victims] == ["a1"]
    assert eviction.placement.pods[0].devices == (1,)


def test_a_set_that_does_not_pack_cuts_its_subsets_not_its_supersets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A packer (stand-in) that needs both 1-GPU jobs gone, or the 4-GPU one: after {a1} and
    {a0} fail, {a0, a1} (2 GPUs) is tried and wins — a cut of every superset of a failed set
    would have left only the 4-GPU job."""
    from placer.solver import preempt

    jobs = [gpu_job("a0", "team-a", 1, 1), gpu_job("a1", "team-a", 1, 1)]
    jobs.append(gpu_job("a2", "team-a", 1, 4))
    jobs.append(gpu_job("filler", "team-b", 1, 2))
    the_fleet, victims, usage = running(jobs, fleet(cluster("c0", node("n0"))), TWO_TEAMS)
    tried: list[set[str]] = []
    real = preempt._realise

    def packer(preemptor: Workload, fleet_: Fleet, name: str, chosen: Sequence[Victim], *a: Any):  # type: ignore[no-untyped-def]
        names = {v.workload.ref.name for v in chosen}
        tried.append(names)
        if {"a0", "a1"} <= names or "a2" in names:
            return real(preemptor, fleet_, name, chosen, *a)
        return None

    monkeypatch.setattr(preempt, "_realise", packer)
    eviction = find_victims(gpu_job("b", "team-b", 1, 1), the_fleet, victims[:3], TWO_TEAMS, usage)
    assert eviction is not None
    assert sorted(v.workload.name for v in eviction.victims) == ["a0", "a1"]
    assert tried == [{"a1"}, {"a0"}, {"a0", "a1"}]


def test_victims_whose_room_the_packer_misses_are_realised_by_the_model_s_node_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gang of two pod shapes (a: 4 cores; b: 32 GiB) on two nodes held by over-quota
    work: only b on n1 (64 GiB) and a on n2 packs. Best fit puts a on n1 first (no GPU
    left over there) and then has no room for b; the packer's joint packing
    (:mod:`placer.solver.jointpack`) finds it, and is switched off here to stand for a miss
    of the packer: the victim model's node rows (``s_{n,k}``) found that packing — it is
    realised from them instead of cutting the set off (no other set packs: the eviction
    was lost)."""
    monkeypatch.setattr(packer_module, "joint_counts", lambda *args: None)
    the_fleet = fleet(
        cluster("c0", node("n1", 1, cpu=4, memory=64), node("n2", 2, cpu=16, memory=8))
    )
    jobs = [gpu_job("a1", "team-a", 1, 1), gpu_job("a2", "team-a", 1, 2)]
    the_fleet, victims, usage = running(jobs, the_fleet, TWO_TEAMS)
    assert [p.node for v in victims for p in v.placement.pods] == ["n1", "n2"]
    gang = workload(
        "gang",
        ("a", 1, pod(gpus=1, cpu=4)),
        ("b", 1, pod(gpus=1, cpu=2, extra={MEMORY: 32 * GIB})),
        labels={"placer.dev/queue": "team-b"},
    )
    freed = release(the_fleet, [v.placement for v in victims])
    assert not solve([gang], freed, solver="greedy").placements  # the packer's miss
    eviction = find_victims(gang, the_fleet, victims, TWO_TEAMS, usage)
    assert eviction is not None
    assert sorted(v.workload.name for v in eviction.victims) == ["a1", "a2"]
    where = {p.component: p.node for p in eviction.placement.pods}
    assert where == {"a": "n2", "b": "n1"}
    # the placement charges cleanly: every pod on a node with room, devices named
    after = charge(freed, [eviction.placement])
    for n in after.cluster("c0").nodes:
        assert all(amount >= 0 for amount in n.free.values()), n.name
    assert all(len(p.devices) == 1 for p in eviction.placement.pods)
