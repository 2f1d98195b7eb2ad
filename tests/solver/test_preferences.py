"""Policy preference terms: ordered clusters (fill and spill), costs, pack and spread."""

from __future__ import annotations

from typing import Any

import pytest

from placer.policy import PlacementPolicy


@pytest.mark.parametrize("mode", ["batch", "online"])
def test_fill_and_spill_follows_the_preferred_order(kit: Any, decide: Any, mode: str) -> None:
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0")), kit.cluster("b", kit.node("b0")))
    policy = PlacementPolicy(name="order", preferred_clusters=("b", "a"))
    jobs = [kit.workload(f"j{i}", ("w", 1, kit.pod(gpus=4))) for i in range(3)]
    decision = decide(jobs, the_fleet, policies=[policy], mode=mode)
    assert kit.where(decision) == {"j0": "b", "j1": "b", "j2": "a"}


def test_cheaper_cluster_first_among_equals(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0")), kit.cluster("b", kit.node("b0")))
    policy = PlacementPolicy(name="cost", cluster_costs={"a": 3.0, "b": 1.0})
    job = kit.workload("job", ("w", 1, kit.pod(gpus=2)))
    assert kit.where(decide([job], the_fleet, policies=[policy])) == {"job": "b"}


def test_pack_fills_the_busier_cluster_and_spread_the_emptier(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(
        kit.cluster("busy", kit.node("b0", used=4)), kit.cluster("idle", kit.node("i0"))
    )
    job = kit.workload("job", ("w", 1, kit.pod(gpus=2)))
    assert kit.where(decide([job], the_fleet)) == {"job": "busy"}
    spread = PlacementPolicy(name="spread", objective="spread")
    assert kit.where(decide([job], the_fleet, policies=[spread])) == {"job": "idle"}


def test_spread_puts_replicas_on_different_nodes(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(kit.cluster("c", *(kit.node(f"n{i}") for i in range(4))))
    job = kit.workload("job", ("w", 4, kit.pod(gpus=1)))
    packed = decide([job], the_fleet)
    assert len({p.node for p in packed.placements[0].pods}) == 1
    spread = PlacementPolicy(name="spread", objective="spread")
    spread_out = decide([job], the_fleet, policies=[spread])
    assert len({p.node for p in spread_out.placements[0].pods}) == 4
