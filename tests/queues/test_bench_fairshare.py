"""bench_fairshare's yardsticks: KAI's fair share by water-filling, and the victim-minimality
check against an exhaustive search (small versions; the benchmark itself runs for minutes)."""

from __future__ import annotations

from collections.abc import Sequence

from placer.model import Fleet
from placer.simulate import Settings
from placer.simulate.engine import Run
from placer.solver import charge, solve
from placer.traces.workloads import TimedWorkload
from simulations.bench_fairshare import (
    fair_shares,
    measures,
    owed_at_decisions,
    spans_of,
    victim_minimality,
)
from simulations.split_oracle import Moment
from tests.queues.conftest import gpu_job


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


def stream(
    starts: dict[int, float], evictions: Sequence[tuple[int, float, float]], gangs: int = 2
) -> Run:
    """A stream's record: gang ``i`` started at ``starts[i]`` (and never left), and each
    eviction (gang, started, evicted at) — decisions every 60 s up to 180 s."""
    from placer.simulate.engine import Outcome, PreemptionRecord, Sample

    fleet = Fleet(())
    outcomes = tuple(
        Outcome(cluster="c0" if i in starts else None, start_s=starts.get(i)) for i in range(gangs)
    )
    return Run(
        settings=Settings(),
        outcomes=outcomes,
        decisions=(),
        timeline=tuple(Sample(float(t), 0, 0, 0, 0) for t in (0, 60, 120, 180)),
        before=fleet,
        after=fleet,
        loaded=fleet,
        pending=(),
        wall_s=0.0,
        preemptions=tuple(
            PreemptionRecord(end, 1, "c0", ((i, "reclaim"),), (start,), 8000, 0.0)
            for i, start, end in evictions
        ),
    )


def test_a_queue_owed_at_a_decision_must_be_paid_by_that_decision() -> None:
    """Queue a (quota 4) waits for a 4-GPU gang from t=60 while b (quota 0) runs 8 GPUs over
    its quota: reclaimed at t=60, a is paid at that decision; reclaimed a decision late, the
    moment at t=60 is missed (the old reading, owed after a decision and paid at the next,
    saw no miss at all)."""
    items = [
        TimedWorkload(gpu_job("b0", "b", 1, 8), 0.0),
        TimedWorkload(gpu_job("a1", "a", 1, 4), 60.0),
    ]
    sizes = [("a", 4, 1), ("b", 0, 1)]
    at_once = stream({1: 60.0}, [(0, 0.0, 60.0)])
    paid = owed_at_decisions(at_once, items, sizes, 8, spans_of(at_once, 240.0))
    assert (paid["owed_all_moments"], paid["owed_all_paid_pct"]) == (1, 100.0)
    assert paid["owed_missed"] == []
    late = stream({1: 120.0}, [(0, 0.0, 120.0)])
    missed = owed_at_decisions(late, items, sizes, 8, spans_of(late, 240.0))
    assert (missed["owed_all_moments"], missed["owed_all_paid_pct"]) == (2, 50.0)
    assert [(m["time_s"], m["queue"], m["owed_gangs_gpus"]) for m in missed["owed_missed"]] == [
        (60.0, "a", [4])
    ]
    assert missed["owed_short_moments"] == 2  # no GPU idle: reclaim was needed both times
    old = measures(late, items, sizes, 8, 60.0, False)
    assert (old["reclaim_events"], old["reclaim_within_interval_pct"]) == (1, 100.0)


def test_a_gang_no_cluster_can_hold_is_never_owed() -> None:
    """Queue a (quota 8) also waits for a 4-GPU gang no cluster can hold: only the gang that
    can run is owed, and paid."""
    items = [
        TimedWorkload(gpu_job("b0", "b", 1, 8), 0.0),
        TimedWorkload(gpu_job("a-odd", "a", 1, 4), 60.0),
        TimedWorkload(gpu_job("a1", "a", 1, 4), 60.0),
    ]
    sizes = [("a", 8, 1), ("b", 0, 1)]
    run = stream({2: 60.0}, [(0, 0.0, 60.0)], gangs=3)
    spans = spans_of(run, 240.0)
    counted = owed_at_decisions(run, items, sizes, 8, spans)
    assert (counted["owed_all_moments"], counted["owed_all_paid_pct"]) == (1, 0.0)
    excluded = owed_at_decisions(run, items, sizes, 8, spans, frozenset({1}))
    assert (excluded["owed_all_moments"], excluded["owed_all_paid_pct"]) == (1, 100.0)


def test_a_suspected_inversion_is_checked_node_by_node() -> None:
    """One node of 8 GPUs and 8 cores; x (4 GPUs, 6 cores) runs all along; s (1 GPU, 1 core)
    starts at t=60 while two priority-10 gangs of 1 GPU wait. With s released the node has 4
    GPUs and 2 cores free: the 2-core gang fits (a real inversion), the 4-core one does not (a
    false alarm of the GPU-count check)."""
    from placer.simulate.engine import Outcome, Sample
    from simulations.bench_fairshare import confirm_inversions
    from simulations.split_oracle import Moment
    from tests.solver.conftest import cluster, fleet, node, pod, workload

    empty = fleet(cluster("c0", node("n0", 8, cpu=8)))
    x = workload("x", ("w", 1, pod(gpus=4, cpu=6)))
    s = workload("s", ("w", 1, pod(gpus=1, cpu=1)))
    small = workload("small", ("w", 1, pod(gpus=1, cpu=2)), priority=10)
    wide = workload("wide", ("w", 1, pod(gpus=1, cpu=4)), priority=10)
    placed = solve([x, s], empty).placements
    assert len(placed) == 2
    with_x = charge(empty, placed[:1])
    both = charge(empty, placed)
    items = [TimedWorkload(w, 0.0) for w in (x, s, small, wide)]
    outcomes = (
        Outcome("c0", start_s=0.0, placement=placed[0]),
        Outcome("c0", start_s=60.0, placement=placed[1]),
        Outcome(None),
        Outcome(None),
    )
    run = Run(
        settings=Settings(),
        outcomes=outcomes,
        decisions=(),
        timeline=tuple(Sample(float(t), 0, 0, 0, 0) for t in (60, 120)),
        before=empty,
        after=both,
        loaded=both,
        pending=(),
        wall_s=0.0,
    )
    moments = [
        Moment(60.0, with_x, {0: placed[0]}, (1, 2, 3)),
        Moment(120.0, both, {0: placed[0], 1: placed[1]}, (2, 3)),
    ]
    flagged = [
        {"time_s": 60.0, "started_index": 1, "waiting_index": 2},
        {"time_s": 60.0, "started_index": 1, "waiting_index": 3},
        {"time_s": 120.0, "started_index": 1, "waiting_index": 3},
    ]
    confirm_inversions(run, moments, items, flagged)
    assert [f["fits"] for f in flagged] == [True, False, None]


def test_across_seeds_gives_mean_least_and_most() -> None:
    from simulations.bench_fairshare import across_seeds

    rows = {
        1: {"p": {"asking": 10.0, "preemptions": 4, "demand": None}},
        2: {"p": {"asking": 14.0, "preemptions": 8, "demand": None}},
    }
    out = across_seeds(rows)
    assert out["p"]["asking"] == {"mean": 12.0, "min": 10.0, "max": 14.0, "runs": 2}
    assert out["p"]["preemptions"] == {"mean": 6.0, "min": 4, "max": 8, "runs": 2}
    assert out["p"]["demand"] is None


def test_a_queue_s_higher_priority_gang_takes_its_quota_first() -> None:
    """Queue a (quota 6) waits for a0 (4 GPUs, priority 0) and then a1 (3 GPUs, priority 10)
    while b (quota 0) runs 8 GPUs: the decision at t=60 reclaims for a1 (priorities rank above
    in-quota work in issue #14) and a holds 3. Owed in priority order — a1 first, then a0 no
    longer fits the quota — that is all a was owed: paid. In arrival order (the *asked*
    reading) a was owed a0's 4 GPUs: missed."""
    items = [
        TimedWorkload(gpu_job("b0", "b", 1, 8), 0.0),
        TimedWorkload(gpu_job("a0", "a", 1, 4), 0.0),
        TimedWorkload(gpu_job("a1", "a", 1, 3, priority=10), 60.0),
    ]
    sizes = [("a", 6, 1), ("b", 0, 1)]
    run = stream({0: 0.0, 2: 60.0}, [(0, 0.0, 60.0)], gangs=3)
    paid = owed_at_decisions(run, items, sizes, 8, spans_of(run, 240.0))
    assert (paid["owed_all_moments"], paid["owed_all_paid_pct"]) == (1, 100.0)
    assert (paid["owed_asked_moments"], paid["owed_asked_paid_pct"]) == (1, 0.0)


def _held_room(cores_of_c0: int) -> tuple[Run, list[TimedWorkload], list[Moment]]:
    """One node of 8 GPUs and 8 cores from t=0: b0 (queue b, quota 0: 4 GPUs and 2 cores,
    over quota) and c0 (queue c, quota 4: no GPU, ``cores_of_c0`` cores, in quota) run; a1
    (queue a, quota 4: 4 GPUs and 4 cores) waits from t=60 and never starts."""
    from placer.simulate.engine import Outcome, Sample
    from tests.solver.conftest import cluster, fleet, node, pod, workload

    empty = fleet(cluster("c0", node("n0", 8, cpu=8)))
    b0 = workload("b0", ("w", 1, pod(gpus=4, cpu=2)), labels={"placer.dev/queue": "b"})
    c0 = workload("c0", ("w", 1, pod(cpu=cores_of_c0)), labels={"placer.dev/queue": "c"})
    a1 = workload("a1", ("w", 1, pod(gpus=4, cpu=4)), labels={"placer.dev/queue": "a"})
    placed = solve([b0, c0], empty).placements
    assert len(placed) == 2
    items = [TimedWorkload(b0, 0.0), TimedWorkload(c0, 0.0), TimedWorkload(a1, 60.0)]
    run = Run(
        settings=Settings(),
        outcomes=(
            Outcome("c0", start_s=0.0, placement=placed[0]),
            Outcome("c0", start_s=0.0, placement=placed[1]),
            Outcome(None),
        ),
        decisions=(),
        timeline=tuple(Sample(float(t), 0, 0, 0, 0) for t in (0, 60, 120)),
        before=empty,
        after=empty,
        loaded=empty,
        pending=(),
        wall_s=0.0,
    )
    loaded = charge(empty, placed)
    moments = [Moment(float(t), loaded, dict(enumerate(placed)), (2,)) for t in (60, 120)]
    return run, items, moments


def test_a_gang_whose_room_in_quota_work_holds_is_not_owed_but_counted_apart() -> None:
    """a is owed a1 while b is 4 GPUs over its quota, and 4 GPUs are idle — but c's in-quota
    work holds the cores: evicting b0 leaves 4 cores free, all a1 needs, with c0 on 4 cores
    (reachable: two missed moments), 3 with c0 on 5 cores (no decision could start a1:
    counted apart as unreachable, not as misses). The asked reading misses both."""
    sizes = [("a", 4, 1), ("b", 0, 1), ("c", 4, 1)]
    for cores, unreachable, missed in ((4, 0, 2), (5, 2, 0)):
        run, items, moments = _held_room(cores)
        spans = spans_of(run, 180.0)
        result = owed_at_decisions(run, items, sizes, 8, spans, moments=moments)
        assert result["owed_unreachable_moments"] == unreachable, cores
        assert (result["owed_all_moments"], len(result["owed_missed"])) == (missed, missed)
        assert [m["reachable_gpus"] for m in result["owed_missed"]] == [4] * missed
        assert (result["owed_asked_moments"], result["owed_asked_paid_pct"]) == (2, 0.0)
        # without the decisions' inputs nothing is capped: the asked moments, in order
        plain = owed_at_decisions(run, items, sizes, 8, spans)
        assert (plain["owed_all_moments"], plain["owed_unreachable_moments"]) == (2, 0)
