"""The controller loop's work queue, with client-go's ``workqueue`` rules.

Keys are anything hashable; the controller queues hub objects (a
:class:`~placer.model.WorkloadRef`: reconcile it) and member copies (a
:class:`~placer.controller.records.CopyRef`: judge whether it is stale). The rules:

* **dedup** — a key added several times before it is taken is taken once;
* **one at a time** — a key is *processing* from :meth:`WorkQueue.get` (or :meth:`~WorkQueue.
  begin`, for work taken by another thread: a placement cycle) until :meth:`~WorkQueue.done`;
  added meanwhile, it is taken again only after ``done``, so no key is worked on twice at once;
* **delayed adds** — :meth:`~WorkQueue.add_after` makes a key ready after a delay (a later call
  for the same key replaces the time);
* **per-key rate limiting** — :meth:`~WorkQueue.add_rate_limited` delays a key by its own
  backoff (2 s doubling up to 60 s by default: the retry of failed actions), which
  :meth:`~WorkQueue.forget` resets after a success;
* :meth:`~WorkQueue.remove` drops all the queue knows about a key — queued, delayed, its
  backoff — except a processing mark: the work under way ends by itself with ``done``.

Unlike client-go's ``Get`` (one key), :meth:`~WorkQueue.get` hands out every ready key at once:
the loop reconciles them in one pass, in a stable order.

The queue has no thread of its own and reads the time only through the ``clock`` it is given.
It locks ``lock`` (its own by default; the controller passes the lock its state objects share,
so that steps spanning several of them stay atomic).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from placer.controller.reconcile import Backoff
from placer.controller.records import CopyRef
from placer.model import WorkloadRef

__all__ = ["WorkKey", "WorkQueue"]

K = TypeVar("K", bound=Hashable)
#: what the controller's loop works on: a hub object, or a member copy to judge.
WorkKey = WorkloadRef | CopyRef

#: the shortest wait of :meth:`WorkQueue.get` (a due time in the past does not spin).
_MIN_WAIT = 0.01


class WorkQueue(Generic[K]):
    """Keys to work on (see the module docstring).

    Args:
        clock: monotonic seconds.
        rate_limit: the backoff of :meth:`add_rate_limited` (default 2 s doubling to 60 s).
        lock: the lock to hold (default: a new one).
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        rate_limit: Backoff | None = None,
        lock: threading.RLock | None = None,
    ) -> None:
        self._clock = clock
        self._limiter = rate_limit if rate_limit is not None else Backoff(2.0, 60.0)
        self._ready = threading.Condition(lock if lock is not None else threading.RLock())
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._delayed: dict[K, float] = {}

    # -- adding ----------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue ``key`` (taken once, after any processing of it ends)."""
        with self._ready:
            self._dirty.add(key)
            self._ready.notify_all()

    def add_all(self, keys: Iterable[K]) -> None:
        with self._ready:
            self._dirty.update(keys)
            self._ready.notify_all()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` in ``delay`` seconds (replacing an earlier delayed add of it)."""
        with self._ready:
            self._delayed[key] = self._clock() + delay
            self._ready.notify_all()

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its backoff, which grows with each call until :meth:`forget`;
        returns when it will be ready."""
        with self._ready:
            when = self._limiter.failed(key, self._clock(), 0)
            self._delayed[key] = when
            self._ready.notify_all()
            return when

    def forget(self, key: K) -> None:
        """Reset the backoff of ``key`` (its work succeeded)."""
        with self._ready:
            self._limiter.forget(key)

    # -- taking ----------------------------------------------------------------------------------

    def get(self, timeout: float) -> list[K]:
        """Every ready key, now processing (each until its :meth:`done`).

        Waits while none is ready, at most ``timeout`` seconds or until the next delayed key is
        due; may return an empty list (a timeout, or :meth:`wake`).
        """
        with self._ready:
            if self._dirty <= self._processing:
                self._ready.wait(self._wait_time(timeout))
            self._promote_due()
            keys = self._dirty - self._processing
            self._dirty -= keys
            self._processing |= keys
            return list(keys)

    def begin(self, keys: Iterable[K]) -> None:
        """Mark ``keys`` processing for work taken another way than :meth:`get` (the caller
        checked :meth:`is_processing` under the same lock); each ends with :meth:`done`."""
        with self._ready:
            self._processing.update(keys)

    def done(self, key: K, *, again: bool = False) -> None:
        """The work on ``key`` ended; ``again``: queue it once more (as :meth:`add`)."""
        with self._ready:
            self._processing.discard(key)
            if again:
                self._dirty.add(key)
            self._ready.notify_all()

    def wake(self) -> None:
        """Make a waiting :meth:`get` return now."""
        with self._ready:
            self._ready.notify_all()

    # -- forgetting ------------------------------------------------------------------------------

    def remove(self, key: K) -> None:
        """Drop ``key``: queued, delayed and its backoff (not a processing mark)."""
        with self._ready:
            self._dirty.discard(key)
            self._delayed.pop(key, None)
            self._limiter.forget(key)

    # -- reading ---------------------------------------------------------------------------------

    def is_processing(self, key: K) -> bool:
        with self._ready:
            return key in self._processing

    def is_delayed(self, key: K) -> bool:
        with self._ready:
            return key in self._delayed

    def sizes(self) -> dict[str, int]:
        """How many keys are queued, processing, delayed, and backing off."""
        with self._ready:
            return {
                "queued": len(self._dirty),
                "processing": len(self._processing),
                "delayed": len(self._delayed),
                "backoff": self._limiter.waiting(),
            }

    # ----------------------------------------------------------------------------------------

    def _wait_time(self, timeout: float) -> float:
        wait = timeout
        if self._delayed:
            wait = min(wait, min(self._delayed.values()) - self._clock())
        return max(_MIN_WAIT, wait)

    def _promote_due(self) -> None:
        if not self._delayed:
            return
        now = self._clock()
        due = [key for key, when in self._delayed.items() if when <= now]
        for key in due:
            del self._delayed[key]
        self._dirty.update(due)
