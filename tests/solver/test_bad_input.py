"""Bad input gets a clear outcome (an Unplaced with the reason, or a ValueError), never a crash."""

from __future__ import annotations

from typing import Any

import pytest

from placer.model import Cluster, Fleet
from placer.policy import LabelSelector, PlacementPolicy
from placer.solver import SOLVERS, solve


def test_empty_fleet_leaves_everything_unplaced_with_a_reason(kit: Any, decide: Any) -> None:
    job = kit.workload("job", ("w", 1, kit.pod(gpus=1)))
    for solver in SOLVERS:
        decision = decide([job], Fleet(clusters=()), solver=solver)
        assert decision.placements == ()
        assert kit.reasons(decision, "job") == {"(fleet)": "the fleet has no clusters"}
        assert decision.summary.status == "trivial"


def test_no_workloads_is_a_trivial_decision(kit: Any, decide: Any) -> None:
    decision = decide([], kit.fleet(kit.cluster("c", kit.node("n0"))))
    assert decision.summary.status == "trivial"
    assert (decision.placements, decision.unplaced) == ((), ())


def test_a_workload_without_pods_is_refused_everywhere(kit: Any, decide: Any) -> None:
    empty = kit.workload("empty", ("w", 0, kit.pod(gpus=1)))
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0")), kit.cluster("b", kit.node("b0")))
    decision = decide([empty], the_fleet)
    assert set(kit.reasons(decision, "empty").values()) == {
        "has no pods to place (every component has 0 replicas)"
    }


def test_a_resource_no_node_has_is_named(kit: Any, decide: Any) -> None:
    fpga = kit.workload("fpga", ("w", 1, kit.pod(extra={"example.com/fpga": 1})))
    decision = decide([fpga], kit.fleet(kit.cluster("a", kit.node("a0"))))
    assert kit.reasons(decision, "fpga")["a"] == (
        'no node has example.com/fpga (component "w" needs 1)'
    )


def test_a_policy_matching_no_cluster_excludes_them_all(kit: Any, decide: Any) -> None:
    nowhere = PlacementPolicy(
        name="nowhere", cluster_selector=LabelSelector(match_labels={"region": "mars"})
    )
    job = kit.workload("job", ("w", 1, kit.pod(gpus=1)))
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0")), kit.cluster("b", kit.node("b0")))
    decision = decide([job], the_fleet, policies=[nowhere])
    assert kit.reasons(decision, "job") == {
        "a": "excluded by policy nowhere's cluster selector (region=mars)",
        "b": "excluded by policy nowhere's cluster selector (region=mars)",
    }


def test_pin_to_an_unknown_cluster_and_unreachable_clusters(kit: Any, decide: Any) -> None:
    down = Cluster(name="down", reachable=False, reason="connection refused")
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0")), down)
    pinned = kit.workload("pinned", ("w", 1, kit.pod(gpus=1)), pinned_cluster="nope")
    huge = kit.workload("huge", ("w", 4, kit.pod(gpus=8)))
    decision = decide([pinned, huge], the_fleet)
    assert kit.reasons(decision, "pinned")["a"].startswith(
        "pinned by placer.dev/cluster to nope, which is not in the fleet"
    )
    why = kit.reasons(decision, "huge")
    assert why["down"] == "cluster unreachable: connection refused"
    assert why["a"] == "total free GPUs too low (needs 32, 8 free)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"solver": "magic"}, "unknown solver 'magic'"),
        ({"mode": "sometimes"}, "unknown mode 'sometimes'"),
        ({"time_limit": 0}, "the time limit must be positive"),
    ],
)
def test_bad_arguments_are_value_errors(kit: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        solve([], kit.fleet(), **options)
