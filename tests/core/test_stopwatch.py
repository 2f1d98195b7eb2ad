"""placer.stopwatch: step timings of one run, one lap per step."""

from __future__ import annotations

from placer.stopwatch import Stopwatch


class _Clock:
    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        return self.readings.pop(0)


def test_each_lap_is_the_time_since_the_previous_one() -> None:
    watch = Stopwatch(digits=3, clock=_Clock(10.0, 10.25, 11.0004, 11.5))
    assert watch.lap("gather") == 0.25
    watch.lap("solve")
    watch.record("ledger", 0.123456)
    watch.lap("dispatch")
    assert watch.timings == {"gather": 0.25, "solve": 0.75, "ledger": 0.123, "dispatch": 0.5}
    assert list(watch.timings) == ["gather", "solve", "ledger", "dispatch"]


def test_measures_real_time_by_default() -> None:
    watch = Stopwatch()
    assert watch.lap("nothing") >= 0.0
    assert watch.timings["nothing"] < 5.0
