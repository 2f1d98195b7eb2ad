"""placer.backoff: the one doubling backoff (initial · 2^(n-1), capped)."""

from __future__ import annotations

import pytest

from placer.backoff import Doubling, doubling


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(0, 0.0), (-1, 0.0), (1, 2.0), (2, 4.0), (3, 8.0), (5, 32.0), (6, 60.0), (10_000, 60.0)],
)
def test_doubles_from_initial_up_to_the_cap(failures: int, expected: float) -> None:
    assert doubling(failures, 2.0, 60.0) == expected


def test_a_loop_waits_longer_after_each_failure_and_starts_over_after_a_success() -> None:
    waits = Doubling(0.2, 1.0)
    assert [waits.failed() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert waits.failures == 5
    waits.reset()
    assert waits.failures == 0
    assert waits.failed() == 0.2
