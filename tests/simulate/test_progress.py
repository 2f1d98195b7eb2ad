"""``placer simulate`` progress: lines on stderr when it is a terminal or with ``--progress``
(each solver's start and end, and how far a stream is in between), never on stdout, so that
``-o json`` stays one JSON document; none with ``--no-progress`` or when stderr is a file."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STREAM = [
    "simulate",
    "--snapshot",
    "clusters/demo.yaml",
    "--workloads",
    "synthetic:gangs?seed=1&count=40&time_scale=0.01",
    "--mode",
    "stream",
    "--solver",
    "cpsat,first-fit",
    "-o",
    "json",
]
LINE = re.compile(r"^simulate: (?P<solver>[\w-]+): (?P<done>\d+)/(?P<total>\d+) \(\d+ s\) .+$")


def placer(*args: str, stderr: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "placer", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def progress_lines(stderr: str) -> list[re.Match[str]]:
    matches = [LINE.match(line) for line in stderr.splitlines() if line.startswith("simulate:")]
    assert all(matches), stderr
    return [m for m in matches if m]


def test_progress_goes_to_stderr_and_json_stays_alone_on_stdout() -> None:
    done = placer(*STREAM, "--progress")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # nothing but the document on stdout
    assert [run["solver"] for run in document["runs"]] == ["cpsat", "first-fit"]
    lines = progress_lines(done.stderr)
    for solver in ("cpsat", "first-fit"):
        own = [m for m in lines if m["solver"] == solver]
        assert len(own) >= 2, done.stderr  # its start and its end at least
        assert int(own[0]["done"]) < int(own[0]["total"]) == 40
        assert own[-1]["done"] == own[-1]["total"] == "40"
        assert sum(m["done"] == m["total"] for m in own) == 1  # the end said once


def test_no_progress_when_stderr_is_not_a_terminal_or_when_asked() -> None:
    quiet = placer(*STREAM)
    assert quiet.returncode == 0, quiet.stderr
    assert "simulate:" not in quiet.stderr
    json.loads(quiet.stdout)


def test_progress_by_default_on_a_terminal() -> None:
    """stderr a pseudo-terminal, as in an interactive shell: progress without the flag, and
    ``--no-progress`` turns it off."""

    def on_a_terminal(*extra: str) -> tuple[str, str]:
        parent, child = pty.openpty()
        try:
            done = placer(*STREAM, *extra, stderr=child)
        finally:
            os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(parent, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(parent)
        assert done.returncode == 0
        return done.stdout, b"".join(chunks).decode().replace("\r\n", "\n")

    stdout, terminal = on_a_terminal()
    json.loads(stdout)
    assert len(progress_lines(terminal)) >= 4
    stdout, terminal = on_a_terminal("--no-progress")
    json.loads(stdout)
    assert "simulate:" not in terminal
