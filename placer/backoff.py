"""The doubling backoff: one formula for every retry that waits longer after each failure.

After ``n`` consecutive failures the wait is ``initial · 2^(n-1)``, at most ``maximum`` (no
wait before the first failure). Users: the controller's unschedulable backoff and its work
queue's rate limit (:class:`placer.controller.reconcile.Backoff`), the watch reconnects of
:mod:`placer.kube.watching` and the dispatcher's wait for claims another decider holds.
Pure: no clock, no sleeping; callers wait as they must (an event, a deadline).
"""

from __future__ import annotations

import math

__all__ = ["Doubling", "doubling"]

#: past this exponent the cap has long been reached (and 2.0 ** exponent would overflow).
_MAX_EXPONENT = 62


def doubling(failures: int, initial: float, maximum: float) -> float:
    """The wait after ``failures`` consecutive failures: ``initial · 2^(failures-1)``, at most
    ``maximum``; ``0.0`` when nothing failed yet."""
    if failures <= 0:
        return 0.0
    exponent = min(failures - 1, _MAX_EXPONENT)
    return float(min(maximum, initial * math.pow(2, exponent)))


class Doubling:
    """Consecutive failures of one retry loop and the wait each asks for.

    ``failed()`` counts a failure and returns the wait before the next attempt;
    ``reset()`` starts over after a success.
    """

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = maximum
        self.failures = 0

    def failed(self) -> float:
        """Count a failure; the wait before the next attempt."""
        self.failures += 1
        return doubling(self.failures, self.initial, self.maximum)

    def reset(self) -> None:
        """The attempt succeeded: the next failure waits ``initial`` again."""
        self.failures = 0
