"""The controller loop's work queue alone: client-go's workqueue rules.

A fake clock drives delays and backoffs; the waiting ``get`` is checked with a second thread.
"""

from __future__ import annotations

import threading
import time

from placer.controller.reconcile import Backoff
from placer.controller.workqueue import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def queue(clock: Clock | None = None) -> WorkQueue[str]:
    return WorkQueue(clock=clock or Clock())


def test_a_key_added_twice_is_taken_once() -> None:
    q = queue()
    q.add("a")
    q.add("a")
    q.add_all(["b", "a"])
    assert sorted(q.get(timeout=0.01)) == ["a", "b"]
    assert q.get(timeout=0.01) == []


def test_a_key_added_while_processing_waits_for_done() -> None:
    q = queue()
    q.add("a")
    assert q.get(timeout=0.01) == ["a"]
    assert q.is_processing("a")
    q.add("a")
    assert q.get(timeout=0.01) == []  # one worker per key
    q.done("a")
    assert not q.is_processing("a")
    assert q.get(timeout=0.01) == ["a"]


def test_done_again_queues_the_key_once_more() -> None:
    q = queue()
    q.add("a")
    q.get(timeout=0.01)
    q.done("a", again=True)
    assert q.get(timeout=0.01) == ["a"]
    q.done("a")
    assert q.get(timeout=0.01) == []


def test_begin_marks_keys_taken_another_way() -> None:
    q = queue()
    q.begin(["a"])
    q.add("a")
    assert q.get(timeout=0.01) == []
    q.done("a", again=True)
    assert q.get(timeout=0.01) == ["a"]


def test_delayed_adds_become_ready_at_their_time_and_the_last_one_wins() -> None:
    clock = Clock()
    q = queue(clock)
    q.add_after("a", 5.0)
    assert q.is_delayed("a")
    assert q.get(timeout=0.01) == []
    q.add_after("a", 1.0)  # replaces the earlier time
    clock.now += 1.0
    assert q.get(timeout=0.01) == ["a"]
    assert not q.is_delayed("a")


def test_rate_limited_adds_back_off_per_key_until_forgotten() -> None:
    clock = Clock()
    q = queue(clock)
    delays = [q.add_rate_limited("a") - clock.now for _ in range(8)]
    assert delays == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    assert q.add_rate_limited("b") - clock.now == 2.0  # another key, its own backoff
    q.forget("a")
    assert q.add_rate_limited("a") - clock.now == 2.0
    clock.now += 2.0
    assert sorted(q.get(timeout=0.01)) == ["a", "b"]


def test_the_rate_limit_is_the_backoff_given() -> None:
    clock = Clock()
    q: WorkQueue[str] = WorkQueue(clock=clock, rate_limit=Backoff(1.0, 3.0))
    assert [q.add_rate_limited("a") - clock.now for _ in range(3)] == [1.0, 2.0, 3.0]


def test_remove_drops_all_but_a_processing_mark() -> None:
    q = queue()
    q.add("a")
    q.get(timeout=0.01)
    q.add("a")
    q.add_rate_limited("a")
    q.add("b")
    q.add_after("b", 3.0)
    q.remove("a")
    q.remove("b")
    assert q.sizes() == {"queued": 0, "processing": 1, "delayed": 0, "backoff": 0}
    q.done("a")
    assert q.sizes() == {"queued": 0, "processing": 0, "delayed": 0, "backoff": 0}
    assert q.get(timeout=0.01) == []


def test_get_waits_until_a_key_is_added() -> None:
    q: WorkQueue[str] = WorkQueue()
    taken: list[list[str]] = []
    waiter = threading.Thread(target=lambda: taken.append(q.get(timeout=10.0)))
    started = time.monotonic()
    waiter.start()
    time.sleep(0.05)
    q.add("a")
    waiter.join(timeout=5)
    assert taken == [["a"]]
    assert time.monotonic() - started < 5


def test_get_returns_after_its_timeout_or_a_wake() -> None:
    q: WorkQueue[str] = WorkQueue()
    started = time.monotonic()
    assert q.get(timeout=0.05) == []
    assert time.monotonic() - started >= 0.04
    woken: list[list[str]] = []
    waiter = threading.Thread(target=lambda: woken.append(q.get(timeout=10.0)))
    waiter.start()
    time.sleep(0.05)
    q.wake()
    waiter.join(timeout=5)
    assert woken == [[]]


def test_get_waits_no_longer_than_the_next_delayed_key() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 0.05)
    started = time.monotonic()
    taken = q.get(timeout=10.0)
    if not taken:  # woken exactly at the due time: taken by the next call
        taken = q.get(timeout=10.0)
    assert taken == ["a"]
    assert time.monotonic() - started < 5


def test_a_shared_lock_is_the_queues_lock() -> None:
    lock = threading.RLock()
    q: WorkQueue[str] = WorkQueue(lock=lock)
    with lock:  # reentrant: the holder can use the queue
        q.add("a")
        assert q.get(timeout=0.01) == ["a"]
