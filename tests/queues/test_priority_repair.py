"""Priority repair (:mod:`placer.solver.priority_repair`): a gang a decision started gives its
room to a waiting gang of a higher priority that fits there — on hand-built fleets with known
answers."""

from __future__ import annotations

from placer.model import Fleet, Placement, Workload
from placer.solver import charge, solve
from placer.solver.priority_repair import repair_priorities
from tests.queues.conftest import gpu_job, queue_doc, queues
from tests.solver.conftest import cluster, fleet, node

QUEUES = queues(
    queue_doc("a", nvidia_com__gpu={"quota": 4}),
    queue_doc("b", nvidia_com__gpu={"quota": 4}),
)


def _start(workload: Workload, on: Fleet) -> tuple[Fleet, Placement]:
    decision = solve([workload], on, time_limit=1.0)
    assert decision.placements, decision.unplaced
    placement = decision.placements[0]
    return charge(on, [placement]), placement


def test_a_started_low_priority_gang_gives_its_room_to_a_waiting_high_priority_one() -> None:
    """c0 (one 8-GPU node) runs ``old`` (4 GPUs, priority 0, started earlier); the decision
    started ``low`` (4 GPUs, priority 0) on the other half while ``high`` (4 GPUs, priority
    10, a reclaim victim of a later step, say) waits. c1, first, has 6 GPUs free in total but
    3 per node: first fit on cluster totals picks it and fails. Known answer: ``high`` runs
    where ``low`` was, ``low`` waits again, ``old`` stays."""
    the_fleet = fleet(
        cluster("c1", node("n1", gpus=8, used=5), node("n2", gpus=8, used=5)),
        cluster("c0", node("n0")),
    )
    old = gpu_job("old", "a", 1, 4)
    low = gpu_job("low", "b", 1, 4)
    high = gpu_job("high", "a", 1, 4, priority=10)
    the_fleet, held = _start(old, the_fleet)
    the_fleet, started = _start(low, the_fleet)
    repair = repair_priorities(
        the_fleet, [(low, started)], [high], queues=QUEUES, running=[(old, held)]
    )
    assert [(p.workload.name, p.cluster) for p in repair.started] == [("high", "c0")]
    assert [ref.name for ref in repair.unstarted] == ["low"]
    free = {n.name: n.free.get("nvidia.com/gpu", 0) for c in repair.fleet.clusters for n in c.nodes}
    assert free == {"n0": 0, "n1": 3, "n2": 3}


def test_a_waiting_gang_that_fits_as_things_stand_starts_without_a_swap() -> None:
    the_fleet = fleet(cluster("c0", node("n0")))
    low = gpu_job("low", "b", 1, 4)
    high = gpu_job("high", "a", 1, 4, priority=10)
    the_fleet, started = _start(low, the_fleet)
    repair = repair_priorities(the_fleet, [(low, started)], [high], queues=QUEUES)
    assert [p.workload.name for p in repair.started] == ["high"]
    assert repair.unstarted == ()


def test_nothing_moves_for_equal_priorities_running_work_or_a_queue_at_its_limit() -> None:
    the_fleet = fleet(cluster("c0", node("n0", gpus=4)))
    low = gpu_job("low", "b", 1, 4)
    the_fleet, started = _start(low, the_fleet)
    # equal priority: the decision's choice stands
    same = gpu_job("same", "a", 1, 4)
    assert repair_priorities(the_fleet, [(low, started)], [same], queues=QUEUES).started == ()
    # work that was running before the decision is never taken back
    high = gpu_job("high", "a", 1, 4, priority=10)
    repair = repair_priorities(the_fleet, [], [high], queues=QUEUES, running=[(low, started)])
    assert repair.started == () and repair.unstarted == ()
    # the higher priority's queue at its limit: limits are hard, before priorities
    limited = queues(
        queue_doc("a", nvidia_com__gpu={"quota": 2, "limit": 2}),
        queue_doc("b", nvidia_com__gpu={"quota": 4}),
    )
    repair = repair_priorities(the_fleet, [(low, started)], [high], queues=limited)
    assert repair.started == () and repair.unstarted == ()
    # nor over the quota of a queue with overQuotaWeight 0
    weightless = queues(
        queue_doc("a", nvidia_com__gpu={"quota": 2, "overQuotaWeight": 0}),
        queue_doc("b", nvidia_com__gpu={"quota": 4}),
    )
    repair = repair_priorities(the_fleet, [(low, started)], [high], queues=weightless)
    assert repair.started == () and repair.unstarted == ()
    # a larger waiting gang that would not fit even on the released room
    big = gpu_job("big", "a", 1, 8, priority=10)
    assert repair_priorities(the_fleet, [(low, started)], [big], queues=QUEUES).started == ()


def test_each_swap_is_seen_by_the_next_waiting_gang() -> None:
    """c0's 8-GPU node holds ``low1`` and ``low2`` (4 GPUs each, priority 0, both started by
    the decision); ``high1``, ``high2`` and ``high3`` (4 GPUs, priority 10) wait, c1 (2 GPUs)
    holds none of them. Known answer: ``high1`` and ``high2`` take the two rooms in turn (a
    fit remembered for c0 before a swap is not reused after it), ``high3`` still waits."""
    the_fleet = fleet(cluster("c1", node("n1", gpus=2)), cluster("c0", node("n0")))
    low1, low2 = gpu_job("low1", "b", 1, 4), gpu_job("low2", "b", 1, 4)
    highs = [gpu_job(f"high{k}", "a", 1, 4, priority=10) for k in (1, 2, 3)]
    the_fleet, first = _start(low1, the_fleet)
    the_fleet, second = _start(low2, the_fleet)
    repair = repair_priorities(the_fleet, [(low1, first), (low2, second)], highs)
    assert [(p.workload.name, p.cluster) for p in repair.started] == [
        ("high1", "c0"),
        ("high2", "c0"),
    ]
    assert sorted(ref.name for ref in repair.unstarted) == ["low1", "low2"]
    free = {n.name: n.free.get("nvidia.com/gpu", 0) for c in repair.fleet.clusters for n in c.nodes}
    assert free == {"n0": 0, "n1": 2}
