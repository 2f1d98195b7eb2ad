"""Reservations with backfill, the pure module: expected run times, planning the earliest start,
the backfill rule as the solver sees it, and when a reservation goes stale."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from placer.model import Fleet, Placement, PodAssignment, Workload
from placer.solver import charge, solve
from placer.solver.reservations import (
    ANNOTATION_EXPECTED_RUNTIME,
    TAINT_HORIZON,
    TAINT_RESERVED,
    Reservation,
    ReservationPolicy,
    RunningWork,
    backfill_view,
    expected_runtime,
    expired,
    horizon_cluster,
    horizon_view,
    may_backfill,
    parse_runtime,
    plan,
    qualifies,
    stale,
)
from tests.builders import fleets as b


def _job(name: str, nodes: int, **kwargs: Any) -> Workload:
    """``nodes`` pods of 8 GPUs: one whole 8-GPU node each."""
    return b.workload(name, ("worker", nodes, b.pod(gpus=8, cpu=8)), **kwargs)


def _running(fleet: Fleet, cluster: str, node: str, name: str, end: float | None) -> RunningWork:
    """One 8-GPU pod of ``name`` on ``node``."""
    pod = PodAssignment("worker", "", 0, node, requests=dict(b.pod(gpus=8, cpu=8).requests))
    placement = Placement(_job(name, 1).ref, cluster, (pod,), dict(pod.requests))
    return RunningWork(placement, end)


def _fleet(*sizes: int) -> Fleet:
    return b.fleet(
        *(
            b.cluster(f"c{i}", *(b.node(f"c{i}-n{k}") for k in range(n)))
            for i, n in enumerate(sizes)
        )
    )


def _busy(fleet: Fleet, work: list[RunningWork]) -> Fleet:
    return charge(fleet, [w.placement for w in work])


# --------------------------------------------------------------------------------------------
# expected run times


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3600", 3600), ("90s", 90), ("5m", 300), ("2h", 7200), ("1h30m", 5400), ("1d", 86400)],
)
def test_runtimes_parse(text: str, seconds: float) -> None:
    assert parse_runtime(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5m", "0", "1h30", "5 minutes"])
def test_a_bad_runtime_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_runtime(text)


def test_the_annotation_comes_before_active_deadline_seconds() -> None:
    assert expected_runtime({ANNOTATION_EXPECTED_RUNTIME: "2h"}, {"activeDeadlineSeconds": 60}) == (
        7200
    )
    assert expected_runtime({}, {"activeDeadlineSeconds": 600}) == 600
    assert expected_runtime({}, {}) is None
    assert expected_runtime({}) is None


def test_bad_estimates_name_their_field() -> None:
    with pytest.raises(ValueError, match=f"annotation {ANNOTATION_EXPECTED_RUNTIME}"):
        expected_runtime({ANNOTATION_EXPECTED_RUNTIME: "a while"})
    with pytest.raises(ValueError, match=r"spec\.activeDeadlineSeconds"):
        expected_runtime({}, {"activeDeadlineSeconds": "600"})


# --------------------------------------------------------------------------------------------
# who qualifies


def test_a_gang_qualifies_by_wait_priority_and_size() -> None:
    policy = ReservationPolicy(after_s=3600, priority=100, min_gpus=16)
    assert qualifies(_job("big", 4), 3600, policy) == "waited 1.0 h >= 1.0 h"
    assert qualifies(_job("big", 4), 3599, policy) is None
    assert qualifies(_job("vip", 4, priority=100), 0, policy) == "priority 100 >= 100"
    assert qualifies(_job("small", 1), 10 * 3600, policy) is None  # 8 GPUs < 16


def test_a_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="max_reservations"):
        ReservationPolicy(max_reservations=0)
    with pytest.raises(ValueError, match="after_s"):
        ReservationPolicy(after_s=-1)
    for bad in (0.0, -5.0, math.inf):
        with pytest.raises(ValueError, match="horizon_s must be positive"):
            ReservationPolicy(horizon_s=bad)


# --------------------------------------------------------------------------------------------
# planning


def test_the_reservation_is_where_the_gang_starts_earliest() -> None:
    empty = _fleet(4, 4)
    work = [
        _running(empty, "c0", "c0-n0", "a", 100.0),
        _running(empty, "c0", "c0-n1", "b", 50.0),
        _running(empty, "c1", "c1-n0", "c", 300.0),
    ]
    reservation = plan(_job("gang", 4), _busy(empty, work), work, 10.0, reason="test")
    assert reservation is not None
    assert (reservation.cluster, reservation.start_s) == ("c0", 100.0)
    assert reservation.nodes == ("c0-n0", "c0-n1", "c0-n2", "c0-n3")
    assert reservation.planned_s == 10.0


def test_a_gang_that_fits_now_starts_now_on_the_free_nodes() -> None:
    empty = _fleet(4)
    work = [_running(empty, "c0", "c0-n0", "a", 100.0)]
    reservation = plan(_job("gang", 3), _busy(empty, work), work, 10.0, reason="test")
    assert reservation is not None
    assert reservation.start_s == 10.0
    assert "c0-n0" not in reservation.nodes


def test_work_without_an_estimate_never_ends_for_planning() -> None:
    empty = _fleet(2)
    work = [_running(empty, "c0", "c0-n0", "forever", None)]
    assert plan(_job("gang", 2), _busy(empty, work), work, 0.0, reason="test") is None


def test_an_end_in_the_past_counts_as_now() -> None:
    empty = _fleet(2)
    work = [_running(empty, "c0", "c0-n0", "late", 5.0)]
    reservation = plan(_job("gang", 2), _busy(empty, work), work, 50.0, reason="test")
    assert reservation is not None and reservation.start_s == 50.0


def test_a_later_reservation_waits_for_the_earlier_gang_to_be_done() -> None:
    empty = _fleet(2)
    first = Reservation(_job("first", 2).ref, "c0", ("c0-n0", "c0-n1"), 100.0, 0.0, "t", 50.0)
    reservation = plan(_job("second", 2), empty, [], 0.0, reason="test", held=[first])
    assert reservation is not None and reservation.start_s == 150.0
    unknown = Reservation(_job("first", 2).ref, "c0", ("c0-n0", "c0-n1"), 100.0, 0.0, "t")
    assert math.isinf(unknown.end_s)
    assert plan(_job("second", 2), empty, [], 0.0, reason="test", held=[unknown]) is None


# --------------------------------------------------------------------------------------------
# backfill, as the solver sees it


def _held(nodes: tuple[str, ...] = ("c0-n0", "c0-n1"), start: float = 100.0) -> Reservation:
    return Reservation(_job("gang", 2).ref, "c0", nodes, start, 0.0, "test")


def test_only_work_known_to_end_before_the_start_may_backfill() -> None:
    reservation = _held()
    assert may_backfill(60.0, 40.0, reservation)
    assert not may_backfill(61.0, 40.0, reservation)
    assert not may_backfill(None, 0.0, reservation)


def test_the_solver_keeps_work_off_reserved_nodes_unless_it_may_backfill() -> None:
    fleet = _fleet(2)
    reservation = _held()
    short, long, unknown, gang = (
        _job("short", 1),
        _job("long", 1),
        _job("unknown", 1),
        _job("gang", 2),
    )
    view, workloads = backfill_view(
        fleet, [short, long, unknown], [50.0, 500.0, None], [reservation], 10.0
    )
    assert all(TAINT_RESERVED in {t.key for t in n.taints} for n in view.clusters[0].nodes)
    decision = solve(workloads, view, solver="greedy")
    assert [str(p.workload) for p in decision.placements] == [str(short.ref)]
    reasons = {str(u.workload): u.reasons["c0"] for u in decision.unplaced}
    assert f"taint {TAINT_RESERVED}=" in reasons[str(unknown.ref)]
    assert f"taint {TAINT_RESERVED}=" in reasons[str(long.ref)]
    # the reservation's own gang may use its nodes whatever its estimate
    view, workloads = backfill_view(fleet, [gang], [None], [reservation], 10.0)
    assert solve(workloads, view, solver="greedy").placements


def test_a_node_held_by_two_reservations_needs_both_to_allow_it() -> None:
    fleet = _fleet(1)
    early = _held(("c0-n0",), start=100.0)
    late = Reservation(_job("later", 1).ref, "c0", ("c0-n0",), 400.0, 0.0, "test")
    view, workloads = backfill_view(fleet, [_job("w", 1)], [200.0], [early, late], 0.0)
    # the earlier reservation's taint: done before its start is done before the later one's
    assert [t.value for t in view.clusters[0].nodes[0].taints] == [str(early.workload)]
    assert not solve(workloads, view, solver="greedy").placements  # ends after the early start
    view, workloads = backfill_view(fleet, [_job("w", 1)], [90.0], [early, late], 0.0)
    assert solve(workloads, view, solver="greedy").placements
    # the later gang waits for the earlier one there
    view, workloads = backfill_view(fleet, [_job("later", 1)], [None], [early, late], 0.0)
    assert not solve(workloads, view, solver="greedy").placements


def test_a_gang_uses_its_own_nodes_never_those_only_a_later_reservation_holds() -> None:
    """Two reservations start together on one node each (the second planned around the
    first): the first gang may take its node and the one it shares with the second, but not
    the node only the second holds — taking it would make the second gang's start fail."""
    fleet = _fleet(3)
    first = _held(("c0-n0", "c0-n1"), start=100.0)
    second = Reservation(_job("second", 1).ref, "c0", ("c0-n1", "c0-n2"), 400.0, 0.0, "test")
    three = _job("gang", 3)  # expected to run past the second start: it may not backfill
    view, workloads = backfill_view(fleet, [three], [400.0], [first, second], 100.0)
    assert not solve(workloads, view, solver="greedy").placements
    two = _job("gang", 2)
    view, workloads = backfill_view(fleet, [two], [400.0], [first, second], 100.0)
    (placement,) = solve(workloads, view, solver="greedy").placements
    assert {p.node for p in placement.pods} == {"c0-n0", "c0-n1"}


def test_no_reservations_change_nothing() -> None:
    fleet = _fleet(1)
    job = _job("w", 1)
    assert backfill_view(fleet, [job], [None], [], 0.0) == (fleet, [job])


# --------------------------------------------------------------------------------------------
# lifecycle


def test_a_reservation_expires_when_its_start_comes_and_goes() -> None:
    reservation = _held(start=100.0)
    assert expired(reservation, 99.0, 0.0) is None
    assert expired(reservation, 100.0, 0.0) is not None
    assert expired(reservation, 100.0, 30.0) is None


def test_a_reservation_is_stale_when_the_fleet_changes_under_it() -> None:
    reservation = _held()
    fleet = _fleet(2)
    assert stale(reservation, fleet) is None
    shrunk = b.fleet(b.cluster("c0", b.node("c0-n1")))
    assert "c0-n0" in (stale(reservation, shrunk) or "")
    cordoned = b.fleet(b.cluster("c0", b.node("c0-n0", ready=False), b.node("c0-n1")))
    assert stale(reservation, cordoned) is not None
    gone = b.fleet(b.cluster("c1", b.node("c1-n0")))
    assert "left the fleet" in (stale(reservation, gone) or "")
    down = b.fleet(b.cluster("c0", b.node("c0-n0"), b.node("c0-n1"), reachable=False))
    assert "unreachable" in (stale(reservation, down) or "")


# --------------------------------------------------------------------------------------------
# the drain horizon


def test_the_drain_horizon_keeps_the_largest_cluster_unless_one_is_named() -> None:
    fleet = _fleet(2, 3, 3)
    assert horizon_cluster(fleet, ReservationPolicy()) is None  # no horizon, no cluster
    assert horizon_cluster(fleet, ReservationPolicy(horizon_s=60.0)) == "c1"  # first of the most
    named = ReservationPolicy(horizon_s=60.0, horizon_cluster="c0")
    assert horizon_cluster(fleet, named) == "c0"
    assert horizon_cluster(fleet, ReservationPolicy(horizon_s=60.0, horizon_cluster="x")) is None


def test_only_work_expected_to_end_within_the_horizon_enters_its_cluster() -> None:
    fleet = _fleet(2, 1)
    policy = ReservationPolicy(horizon_s=100.0, horizon_cluster="c0", min_gpus=16)
    short, long, unknown = (_job(name, 1) for name in ("short", "long", "unknown"))
    big = _job("big", 2)
    view, workloads = horizon_view(
        fleet, [short, long, unknown, big], [100.0, 101.0, None, 500.0], policy
    )
    assert all(TAINT_HORIZON in {t.key for t in n.taints} for n in view.clusters[0].nodes)
    assert not [t for n in view.clusters[1].nodes for t in n.taints]
    decision = solve(workloads, view, solver="greedy")
    where = {str(p.workload): p.cluster for p in decision.placements}
    assert where[str(short.ref)] == "c0" or where[str(long.ref)] == "c1"
    assert all(where.get(str(w.ref)) != "c0" for w in (long, unknown, big))
    reasons = {str(u.workload): u.reasons["c0"] for u in decision.unplaced}
    # a big gang is held to the rule too: a long one would keep the cluster from draining
    assert f"taint {TAINT_HORIZON}=c0" in reasons[str(big.ref)]
    # without a horizon nothing changes
    same, as_given = horizon_view(fleet, [long], [101.0], ReservationPolicy())
    assert same is fleet and as_given == [long]


def test_a_tolerating_view_keeps_an_elastic_components_range() -> None:
    """The drain horizon's and the reservations' tolerations leave the rest of a component as
    it was: an elastic one keeps its ``max_replicas`` (they dropped it: placed at its minimum)."""
    fleet = _fleet(2, 1)
    base = _job("elastic", 1)
    [component] = base.components
    elastic = replace(base, components=(replace(component, max_replicas=4),))
    policy = ReservationPolicy(horizon_s=100.0, horizon_cluster="c0")
    _, [viewed] = horizon_view(fleet, [elastic], [50.0], policy)
    [kept], [original] = viewed.components, elastic.components
    assert kept.max_replicas == 4 and kept.pod.tolerations
    assert replace(kept, pod=original.pod) == original
