"""Reclaim in a stream (``simulate --mode stream --allow-preemption``): a queue with pending
in-quota demand gets its quota back at the next decision by evicting over-quota work, which
goes back to the queue; protected work stays; without preemption it waits."""

from __future__ import annotations

from placer.simulate import Settings, simulate
from placer.simulate.engine import after_evictions
from tests.queues.conftest import gpu_job, queue_doc, queues
from tests.simulate.conftest import Item
from tests.solver.conftest import cluster, fleet, node

QUEUES = queues(
    queue_doc("flood", nvidia_com__gpu={"quota": 0}),
    queue_doc("owner", nvidia_com__gpu={"quota": 8}),
)


def _items(protect: bool = False) -> list[Item]:
    flood = []
    for i in range(4):
        job = gpu_job(f"f{i}", "flood", 1, 4, protected=protect)
        flood.append(Item(job, arrival_s=0.0, duration_s=1000.0))
    owner = [
        Item(gpu_job(f"o{i}", "owner", 1, 4), arrival_s=10.0, duration_s=100.0) for i in range(2)
    ]
    return flood + owner


def _run(items: list[Item], preemption: bool) -> object:
    the_fleet = fleet(cluster("c0", node("n0"), node("n1")))  # 16 GPUs
    settings = Settings(mode="stream", queues=QUEUES, preemption=preemption, time_limit=0.2)
    return simulate(items, the_fleet, settings)


def test_reclaim_returns_the_quota_at_the_next_decision() -> None:
    items = _items()
    run = _run(items, preemption=True)
    starts = {items[i].workload.ref.name: o.start_s for i, o in enumerate(run.outcomes)}  # type: ignore[attr-defined]
    assert starts["o0"] == 10.0 and starts["o1"] == 10.0
    records = run.preemptions  # type: ignore[attr-defined]
    assert len(records) == 2
    victims = [items[i].workload.ref.name for r in records for i, _ in r.victims]
    assert len(set(victims)) == 2 and all(name.startswith("f") for name in victims)
    assert all(reason == "reclaim" for r in records for _, reason in r.victims)
    assert sum(r.gpu_milli for r in records) == 8000  # never more than the 8 GPUs needed
    assert sum(r.lost_gpu_seconds for r in records) == 2 * 4 * 10.0
    # the victims went back to the queue and ran again once the owner's work left
    for name in victims:
        again = next(o for i, o in enumerate(run.outcomes) if items[i].workload.ref.name == name)  # type: ignore[attr-defined]
        assert again.start_s is not None and again.start_s >= 110.0
    assert all(not d.problems for d in run.decisions)  # type: ignore[attr-defined]


def test_without_preemption_or_with_protected_work_the_owner_waits() -> None:
    for items, preemption in ((_items(), False), (_items(protect=True), True)):
        run = _run(items, preemption)
        owner = [o for i, o in enumerate(run.outcomes) if items[i].workload.ref.name[0] == "o"]  # type: ignore[attr-defined]
        assert all(o.start_s == 1000.0 for o in owner)
        assert run.preemptions == ()  # type: ignore[attr-defined]


def test_fair_share_reclaim_tries_a_queues_next_gang_when_its_first_cannot_evict() -> None:
    """Queues a and b, quota 0 and equal weights: a holds all 16 GPUs. b's first gang (10
    GPUs) may not reclaim (a would end below b), its second (4 GPUs) may: it evicts one of
    a's jobs at the decision where it arrives, not never (a single try per queue and decision
    spent on the first gang kept the second waiting for as long as the first did)."""
    even = queues(
        queue_doc("a", nvidia_com__gpu={"quota": 0}),
        queue_doc("b", nvidia_com__gpu={"quota": 0}),
    )
    items = [Item(gpu_job(f"a{i}", "a", 1, 4), arrival_s=0.0, duration_s=1000.0) for i in range(4)]
    items += [
        Item(gpu_job("b-big", "b", 2, 5), arrival_s=10.0, duration_s=100.0),
        Item(gpu_job("b-small", "b", 1, 4), arrival_s=10.0, duration_s=100.0),
    ]
    the_fleet = fleet(cluster("c0", node("n0"), node("n1")))
    settings = Settings(
        mode="stream", queues=even, preemption=True, fair_share_reclaim=True, time_limit=0.2
    )
    run = simulate(items, the_fleet, settings)
    starts = {items[i].workload.ref.name: o.start_s for i, o in enumerate(run.outcomes)}
    assert starts["b-small"] == 10.0
    first = run.preemptions[0]
    assert first.time_s == 10.0 and items[first.preemptor].workload.ref.name == "b-small"
    assert [reason for _, reason in first.victims] == ["fair-share"]
    assert first.gpu_milli == 4000


def test_room_an_eviction_leaves_goes_to_the_highest_priority_in_the_same_decision() -> None:
    """One 8-GPU node held by a's 8-GPU job over its quota. x's priority-10 job (4 GPUs,
    over x's quota: it may not reclaim) waits; then b's two in-quota 4-GPU jobs arrive. b1
    reclaims the node (the only victim frees 8), and the 4 GPUs left go, in that same
    decision, to x's job — the higher priority — not to b2 nor idle until the next event."""
    three = queues(
        queue_doc("a", nvidia_com__gpu={"quota": 0}),
        queue_doc("b", nvidia_com__gpu={"quota": 8}),
        queue_doc("x", nvidia_com__gpu={"quota": 0}),
    )
    items = [
        Item(gpu_job("a0", "a", 1, 8), arrival_s=0.0, duration_s=1000.0),
        Item(gpu_job("x-hi", "x", 1, 4, priority=10), arrival_s=5.0, duration_s=100.0),
        Item(gpu_job("b1", "b", 1, 4), arrival_s=10.0, duration_s=100.0),
        Item(gpu_job("b2", "b", 1, 4), arrival_s=10.0, duration_s=100.0),
    ]
    settings = Settings(mode="stream", queues=three, preemption=True, time_limit=0.2)
    run = simulate(items, fleet(cluster("c0", node("n0"))), settings)
    starts = {items[i].workload.ref.name: o.start_s for i, o in enumerate(run.outcomes)}
    assert starts["b1"] == 10.0 and starts["x-hi"] == 10.0
    assert starts["b2"] is not None and starts["b2"] > 10.0
    assert [items[r.preemptor].workload.ref.name for r in run.preemptions] == ["b1"]
    assert all(not d.problems for d in run.decisions)


def test_a_higher_priority_victim_is_decided_again_before_lower_priorities() -> None:
    """After the evictions, the decision over what still waits leaves this decision's victims
    out (an over-served queue would take the room back) — but not one of a higher priority
    than other waiting work: nothing of a lower priority may start on room it fits."""
    priority = {0: 0, 1: 10, 2: 0, 3: 0}.__getitem__
    assert after_evictions([0, 1, 2, 3], {1, 3}, priority) == [0, 1, 2]
    assert after_evictions([0, 3], {3}, priority) == [0]
    assert after_evictions([1, 3], {1, 3}, priority) == []


def test_fair_share_reclaim_waits_while_a_higher_priority_victim_waits() -> None:
    """a holds 16 GPUs over its quota: a0 (priority 10, 4 GPUs), a1 (8 GPUs) and a protected
    a2 (4 GPUs). At t=10 b's in-quota b0 (priority 10) reclaims a0, the fewest GPUs; d's
    over-quota d0 (priority 0) could then evict a1 by fair-share reclaim — but a0, priority 10,
    now waits: d0 must not start by eviction ahead of it (it did: a0 waited while d0 ran on
    a1's node, with room for a0 left idle)."""
    three = queues(
        queue_doc("a", nvidia_com__gpu={"quota": 0}),
        queue_doc("b", nvidia_com__gpu={"quota": 4}),
        queue_doc("d", nvidia_com__gpu={"quota": 0}),
    )
    protected = gpu_job("a2", "a", 1, 4, protected=True)
    items = [
        Item(gpu_job("a0", "a", 1, 4, priority=10), arrival_s=0.0, duration_s=1000.0),
        Item(gpu_job("a1", "a", 1, 8), arrival_s=0.0, duration_s=1000.0),
        Item(protected, arrival_s=0.0, duration_s=1000.0),
        Item(gpu_job("b0", "b", 1, 4, priority=10), arrival_s=10.0, duration_s=100.0),
        Item(gpu_job("d0", "d", 1, 4), arrival_s=10.0, duration_s=100.0),
    ]
    settings = Settings(
        mode="stream", queues=three, preemption=True, fair_share_reclaim=True, time_limit=0.2
    )
    run = simulate(items, fleet(cluster("c0", node("n0"), node("n1"))), settings)
    at_ten = [r for r in run.preemptions if r.time_s == 10.0]
    assert [items[r.preemptor].workload.ref.name for r in at_ten] == ["b0"]
    assert [items[i].workload.ref.name for i, _ in at_ten[0].victims] == ["a0"]
    starts = {items[i].workload.ref.name: o.start_s for i, o in enumerate(run.outcomes)}
    assert starts["b0"] == 10.0 and starts["d0"] != 10.0


def test_a_victim_placed_again_in_the_same_decision_runs_from_then_on() -> None:
    """n0 holds a's a0 (priority 10, 4 GPUs) and a protected 4-GPU job, n1 a's a1 (8 GPUs),
    all over a's quota; x's x0 (8 GPUs) waits. At t=10 b's in-quota b1 (priority 10) reclaims
    a0 (the fewest GPUs) and b2 reclaims a1, leaving 4 GPUs of n1 idle: the decision after the
    evictions places a0 (priority 10) there at once. It runs from t=10, once — it was left in
    the queue and placed a second time at the next decision, its first room never freed."""
    three = queues(
        queue_doc("a", nvidia_com__gpu={"quota": 0}),
        queue_doc("b", nvidia_com__gpu={"quota": 8}),
        queue_doc("x", nvidia_com__gpu={"quota": 0}),
    )
    protected = gpu_job("a2", "a", 1, 4, protected=True)
    items = [
        Item(gpu_job("a0", "a", 1, 4, priority=10), arrival_s=0.0, duration_s=1000.0),
        Item(protected, arrival_s=0.0, duration_s=1000.0),
        Item(gpu_job("a1", "a", 1, 8), arrival_s=0.0, duration_s=1000.0),
        Item(gpu_job("x0", "x", 1, 8), arrival_s=5.0, duration_s=100.0),
        Item(gpu_job("b1", "b", 1, 4, priority=10), arrival_s=10.0, duration_s=100.0),
        Item(gpu_job("b2", "b", 1, 4), arrival_s=10.0, duration_s=100.0),
    ]
    settings = Settings(mode="stream", queues=three, preemption=True, time_limit=0.2)
    run = simulate(items, fleet(cluster("c0", node("n0"), node("n1"))), settings)
    at_ten = {
        items[r.preemptor].workload.ref.name: [items[i].workload.ref.name for i, _ in r.victims]
        for r in run.preemptions
        if r.time_s == 10.0
    }
    assert at_ten == {"b1": ["a0"], "b2": ["a1"]}
    starts = {items[i].workload.ref.name: o.start_s for i, o in enumerate(run.outcomes)}
    assert starts["b1"] == 10.0 and starts["b2"] == 10.0
    assert starts["a0"] == 10.0
    assert all(not d.problems for d in run.decisions)
