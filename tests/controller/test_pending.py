"""The objects waiting for a placement cycle, alone (placer.controller.pending.PendingQueue)."""

from __future__ import annotations

from placer.controller.pending import PendingQueue
from placer.controller.reconcile import Backoff
from placer.model import WorkloadRef


def ref(name: str) -> WorkloadRef:
    return WorkloadRef("batch/v1", "Job", "team-a", name)


A, B, C = ref("a"), ref("b"), ref("c")


def never_busy(_ref: WorkloadRef) -> bool:
    return False


def pending() -> PendingQueue:
    return PendingQueue(Backoff(5.0, 300.0))


def test_offer_queues_once_and_not_an_object_invalid_as_written() -> None:
    p = pending()
    assert p.offer(A, "v1", 10.0)
    assert not p.offer(A, "v1", 11.0)  # queued already
    p.invalid(B, "v1")
    assert not p.offer(B, "v1", 10.0)
    assert p.offer(B, "v2", 10.0)  # its owner changed it
    p.invalid(C, "v1")
    p.definitions_changed()
    assert p.offer(C, "v1", 10.0)
    assert p.refs() == {A, B, C}


def test_take_is_oldest_first_by_name_at_most_the_limit_and_skips_busy_objects() -> None:
    p = pending()
    p.add(C, 1.0)
    p.add(B, 2.0)
    p.add(A, 2.0)
    p.add(ref("d"), 0.5)
    taken, epoch = p.take(10.0, 3, lambda r: r == ref("d"))
    assert taken == [C, A, B]
    assert epoch == 0
    assert p.refs() == {ref("d")}
    p.add(A, 20.0)
    p.add(A, 30.0)  # keeps its first time
    assert p.take(40.0, 10, never_busy)[0] == [ref("d"), A]


def test_an_unschedulable_object_waits_for_its_backoff_and_more_room() -> None:
    p = pending()
    p.add(A, 0.0)
    [taken], epoch = p.take(0.0, 10, never_busy)
    p.failed(taken, 1.0, epoch)
    assert A in p and p.backing_off(A)
    assert p.take(100.0, 10, never_busy)[0] == []  # backoff passed, capacity did not change
    p.bump()
    assert p.take(5.5, 10, never_busy)[0] == []  # capacity changed, backoff (5 s) not passed
    assert p.take(6.0, 10, never_busy)[0] == [A]
    p.failed(A, 6.0, p.epoch)
    assert p.take(305.0, 10, never_busy)[0] == []
    assert p.take(306.0, 10, never_busy)[0] == [A]  # the longest backoff passed anyway


def test_an_object_another_placer_held_waits_for_its_backoff_only() -> None:
    p = pending()
    p.failed(A, 0.0, p.epoch, room=False)
    assert p.take(4.0, 10, never_busy)[0] == []
    assert p.take(5.0, 10, never_busy)[0] == [A]


def test_placed_changed_and_forget_reset_the_backoff() -> None:
    p = pending()
    for r in (A, B, C):
        p.failed(r, 0.0, 0)
    p.invalid(A, "v1")
    p.placed(A)
    p.changed(B)
    p.forget(C)
    assert not any(p.backing_off(r) for r in (A, B, C))
    assert C not in p
    assert p.offer(A, "v1", 1.0) is False  # still queued from its failure
    assert p.sizes() == {"pending": 2, "backoff": 0, "invalid": 0}


def test_next_cycle_after_the_batch_window_or_the_next_backoff() -> None:
    p = pending()
    assert p.next_cycle(0.0, 1.0, never_busy) == float("inf")
    p.add(A, 10.0)
    assert p.next_cycle(10.1, 1.0, never_busy) == 11.0
    p.add(B, 10.9)  # a burst keeps arriving: collected whole, up to three windows
    assert p.next_cycle(11.0, 1.0, never_busy) == 11.15
    assert p.next_cycle(11.0, 1.0, lambda r: True) == float("inf")
    q = pending()
    q.failed(A, 0.0, q.epoch)
    assert q.next_cycle(1.0, 1.0, never_busy) == 300.0  # capacity unchanged: the longest
    q.bump()
    assert q.next_cycle(1.0, 1.0, never_busy) == 5.0
