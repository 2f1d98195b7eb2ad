"""The verifier catches broken decisions (so that its silence in other tests means something)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from placer.model import PodAssignment
from placer.solver import solve, verify


def test_the_verifier_reports_each_kind_of_violation(kit: Any) -> None:
    the_fleet = kit.fleet(
        kit.cluster("a", kit.node("a0", gpus=8, used=4), kit.node("a1", gpus=8)),
        kit.cluster("b", kit.node("b0", gpus=8)),
    )
    job = kit.workload("job", ("worker", 2, kit.pod(gpus=4)))
    other = kit.workload("other", ("w", 1, kit.pod(gpus=1)), pinned_cluster="b", group="g")
    friend = kit.workload("friend", ("w", 1, kit.pod(gpus=1)), group="g")
    workloads = [job, other, friend]
    good = solve(workloads, the_fleet)
    assert verify(good, workloads, the_fleet) == []
    placement = next(p for p in good.placements if p.workload.name == "job")
    crowded = tuple(
        replace(p, node="a0", devices=()) for p in placement.pods
    )  # both 4-GPU pods on a0, which has 4 free
    bad = replace(
        good,
        placements=tuple(
            replace(p, pods=crowded, cluster="a") if p.workload.name == "job" else p
            for p in good.placements
        ),
    )
    problems = verify(bad, workloads, the_fleet)
    assert any("over-committed" in p or "not idle" in p or "idle on a0" in p for p in problems)
    missing = replace(
        good,
        placements=tuple(
            replace(p, pods=p.pods[:1]) if p.workload.name == "job" else p for p in good.placements
        ),
    )
    assert any("has no node" in p for p in verify(missing, workloads, the_fleet))
    moved = replace(
        good,
        placements=tuple(
            replace(p, cluster="a", pods=tuple(replace(q, node="a1") for q in p.pods))
            if p.workload.name == "other"
            else p
            for p in good.placements
        ),
    )
    problems = verify(moved, workloads, the_fleet)
    assert any("pinned to b" in p for p in problems)
    assert any(p.startswith("group g: members split") for p in problems)
    unknown_node = replace(
        good,
        placements=tuple(
            replace(p, pods=(PodAssignment("w", "", 0, "nowhere"),))
            if p.workload.name == "friend"
            else p
            for p in good.placements
        ),
    )
    assert any(
        "node nowhere is not in the cluster" in p
        for p in verify(unknown_node, workloads, the_fleet)
    )
    dropped = replace(good, placements=good.placements[1:])
    assert any("neither placed nor unplaced" in p for p in verify(dropped, workloads, the_fleet))
