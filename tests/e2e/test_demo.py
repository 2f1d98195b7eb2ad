"""`make demo` end to end: the demo module, run as `make demo` runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: the whole `make demo` in a process: slow (make test-fast leaves it out).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_make_demo_tells_the_whole_story() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "placer.demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # the decision, with the reasons the other clusters were refused
    assert "JobSet/default/demo   central   3      12" in out
    assert "east  refused: total free GPUs too low (needs 12, 10 free)" in out
    assert "west  refused: no node with enough free nvidia.com/gpu" in out
    assert "JobSet/default/demo on central: Running" in result.stderr
    # placer get, across the fleet
    get = out.split("$ placer get -A")[1].split("$ placer describe")[0]
    assert "central   default     demo   JobSet   Running   leader(1), worker(2)   12" in get
    # placer describe, with pods bound to central's three L40S nodes and the record
    describe = out.split("$ placer describe jobset/demo")[1]
    for node in ("central-l40s-0", "central-l40s-1", "central-l40s-2"):
        assert f"Running     gpu: 4    {node}" in describe
    assert "Placement: placed by placer on central" in describe
    assert "Fleet stopped." in out
