"""Spread: one workload in several clusters (Karmada's replicaScheduling), all copies or none.

Decisions are checked by the verifier on the copies the solver placed (each pinned, every pod on
a node), then folded back to the input's workloads."""

from __future__ import annotations

from typing import Any

import pytest

from placer.model import Decision, Fleet, Workload
from placer.policy import PlacementPolicy, policies_from_yaml
from placer.solver import solve, verify
from placer.solver.spread import divide, expand, fold


def policy(spec: str) -> PlacementPolicy:
    (parsed,) = policies_from_yaml(
        "apiVersion: placer.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\n"
        f"spec:\n{spec}"
    )
    return parsed


def decide(workloads: list[Workload], fleet: Fleet, policies: list[PlacementPolicy]) -> Decision:
    expansion = expand(workloads, fleet, policies)
    decision = solve(expansion.workloads, fleet, policies=policies, time_limit=2.0)
    assert verify(decision, expansion.workloads, fleet, policies=policies) == []
    return fold(decision, expansion)


def shares(decision: Decision) -> dict[str, int]:
    return {p.cluster: len(p.pods) for p in decision.placements}


def deployment(kit: Any, replicas: int = 6, gpus: int = 1, **kwargs: Any) -> Workload:
    workload: Workload = kit.workload(
        "web", ("web", replicas, kit.pod(gpus=gpus)), scalable=("web",), **kwargs
    )
    return workload


def three(kit: Any, free: tuple[int, int, int] = (8, 8, 8)) -> Fleet:
    fleet: Fleet = kit.fleet(
        *(
            kit.cluster(name, kit.node(f"{name}-n", 8, 8 - f), labels={"region": region})
            for name, f, region in zip(("a", "b", "c"), free, ("us", "us", "eu"), strict=True)
        )
    )
    return fleet


WEIGHTED = """  replicaScheduling:
    replicaSchedulingType: Divided
    weightPreference:
      staticWeightList:
      - {targetCluster: {clusterNames: [a]}, weight: 3}
      - {targetCluster: {clusterNames: [b]}, weight: 2}
      - {targetCluster: {clusterNames: [c]}, weight: 1}
"""


def test_six_replicas_divided_three_two_one_by_weight(kit: Any) -> None:
    decision = decide([deployment(kit)], three(kit), [policy(WEIGHTED)])
    assert shares(decision) == {"a": 3, "b": 2, "c": 1}
    assert {p.workload.name for p in decision.placements} == {"web"}
    assert decision.summary.placed == 1 and decision.summary.workloads == 1
    # each copy numbers its own pods from 0
    assert sorted(p.index for p in decision.placements[0].pods) == [0, 1, 2]


def test_dynamic_division_follows_what_fits(kit: Any) -> None:
    spec = (
        "  replicaScheduling:\n    replicaSchedulingType: Divided\n"
        "    weightPreference: {dynamicWeight: AvailableReplicas}\n"
    )
    # 1 GPU free in a, 2 in b, 3 in c: 6 replicas can only go 1/2/3
    decision = decide([deployment(kit)], three(kit, (1, 2, 3)), [policy(spec)])
    assert shares(decision) == {"a": 1, "b": 2, "c": 3}
    # 0 free in a: none there; 2:8 gives b 1.2 and c 4.8, the remainder to c
    decision = decide([deployment(kit)], three(kit, (0, 2, 8)), [policy(spec)])
    assert shares(decision) == {"b": 1, "c": 5}
    # 5 free in all: refused, saying so
    decision = decide([deployment(kit)], three(kit, (1, 2, 2)), [policy(spec)])
    assert decision.placements == ()
    (unplaced,) = decision.unplaced
    assert "cannot divide the 6 replicas" in unplaced.reasons["a"]
    assert "5 fit on the free nodes" in unplaced.reasons["a"]


def test_aggregated_uses_the_fewest_clusters(kit: Any) -> None:
    spec = (
        "  replicaScheduling:\n    replicaSchedulingType: Divided\n"
        "    replicaDivisionPreference: Aggregated\n"
    )
    decision = decide([deployment(kit)], three(kit, (2, 5, 3)), [policy(spec)])
    assert shares(decision) == {"b": 5, "c": 1}


def test_duplicated_to_the_clusters_of_the_selector(kit: Any) -> None:
    spec = (
        "  clusterSelector: {matchLabels: {region: us}}\n"
        "  replicaScheduling: {replicaSchedulingType: Duplicated}\n"
    )
    decision = decide([deployment(kit, replicas=2)], three(kit), [policy(spec)])
    assert shares(decision) == {"a": 2, "b": 2}
    # with maxGroups 1: one copy, in the preferred cluster
    limited = spec + "  spreadConstraints: [{spreadByField: cluster, maxGroups: 1}]\n"
    limited += "  preferredClusters: [b]\n"
    assert shares(decide([deployment(kit, replicas=2)], three(kit), [policy(limited)])) == {"b": 2}


def test_a_copy_that_does_not_fit_unplaces_the_whole_workload(kit: Any) -> None:
    spec = "  replicaScheduling: {replicaSchedulingType: Duplicated}\n"
    # c has 1 GPU free: its copy of 2 replicas does not fit, so none is placed
    decision = decide([deployment(kit, replicas=2)], three(kit, (8, 8, 1)), [policy(spec)])
    assert decision.placements == ()
    (unplaced,) = decision.unplaced
    assert unplaced.reasons["c"].startswith("its copy for this cluster (the whole workload)")
    assert "placed whole or not at all" in unplaced.reasons["a"]
    assert decision.summary.placed == 0


def test_min_and_max_replicas_per_cluster(kit: Any) -> None:
    spec = WEIGHTED + "    maxReplicasPerCluster: 2\n"
    assert shares(decide([deployment(kit)], three(kit), [policy(spec)])) == {
        "a": 2,
        "b": 2,
        "c": 2,
    }
    spec = WEIGHTED + "    minReplicasPerCluster: 2\n"
    assert shares(decide([deployment(kit)], three(kit), [policy(spec)])) == {"a": 4, "b": 2}


def test_only_kinds_with_a_replicas_path_divide(kit: Any) -> None:
    job = kit.workload("job", ("w", 6, kit.pod(gpus=1)))  # no scalable component
    decision = decide([job], three(kit), [policy(WEIGHTED)])
    (unplaced,) = decision.unplaced
    assert "gives no replicas path" in unplaced.reasons["a"]
    assert "replicaSchedulingType: Duplicated" in unplaced.reasons["a"]


def test_workloads_without_spread_are_untouched(kit: Any) -> None:
    other = kit.workload("other", ("w", 1, kit.pod(gpus=1)))
    web = deployment(kit, labels={"tier": "serving"})
    spec = "  resourceSelectors: {labelSelectors: [{matchLabels: {tier: serving}}]}\n" + WEIGHTED
    decision = decide([other, web], three(kit), [policy(spec)])
    names = [p.workload.name for p in decision.placements]
    assert names.count("web") == 3 and names.count("other") == 1
    assert decision.summary.placed == 2


@pytest.mark.parametrize(
    ("total", "weights", "bounds", "expected"),
    [
        (6, [("a", 3), ("b", 2), ("c", 1)], {}, {"a": 3, "b": 2, "c": 1}),
        (7, [("a", 1), ("b", 1), ("c", 1)], {}, {"a": 3, "b": 2, "c": 2}),
        (10, [("a", 1), ("b", 1)], {"maximum": 4}, None),
        (6, [("a", 5), ("b", 1)], {"room": {"a": 3, "b": 9}}, {"a": 3, "b": 3}),
        (5, [("a", 4), ("b", 1)], {"minimum": 2}, {"a": 5}),
        (0, [("a", 1)], {}, {}),
    ],
)
def test_divide(
    total: int, weights: list[tuple[str, int]], bounds: dict[str, Any], expected: Any
) -> None:
    assert divide(total, weights, **bounds) == expected


def test_duplicated_skips_clusters_whose_taints_it_does_not_tolerate(kit: Any) -> None:
    from dataclasses import replace

    from placer.model import Taint

    fleet = three(kit)
    tainted = replace(fleet.clusters[2], taints=(Taint("reserved", "x"),))
    fleet = replace(fleet, clusters=(*fleet.clusters[:2], tainted))
    spec = "  replicaScheduling: {replicaSchedulingType: Duplicated}\n"
    assert shares(decide([deployment(kit, replicas=2)], fleet, [policy(spec)])) == {
        "a": 2,
        "b": 2,
    }


def test_a_cluster_the_workload_moved_away_from_gets_no_copy(kit: Any) -> None:
    """placer.dev/avoid-clusters (the controller moved it off a member where its pods stayed
    unschedulable): the division leaves that cluster out instead of refusing the workload."""
    from dataclasses import replace

    workload = replace(deployment(kit), avoid_clusters=("c",))
    decision = decide([workload], three(kit), [policy(WEIGHTED)])
    assert shares(decision) == {"a": 4, "b": 2}
