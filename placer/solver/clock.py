"""The clock a decision's time limit is measured on: the process's CPU time, with wall time as
a safety net.

Why CPU time: the search steps (greedy passes, neighbourhood searches) stop when their share of
the limit is used. Measured on the wall clock, a busy machine (other processes on the same
cores) makes a decision do less search and so decide differently; measured on CPU time, the
same input gets the same search wherever it runs — the decision stays reproducible — and on an
idle machine the two clocks agree. The safety net bounds the wall time: the clock never reads
less than the wall time divided by ``WALL_SAFETY``, so a decision with limit ``L`` ends within
about ``WALL_SAFETY × L`` wall seconds however loaded the machine is.
"""

from __future__ import annotations

import time

__all__ = ["WALL_SAFETY", "Clock"]

#: wall time allowed per second of the limit before the safety net stops the search.
WALL_SAFETY = 3.0


class Clock:
    """Seconds used by this decision so far (see the module docstring)."""

    def __init__(self) -> None:
        self._cpu = time.process_time()
        self._wall = time.perf_counter()

    def __call__(self) -> float:
        cpu = time.process_time() - self._cpu
        wall = time.perf_counter() - self._wall
        return max(cpu, wall / WALL_SAFETY)

    @staticmethod
    def wall_seconds(clock_seconds: float) -> float:
        """The wall time a CP-SAT call may take for ``clock_seconds`` of budget (its own
        wall-clock limit, a safety net next to its deterministic time limit)."""
        return max(0.01, clock_seconds * WALL_SAFETY)
