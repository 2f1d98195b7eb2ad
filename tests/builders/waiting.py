"""Waiting on a condition instead of sleeping a fixed time: ``wait_until(condition)``.

A fixed sleep is either too short on a loaded machine (the test flakes) or too long on an idle
one (the suite crawls); polling a condition ends as soon as it holds and fails with what was
awaited when it does not hold in time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T], *, timeout: float = 20.0, interval: float = 0.02, what: str = ""
) -> T:
    """Poll ``condition`` until it returns something truthy and return that; fail the test
    after ``timeout`` seconds, naming ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what or condition}")
        time.sleep(interval)
