"""Issue 13: `placer get -w` follows phases as `kubectl get -w` does — a watch on every member,
one line per change, until Ctrl-C, then a clean exit 0. Run as a `placer` process against the
demo fleet served here."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from placer.cli import main
from tests.submit.conftest import ROOT, SEED, Fleet, submit


@contextmanager
def watching(*args: str) -> Iterator[subprocess.Popen[str]]:
    """``placer ARGS`` as a process; killed if the test leaves it running, its pipes closed."""
    with subprocess.Popen(
        [sys.executable, "-m", "placer", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as process:
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


class Lines:
    """The lines a process prints, as they come."""

    def __init__(self, stream: object) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.queue.put(line.rstrip("\n"))

    def until(self, predicate: Callable[[str], bool], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if predicate(line):
                return line
        pytest.fail(f"no such line within {timeout:g}s; saw {self.seen}")


def test_get_watch_prints_a_line_per_change_until_interrupted(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    with watching("get", "-A", "-w", "--kubeconfig", str(fleet.kubeconfig)) as process:
        lines = Lines(process.stdout)
        time.sleep(2.0)  # its watches start (nothing to show yet: no header, no line)
        assert submit(capsys, fleet, SEED)[0] == 0
        assert lines.until(lambda line: line.startswith("CLUSTER")).split()[:5] == [
            "CLUSTER",
            "NAMESPACE",
            "NAME",
            "KIND",
            "PHASE",
        ]
        running = lines.until(lambda line: " Running " in line)
        assert running.split()[:5] == ["central", "default", "demo", "JobSet", "Running"]
        assert main(["delete", "jobset/demo", "--kubeconfig", str(fleet.kubeconfig)]) == 0
        deleted = lines.until(lambda line: " Deleted " in line)
        assert deleted.split()[:5] == ["central", "default", "demo", "JobSet", "Deleted"]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
        stderr = process.stderr.read() if process.stderr else ""
        assert "Traceback" not in stderr and "interrupted" not in stderr
        time.sleep(0.2)
        while not lines.queue.empty():
            lines.seen.append(lines.queue.get())
        # one line per change of the row (the status writes that change no column print
        # nothing): created (Undefined), Running, Deleted
        demo = [line for line in lines.seen if " demo " in line]
        assert len(demo) == len(set(demo)) <= 3


def test_get_watch_lists_first_and_sees_a_workload_change(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    assert submit(capsys, fleet, SEED)[0] == 0
    with watching("get", "jobsets", "-w", "--kubeconfig", str(fleet.kubeconfig)) as process:
        lines = Lines(process.stdout)
        lines.until(lambda line: line.startswith("CLUSTER"))
        assert lines.until(lambda line: " demo " in line).split()[4] == "Running"
        # the workload grows: its components change, one line says so
        changed = SEED.read_text().replace("replicas: 2", "replicas: 1")
        path = tmp_path / "smaller.yaml"
        path.write_text(changed)
        assert submit(capsys, fleet, path)[0] == 0
        grown = lines.until(lambda line: "worker(1)" in line)
        assert grown.split()[:3] == ["central", "default", "demo"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
