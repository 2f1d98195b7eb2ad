"""The hub objects waiting for a placement cycle, and when the next cycle should run.

:class:`PendingQueue` is pure bookkeeping (no thread, no I/O, the time passed in): the objects
to place with the time each was queued, the :class:`~placer.controller.reconcile.Backoff` of
those that found no cluster, the *capacity epoch*, and the objects reported invalid as written.

* A cycle takes the ready objects (:meth:`PendingQueue.take`): queued, not being worked on,
  and not backing off — oldest first, at most ``max_batch``.
* An object no cluster could take (:meth:`PendingQueue.failed`) is tried again once its
  backoff has passed **and** the capacity epoch moved since (:meth:`PendingQueue.bump`: more
  free room gathered, a member back, a placed object gone, a failover, policies or
  definitions changed) — or after the longest backoff anyway; one another placer process was
  placing (it held the workload's claim) waits for its backoff only.
* An object that cannot be placed as written (no definition, invalid) is reported once and
  not queued again (:meth:`PendingQueue.offer`) until its owner changes it
  (:func:`~placer.controller.records.as_written`) or the definitions change.
* :func:`batch_deadline` says when a burst of arrivals is decided together.

It locks ``lock`` (its own by default; the controller passes the lock its state objects share).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from placer.controller.reconcile import Backoff
from placer.model import WorkloadRef

__all__ = ["PendingQueue", "batch_deadline"]


def batch_deadline(oldest: float, newest: float, window: float) -> float:
    """When a cycle deciding objects queued from ``oldest`` to ``newest`` should start.

    At least ``window`` after the oldest; while objects keep arriving (the newest less than a
    quarter window ago) a burst is collected whole, up to three windows after the oldest —
    one decision for a burst costs one gather and one solve, not one per window.
    """
    return max(oldest + window, min(newest + window / 4, oldest + 3 * window))


class PendingQueue:
    """Objects waiting for a placement cycle (see the module docstring).

    Args:
        backoff: when unschedulable objects may be tried again.
        lock: the lock to hold (default: a new one).
    """

    def __init__(self, backoff: Backoff, *, lock: threading.RLock | None = None) -> None:
        self._backoff = backoff
        self._lock = lock if lock is not None else threading.RLock()
        self._queued: dict[WorkloadRef, float] = {}
        self._invalid: dict[WorkloadRef, str] = {}
        self._epoch = 0

    # -- the capacity epoch ----------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        with self._lock:
            return self._epoch

    def bump(self) -> None:
        """Capacity changed: objects backing off for want of room may be tried again."""
        with self._lock:
            self._epoch += 1

    # -- queueing --------------------------------------------------------------------------------

    def offer(self, ref: WorkloadRef, written: str, now: float) -> bool:
        """Queue ``ref`` unless it is queued already or was reported invalid as ``written``
        (:func:`~placer.controller.records.as_written`); whether it was queued now."""
        with self._lock:
            if ref in self._queued or self._invalid.get(ref) == written:
                return False
            self._queued[ref] = now
            return True

    def add(self, ref: WorkloadRef, now: float) -> None:
        """Queue ``ref`` (kept at its first queue time when it is queued already)."""
        with self._lock:
            self._queued.setdefault(ref, now)

    def discard(self, ref: WorkloadRef) -> None:
        with self._lock:
            self._queued.pop(ref, None)

    def __contains__(self, ref: object) -> bool:
        with self._lock:
            return ref in self._queued

    def refs(self) -> set[WorkloadRef]:
        with self._lock:
            return set(self._queued)

    # -- outcomes --------------------------------------------------------------------------------

    def failed(self, ref: WorkloadRef, now: float, epoch: int, *, room: bool = True) -> None:
        """No cluster took ``ref`` in the cycle of capacity ``epoch`` (``room=False``: not for
        want of room); it stays queued and backs off."""
        with self._lock:
            self._backoff.failed(ref, now, epoch, room=room)
            self._queued.setdefault(ref, now)

    def placed(self, ref: WorkloadRef) -> None:
        """``ref`` was placed: no backoff, and no longer invalid."""
        with self._lock:
            self._backoff.forget(ref)
            self._invalid.pop(ref, None)

    def changed(self, ref: WorkloadRef) -> None:
        """``ref`` was edited (a new generation): it starts its backoff over."""
        with self._lock:
            self._backoff.forget(ref)

    def invalid(self, ref: WorkloadRef, written: str) -> None:
        """``ref`` cannot be placed as ``written``: not queued again until that changes."""
        with self._lock:
            self._invalid[ref] = written

    def definitions_changed(self) -> None:
        """Objects reported invalid may be valid now."""
        with self._lock:
            self._invalid.clear()

    def backing_off(self, ref: WorkloadRef) -> bool:
        with self._lock:
            return ref in self._backoff

    def forget(self, ref: WorkloadRef) -> None:
        """``ref`` is gone: queued, backoff, invalid."""
        with self._lock:
            self._queued.pop(ref, None)
            self._invalid.pop(ref, None)
            self._backoff.forget(ref)

    # -- cycles ----------------------------------------------------------------------------------

    def next_cycle(self, now: float, window: float, busy: Callable[[WorkloadRef], bool]) -> float:
        """When the next cycle should run (``inf``: nothing to place); objects ``busy`` (being
        worked on) are left out."""
        with self._lock:
            if not self._queued:
                return float("inf")
            earliest = float("inf")
            oldest_ready = float("inf")
            newest_ready = float("-inf")
            for ref, queued in self._queued.items():
                if busy(ref):
                    continue
                if self._backoff.ready(ref, now, self._epoch):
                    oldest_ready = min(oldest_ready, queued)
                    newest_ready = max(newest_ready, queued)
                else:
                    later = self._backoff.next_time(ref, self._epoch)
                    if later is not None:
                        earliest = min(earliest, later)
            if oldest_ready < float("inf"):
                return min(earliest, batch_deadline(oldest_ready, newest_ready, window))
            return earliest

    def take(
        self, now: float, limit: int, busy: Callable[[WorkloadRef], bool]
    ) -> tuple[list[WorkloadRef], int]:
        """The ready objects (not ``busy``, not backing off), oldest first, at most ``limit``,
        no longer queued; and the capacity epoch they are decided at."""
        with self._lock:
            ready = [
                ref
                for ref in self._queued
                if not busy(ref) and self._backoff.ready(ref, now, self._epoch)
            ]
            ready.sort(key=lambda r: (self._queued[r], str(r)))
            ready = ready[:limit]
            for ref in ready:
                del self._queued[ref]
            return ready, self._epoch

    def sizes(self) -> dict[str, Any]:
        """How many objects are queued, backing off, reported invalid."""
        with self._lock:
            return {
                "pending": len(self._queued),
                "backoff": self._backoff.waiting(),
                "invalid": len(self._invalid),
            }
