"""The holds of an eviction under way (placer.controller.preemption.Preemption), as pure
bookkeeping: a preemptor is held while its victims' pods are on the member, its victims until
it is placed (or had its decision once their pods went), both at most EVICTION_SECONDS."""

from __future__ import annotations

from typing import Any

from placer.controller.preemption import EVICTION_SECONDS, Preemption, _Eviction
from placer.model import WorkloadRef


def ref(name: str) -> WorkloadRef:
    return WorkloadRef("batch/v1", "Job", "team-a", name)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def preemption(clock: Clock) -> Preemption:
    unused: Any = None
    return Preemption(
        hub=unused,
        members=unused,
        writer=unused,
        ledger=unused,
        events=unused,
        reads=unused,
        evict_copy=unused,
        delete_copy=unused,
        remember=unused,
        claim=unused,
        release=unused,
        clock=clock,
    )


def evicting(p: Preemption, clock: Clock, pods: set[tuple[str, str]]) -> None:
    p._evicting[ref("a")] = _Eviction(
        "m1", frozenset({ref("b")}), pods, clock.now + EVICTION_SECONDS, started=clock.now
    )


def test_the_preemptor_waits_for_its_victims_pods_and_they_for_it() -> None:
    clock = Clock()
    p = preemption(clock)
    evicting(p, clock, {("team-a", "b-0"), ("team-a", "b-1")})
    assert p.holds(ref("a")) and p.holds(ref("b")) and not p.holds(ref("c"))
    assert p.watched_clusters() == {"m1"}
    assert p.pods_changed("m2", lambda pods: set()) == []  # another member
    assert p.pods_changed("m1", lambda pods: {("team-a", "b-1")}) == []  # one pod left
    assert p.holds(ref("a"))
    assert p.pods_changed("m1", lambda pods: set()) == [ref("a")]
    assert not p.holds(ref("a")) and p.holds(ref("b"))  # the victim waits for the preemptor
    assert p.watched_clusters() == set()
    assert p.evicting(ref("a"))  # no new victims meanwhile
    p.placed(ref("a"))
    assert not p.holds(ref("b")) and not p.evicting(ref("a"))


def test_holds_end_when_the_preemptor_is_decided_unplaced_or_after_the_limit() -> None:
    clock = Clock()
    p = preemption(clock)
    evicting(p, clock, {("team-a", "b-0")})
    p.decided(ref("a"))  # decided while the pod is still there: changes nothing
    assert p.holds(ref("b"))
    p.pods_changed("m1", lambda pods: set())
    p.decided(ref("a"))  # decided, unplaced, once the pod went: the room went elsewhere
    assert not p.holds(ref("b")) and p.evicting(ref("a"))
    evicting(p, clock, {("team-a", "b-0")})
    clock.now += EVICTION_SECONDS  # a pod stuck terminating
    assert not p.holds(ref("a")) and not p.holds(ref("b")) and not p.evicting(ref("a"))
