"""Commands run as processes in the fleet tests: read a served process's output until it says
it is ready."""

from __future__ import annotations

import os
import selectors
import subprocess
import time


def read_until(proc: subprocess.Popen[bytes], marker: bytes, *, timeout: float) -> bytes:
    """``proc``'s stdout until ``marker`` appears (killing it after ``timeout`` seconds)."""
    assert proc.stdout is not None
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while marker not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                proc.kill()
                raise AssertionError(f"no {marker!r} in time: {data!r}")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                stderr = proc.stderr.read() if proc.stderr else b""
                raise AssertionError(f"exited early: {data!r} {stderr!r}")
            data += chunk
    return data
