"""Issue 14 in the controller: no priority inversion from a cycle's own evictions.

A cycle decides (priorities first), then evicts for what stayed pending. A reclaim may evict
work of a higher priority than work the same cycle placed (of a priority no higher than its
preemptor's, but the cycle placed lower priorities beside it); without a repair the victims
wait while the lower priority runs on room they fit.
The cycle plans its evictions before it dispatches and closes its decision in priority order
(:func:`placer.solver.priority_repair.repair_priorities`): a workload it placed that holds room
a victim of a higher priority fits is not dispatched, and waits until the victims are decided.

One member (``m1``: 12 nodes of 8 GPUs) over real HTTPS, as in ``test_queues.py``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from placer.controller.repair import close_decision
from placer.model import Unplaced
from placer.solver import solve
from tests.controller.conftest import HubFleet
from tests.controller.test_queues import flood, hub_job, one_member, queue, serve_queues
from tests.queues.conftest import gpu_job, queue_doc, queues
from tests.solver.conftest import cluster, fleet, node

PRIORITY = "placer.dev/priority"
REPAIR_QUEUES = queues(queue_doc("b", nvidia_com__gpu={"quota": 8}))


def _job(hubfleet: HubFleet, name: str, team: str, priority: int, pods: int = 1) -> dict[str, Any]:
    labels = {"placer.dev/queue": team, PRIORITY: str(priority)}
    return hubfleet.job(name, gpus=8, pods=pods, labels=labels)


def test_a_reclaim_victim_of_a_higher_priority_gets_the_room_the_cycle_gave_a_lower_one(
    hubfleet: HubFleet,
) -> None:
    """team-b (quota 32) runs 11 Jobs of 8 GPUs at priority 5: 88 of the member's 96 GPUs,
    one node free. One cycle then decides team-a's ``a-0`` (two pods of 8 GPUs, in quota,
    priority 10) and team-c's ``c-0`` (8 GPUs, quota 0, priority 0): ``a-0`` does not fit, so
    ``c-0`` goes on the free node, and ``a-0`` reclaims two of team-b's Jobs. Those wait, at
    priority 5, while ``c-0`` (priority 0, another queue: they cannot preempt it) would hold
    the node either fits. Known answer: ``a-0`` placed, one victim placed again on the free
    node, the other pending, ``c-0`` pending."""
    serve_queues(hubfleet, queue("team-a", 32), queue("team-b", 32), queue("team-c", 0))
    one_member(hubfleet)
    names = flood(hubfleet, "team-b", 11, **{PRIORITY: "5"})
    hubfleet.hub.store.create(_job(hubfleet, "a-0", "team-a", 10, pods=2))
    hubfleet.hub.store.create(_job(hubfleet, "c-0", "team-c", 0))
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "a-0")) == "m1",
        timeout=60,
        what="team-a's Job placed by reclaim",
    )

    def preempted() -> list[str]:
        return [n for n in names if hubfleet.condition(hub_job(hubfleet, n), "Preempted")]

    hubfleet.wait_for(lambda: len(preempted()) == 2, what="two of team-b's Jobs reclaimed")

    def settled() -> bool:
        again = [n for n in preempted() if hubfleet.placed_cluster(hub_job(hubfleet, n))]
        return len(again) == 1

    hubfleet.wait_for(settled, timeout=60, what="a victim placed again")
    # the room stayed with the higher priority: c-0 was never dispatched, and waits
    assert hubfleet.placed_cluster(hub_job(hubfleet, "c-0")) is None
    assert hubfleet.copies("c-0") == {}
    placed = hubfleet.condition(hub_job(hubfleet, "c-0")) or {}
    assert (placed.get("status"), placed.get("reason")) == ("False", "Unschedulable")
    copies = hubfleet.members["m1"].store.list("jobs", hubfleet.NAMESPACE)
    running = [c for c in copies if not c["spec"].get("suspend")]
    assert sum(int(c["spec"]["parallelism"]) for c in running) == 12  # 96 GPUs, never more


def test_close_decision_withholds_the_lower_priority_and_dispatches_only_the_batch() -> None:
    """Pure (:func:`placer.controller.repair.close_decision`): one 8-GPU node; the decision
    placed ``low`` (priority 0, 4 GPUs) and left ``mid`` (priority 5, 4 GPUs, of the batch)
    pending; ``victim`` (priority 10, 4 GPUs, evicted, not of the batch) waits too. Known
    answer, highest priority first: the free half is kept for ``victim`` (not dispatched:
    not this cycle's), ``mid`` takes ``low``'s half and is dispatched, ``low`` is withheld,
    its reason naming whom the room is kept for."""
    the_fleet = fleet(cluster("m1", node("n0")))
    low, mid = gpu_job("low", "b", 1, 4), gpu_job("mid", "b", 1, 4, priority=5)
    victim = gpu_job("victim", "b", 1, 4, priority=10)
    decision = solve([low], the_fleet)
    decision = replace(decision, unplaced=(Unplaced(mid.ref, {"m1": "not offered"}),))
    closed = close_decision(
        decision, the_fleet, {low.ref: low, mid.ref: mid}, [mid, victim], REPAIR_QUEUES
    )
    assert [p.workload.name for p in closed.decision.placements] == ["mid"]
    assert [u.workload.name for u in closed.decision.unplaced] == ["low"]
    assert "victim" in closed.withheld[low.ref] and closed.kept_for == (victim.ref,)
    # nothing of a lower priority placed, or nothing waiting: the decision as it was
    assert close_decision(decision, the_fleet, {low.ref: low}, [], REPAIR_QUEUES).withheld == {}
