"""Step timings of one run (a submit, a controller cycle): a stopwatch with laps.

``lap("gather")`` records the seconds since the previous lap (or since the stopwatch started)
under that step's name, rounded to ``digits``; ``timings`` holds them in the order taken.
Measured on ``time.perf_counter`` (wall time) unless another clock is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Stopwatch"]


class Stopwatch:
    """Seconds per step of one run (see the module docstring)."""

    def __init__(self, *, digits: int = 4, clock: Callable[[], float] = time.perf_counter) -> None:
        self.digits = digits
        self.timings: dict[str, float] = {}
        self._clock = clock
        self._mark = clock()

    def lap(self, step: str) -> float:
        """Record the seconds since the previous lap as ``step``; returns them (unrounded)."""
        now = self._clock()
        seconds = now - self._mark
        self._mark = now
        self.timings[step] = round(seconds, self.digits)
        return seconds

    def record(self, step: str, seconds: float) -> None:
        """Record a time measured elsewhere (a slowest parallel call) as ``step``."""
        self.timings[step] = round(seconds, self.digits)
