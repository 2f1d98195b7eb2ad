"""Topology-aware node fit: required and preferred levels of a gang (placer.solver.topology).

Every decision goes through ``decide``, so the independent verifier also checks that each
required constraint's pods share one domain.
"""

from __future__ import annotations

from typing import Any

import pytest

from placer.model import Decision, TopologyConstraint
from placer.solver import SOLVERS

RACK = "network.topology.nvidia.com/leaf"
BLOCK = "network.topology.nvidia.com/spine"


def racks(kit: Any, spec: dict[str, list[int]], *, block: str = "b0") -> list[Any]:
    """Nodes of 8 GPUs, ``spec`` = rack -> GPUs used on each of its nodes."""
    return [
        kit.node(f"{rack}-n{i}", 8, used, labels={RACK: rack, BLOCK: block})
        for rack, used_list in spec.items()
        for i, used in enumerate(used_list)
    ]


def gang(kit: Any, name: str, pods: int, gpus: int, **topology: str) -> Any:
    constraint = TopologyConstraint(name="g", members=("worker",), **topology)
    return kit.workload(name, ("worker", pods, kit.pod(gpus=gpus)), topology=(constraint,))


def domains_of(decision: Decision, fleet: Any, level: str = RACK) -> set[str]:
    labels = {n.name: n.labels for c in fleet.clusters for n in c.nodes}
    return {labels[p.node][level] for pl in decision.placements for p in pl.pods}


@pytest.mark.parametrize("solver", SOLVERS)
def test_required_rack_keeps_the_gang_in_one_rack(kit: Any, decide: Any, solver: str) -> None:
    # 16 GPUs free in total over two racks, 8 per rack: the 16-GPU gang has no rack
    the_fleet = kit.fleet(kit.cluster("c", *racks(kit, {"r1": [0, 8], "r2": [0, 8]})))
    job = gang(kit, "big", 2, 8, required=RACK)
    decision = decide([job], the_fleet, solver=solver, time_limit=2.0)
    assert decision.placements == ()
    reason = kit.reasons(decision, "big")["c"]
    assert f"no {RACK} domain with 16 free GPUs" in reason
    assert f"{RACK}=r1" in reason and "8 free GPUs" in reason
    # without the constraint the same gang fits across the racks
    plain = kit.workload("big", ("worker", 2, kit.pod(gpus=8)))
    assert kit.where(decide([plain], the_fleet, solver=solver, time_limit=2.0)) == {"big": "c"}


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "karmada"])
def test_required_rack_picks_the_rack_with_room(kit: Any, decide: Any, solver: str) -> None:
    # r1 has 12 free GPUs on 2 nodes (8 + 4), r2 has 16 on 2 nodes: a 16-GPU gang goes to r2
    the_fleet = kit.fleet(kit.cluster("c", *racks(kit, {"r1": [0, 4], "r2": [0, 0]})))
    job = gang(kit, "g16", 4, 4, required=RACK)
    decision = decide([job], the_fleet, solver=solver, time_limit=2.0)
    assert kit.where(decision) == {"g16": "c"}
    assert domains_of(decision, the_fleet) == {"r2"}


def test_required_rack_takes_the_tightest_rack(kit: Any, decide: Any) -> None:
    # both racks hold the 8-GPU gang; the fuller rack takes it, the empty one stays whole
    the_fleet = kit.fleet(kit.cluster("c", *racks(kit, {"r1": [0, 0], "r2": [0, 4]})))
    small = gang(kit, "small", 2, 4, required=RACK)
    decision = decide([small], the_fleet, solver="greedy")
    assert domains_of(decision, the_fleet) == {"r2"}
    big = gang(kit, "big", 4, 4, required=RACK)
    both = decide([big, small], the_fleet, solver="cpsat", time_limit=2.0)
    assert kit.where(both) == {"big": "c", "small": "c"}


def test_required_level_missing_from_every_node(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(kit.cluster("c", kit.node("n1", 8), kit.node("n2", 8)))
    job = gang(kit, "job", 2, 4, required=RACK)
    decision = decide([job], the_fleet)
    assert decision.placements == ()
    assert f"no usable node has the topology label {RACK}" in kit.reasons(decision, "job")["c"]


def test_preferred_level_packs_into_the_fewest_domains(kit: Any, decide: Any) -> None:
    # 24 GPUs needed; no rack has 24 free; the two roomiest racks hold them
    spec = {"r1": [4, 4], "r2": [0, 0], "r3": [0, 8], "r4": [0, 0]}
    the_fleet = kit.fleet(kit.cluster("c", *racks(kit, spec)))
    job = gang(kit, "job", 6, 4, preferred=RACK)
    decision = decide([job], the_fleet, solver="greedy")
    assert kit.where(decision) == {"job": "c"}
    assert domains_of(decision, the_fleet) == {"r2", "r4"}
    # a gang that fits one rack gets one rack
    one = gang(kit, "one", 2, 4, preferred=RACK)
    assert len(domains_of(decide([one], the_fleet, solver="greedy"), the_fleet)) == 1


def test_required_block_preferred_rack(kit: Any, decide: Any) -> None:
    nodes = racks(kit, {"r1": [0], "r2": [0]}, block="b1") + racks(
        kit, {"r3": [0, 0], "r4": [0]}, block="b2"
    )
    the_fleet = kit.fleet(kit.cluster("c", *nodes))
    job = gang(kit, "job", 3, 8, required=BLOCK, preferred=RACK)
    decision = decide([job], the_fleet, solver="greedy")
    assert domains_of(decision, the_fleet, BLOCK) == {"b2"}
    two = gang(kit, "two", 2, 8, required=BLOCK, preferred=RACK)
    decision = decide([two], the_fleet, solver="greedy")
    assert domains_of(decision, the_fleet) == {"r3"}


def test_constraint_covers_only_its_members(kit: Any, decide: Any) -> None:
    # the launcher (no GPU) may go anywhere; the workers must share a rack (r2: r1 is full)
    the_fleet = kit.fleet(
        kit.cluster("c", *racks(kit, {"r1": [0, 8], "r2": [0, 0]}), kit.node("cpu", 0))
    )
    constraint = TopologyConstraint(name="workers", members=("worker",), required=RACK)
    job = kit.workload(
        "job",
        ("launcher", 1, kit.pod(cpu=2)),
        ("worker", 4, kit.pod(gpus=4)),
        topology=(constraint,),
    )
    decision = decide([job], the_fleet, solver="cpsat", time_limit=2.0)
    (placement,) = decision.placements
    assert sum(p.component == "launcher" for p in placement.pods) == 1
    worker_racks = {p.node.split("-")[0] for p in placement.pods if p.component == "worker"}
    assert worker_racks == {"r2"}


def test_two_clusters_the_one_with_a_rack_wins(kit: Any, decide: Any) -> None:
    # c1 has more free GPUs but spread over racks; c2 has one rack with room (first-fit,
    # best-fit and karmada choose on totals or estimates and do not look further: their rules)
    c1 = kit.cluster("c1", *racks(kit, {"a": [4, 4], "b": [4, 4], "c": [4, 4]}))
    c2 = kit.cluster("c2", *racks(kit, {"d": [0, 0]}))
    job = gang(kit, "job", 4, 4, required=RACK)
    for solver in ("cpsat", "greedy"):
        decision = decide([job], kit.fleet(c1, c2), solver=solver, time_limit=2.0)
        assert kit.where(decision) == {"job": "c2"}, solver


def test_verifier_flags_a_gang_split_over_racks(kit: Any) -> None:
    from placer.solver import solve, verify

    the_fleet = kit.fleet(kit.cluster("c", *racks(kit, {"r1": [0], "r2": [0]})))
    plain = kit.workload("job", ("worker", 2, kit.pod(gpus=8)))
    decision = solve([plain], the_fleet)
    constrained = gang(kit, "job", 2, 8, required=RACK)
    problems = verify(decision, [constrained], the_fleet)
    assert any("span 2 domains" in p and "requires one" in p for p in problems)
