"""bench_fairshare's yardsticks: KAI's fair share by water-filling, and the victim-minimality
check against an exhaustive search (small versions; the benchmark itself runs for minutes)."""

from __future__ import annotations

from simulations.bench_fairshare import fair_shares, victim_minimality


def test_fair_share_divides_what_is_left_by_weight_capped_by_demand() -> None:
    # 12 GPUs, quotas 3 and 1, weights 1 and 7, both asking for everything: 3 + 1 deserved,
    # the 8 left split 1:7 -> 4 and 8
    sizes = [("d1", 3, 1), ("d2", 1, 7)]
    assert fair_shares(12, {"d1": 100, "d2": 100}, sizes) == {"d1": 4.0, "d2": 8.0}
    # d2 asks for 2 only: it gets 2, d1 the rest
    assert fair_shares(12, {"d1": 100, "d2": 2}, sizes) == {"d1": 10.0, "d2": 2.0}
    # nobody asks: nothing
    assert fair_shares(12, {}, sizes) == {"d1": 0.0, "d2": 0.0}


def test_victims_are_never_more_than_the_fewest_gpus_that_pack() -> None:
    result = victim_minimality(cases=5, seed=3)
    assert result["cases"] == 5
    assert result["worst_ratio_to_fewest_gpus"] == 1.0
