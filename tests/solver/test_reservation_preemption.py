"""Preemption for reservations, the pure rules: who may be evicted for a reserved gang, when a
reservation is due, and which victims the victim model picks (the least work thrown away)."""

from __future__ import annotations

import math

import pytest

from placer.model import Fleet, Workload
from placer.solver import charge, solve
from placer.solver.preempt import LABEL_PREEMPTIBLE, RECLAIM, Victim
from placer.solver.reservation_preemption import (
    RESERVATION,
    allowed,
    candidates,
    deadline,
    due,
    force,
)
from placer.solver.reservations import Reservation, ReservationPolicy, backfill_view
from tests.builders import fleets as builders


def _job(name: str, pods: int, priority: int = 0, labels: dict[str, str] | None = None) -> Workload:
    """``pods`` pods of 8 GPUs (a node each)."""
    return builders.workload(
        name, ("w", pods, builders.pod(gpus=8, cpu=4)), priority=priority, labels=labels or {}
    )


def _fleet(nodes: int) -> Fleet:
    return builders.fleet(
        builders.cluster("c0", *(builders.node(f"c0-n{k}", 8) for k in range(nodes)))
    )


def _running(fleet: Fleet, *jobs: tuple[Workload, float]) -> tuple[Fleet, list[Victim]]:
    """``jobs`` (workload, start) placed one by one, first fit: the first on c0-n0..."""
    victims = []
    for job, started in jobs:
        decision = solve([job], fleet, solver="first-fit")
        assert decision.placements, job.ref
        fleet = charge(fleet, decision.placements)
        victims.append(Victim(job, decision.placements[0], started=started))
    return fleet, victims


def _reservation(start: float, nodes: tuple[str, ...] = ("c0-n0",)) -> Reservation:
    return Reservation(
        workload=_job("earlier", 1).ref,
        cluster="c0",
        nodes=nodes,
        start_s=start,
        planned_s=0.0,
        reason="test",
    )


def test_victims_are_lower_priority_or_smaller_never_protected_or_higher() -> None:
    big = _job("big", 2, priority=1)
    _, running = _running(
        _fleet(6),
        (_job("low", 1), 0.0),
        (_job("equal-small", 1, priority=1), 0.0),
        (_job("equal-same", 2, priority=1), 0.0),
        (_job("higher", 1, priority=2), 0.0),
        (_job("protected", 1, labels={LABEL_PREEMPTIBLE: "false"}), 0.0),
    )
    allowed = [v.workload.ref.name for v in candidates(big, running)]
    assert allowed == ["low", "equal-small"]


def test_a_reservation_is_due_after_the_wait_unless_its_start_is_near() -> None:
    far = _reservation(start=10_000.0)
    assert not due(far, arrival_s=0.0, now=99.0, after_s=100.0, slack_s=0.0)
    assert due(far, arrival_s=0.0, now=100.0, after_s=100.0, slack_s=0.0)
    assert deadline(far, 0.0, 100.0, 0.0) == 100.0
    near = _reservation(start=150.0)
    assert not due(near, arrival_s=0.0, now=120.0, after_s=100.0, slack_s=60.0)
    assert deadline(near, 0.0, 100.0, 60.0) == math.inf  # starts within the slack: waited for
    assert due(near, arrival_s=0.0, now=120.0, after_s=100.0, slack_s=0.0)


@pytest.mark.parametrize(
    ("field", "value"), [("preempt_after_s", -1.0), ("preempt_slack_s", math.inf)]
)
def test_the_policy_refuses_bad_preemption_settings(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        ReservationPolicy(**{field: value})


def test_the_least_work_thrown_away_is_evicted_whole() -> None:
    """An old 8-GPU job (1,000 s run) or a young 16-GPU gang (10 s run) could make room: by
    GPUs the old job would go, by work lost the young gang goes — both of its pods."""
    busy, running = _running(_fleet(3), (_job("old", 1), 0.0), (_job("young", 2), 990.0))
    eviction = force(_job("big", 1, priority=1), busy, running, 1000.0)
    assert eviction is not None
    assert [(v.workload.name, v.reason, v.gpu_milli) for v in eviction.victims] == [
        ("young", RESERVATION, 16_000)
    ]
    assert eviction.placement.cluster == "c0"
    assert {p.node for p in eviction.placement.pods} <= {"c0-n1", "c0-n2"}


def test_nothing_is_evicted_when_only_protected_or_higher_work_holds_the_room() -> None:
    busy, running = _running(
        _fleet(2),
        (_job("guarded", 1, labels={LABEL_PREEMPTIBLE: "false"}), 0.0),
        (_job("higher", 1, priority=5), 0.0),
    )
    assert force(_job("big", 1, priority=1), busy, running, 10.0) is None
    # at equal priority a gang as large as the preemptor is never evicted either
    busy, running = _running(_fleet(1), (_job("same", 1, priority=1), 0.0))
    assert force(_job("big", 1, priority=1), busy, running, 10.0) is None


def test_a_forced_gang_never_takes_the_nodes_of_an_earlier_reservation() -> None:
    """Two low jobs run; an earlier reservation holds c0-n0 from t=5,000: the forced gang,
    expected to run past that, evicts the job on c0-n1 and goes there, though the one on
    c0-n0 ran for less time."""
    busy, running = _running(_fleet(2), (_job("a", 1), 9.0), (_job("b", 1), 0.0))
    earlier = _reservation(start=5_000.0, nodes=("c0-n0",))
    big = _job("big", 1, priority=1)
    fleet, (viewed,) = backfill_view(busy, [big], [6_000.0], [earlier], now=10.0)
    eviction = force(viewed, fleet, running, 10.0)
    assert eviction is not None
    assert [v.workload.name for v in eviction.victims] == ["b"]
    assert {p.node for p in eviction.placement.pods} == {"c0-n1"}
    # without the earlier reservation the job that ran least goes
    free = force(big, busy, running, 10.0)
    assert free is not None and [v.workload.name for v in free.victims] == ["a"]


def test_under_queues_a_reservation_never_takes_a_queues_in_quota_work() -> None:
    """With queues, a reserved gang of team-a evicts team-a's smaller work by the reservation
    rule; team-b's work only from team-b's over-quota part, and only while team-a stays within
    its own quota. Evicted either way, the victims say ``reservation``."""
    from placer.queues import Queue, QueueSet, ResourceRule, Usage, queue_set

    gpu = "nvidia.com/gpu"

    def team(name: str, pods: int, queue: str) -> Workload:
        return _job(name, pods, labels={"placer.dev/queue": queue})

    def usage_of(queues: QueueSet, victims: list[Victim]) -> Usage:
        usage = Usage(queues)
        for v in victims:
            usage.add(v.workload.labels["placer.dev/queue"], v.workload.total_requests(), "c0")
        return usage

    def rules(a_quota: int, b_quota: int, reclaimable: bool = True) -> QueueSet:
        return queue_set(
            [
                Queue("team-a", resources={gpu: ResourceRule(quota=a_quota)}),
                Queue(
                    "team-b",
                    resources={gpu: ResourceRule(quota=b_quota)},
                    reclaimable=reclaimable,
                ),
            ]
        )

    gang = team("gang", 2, "team-a")
    fleet, running = _running(
        _fleet(4),
        (team("a-0", 1, "team-a"), 0.0),
        (team("b-0", 1, "team-b"), 0.0),
        (team("b-1", 1, "team-b"), 0.0),
        (team("b-2", 1, "team-b"), 0.0),
    )

    def names(queues: QueueSet) -> list[tuple[str, str]]:
        found = allowed(gang, running, queues, usage_of(queues, running))
        return [(v.workload.ref.name, rule) for v, rule in found]

    # team-b within its quota (24 of 32): only team-a's own work
    assert names(rules(a_quota=32, b_quota=32)) == [("a-0", RESERVATION)]
    # team-b over its quota (24 of 8), team-a within its own (8 + 16 of 32): team-b's too
    assert names(rules(a_quota=32, b_quota=8)) == [
        ("a-0", RESERVATION),
        ("b-0", RECLAIM),
        ("b-1", RECLAIM),
        ("b-2", RECLAIM),
    ]
    # ... but not when team-a would be over its own quota, nor from a queue not reclaimable
    assert names(rules(a_quota=16, b_quota=8)) == [("a-0", RESERVATION)]
    assert names(rules(a_quota=32, b_quota=8, reclaimable=False)) == [("a-0", RESERVATION)]
    # the model takes team-b's over-quota part only: 16 of its 24 GPUs may go, team-a's 8
    # ... so the gang (16) evicts within what the rows allow, and says reservation
    queues = rules(a_quota=32, b_quota=16)
    eviction = force(
        gang,
        fleet,
        running,
        60.0,
        queues=queues,
        usage=usage_of(queues, running),
    )
    assert eviction is not None
    assert {v.reason for v in eviction.victims} == {RESERVATION}
    taken_b = sum(v.gpu_milli for v in eviction.victims if v.workload.name.startswith("b-"))
    assert taken_b <= 8_000 and eviction.gpu_milli == 16_000, eviction.victims


def test_without_queues_a_queue_label_changes_nothing() -> None:
    """The controller's Jobs carry ``placer.dev/queue`` whether or not the hub has Queues: with
    none, the reservation rule alone decides (the label names no queue the model knows)."""
    labels = {"placer.dev/queue": "default"}
    fleet, running = _running(_fleet(2), (_job("small", 1, labels=labels), 0.0))
    gang = _job("gang", 2, labels=labels)
    eviction = force(gang, fleet, running, 60.0)
    assert eviction is not None and [v.workload.name for v in eviction.victims] == ["small"]
