"""The installed wheel replays trace and generator specs alone: no benchmark package needed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from placer.cli import main

ROOT = Path(__file__).resolve().parents[2]
OPENB4 = ROOT / "clusters" / "openb-4.yaml"
SPECS = ("trace:openb:multigpu20", "trace:kalos?shape=fit", "synthetic:gangs?count=5")


@pytest.mark.slow
def test_trace_specs_run_from_the_wheel_without_the_benchmarks(
    tmp_path: Path, built_wheel: Path, capsys: Any
) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(built_wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(site)
    assert "placer/traces/data/acme-kalos-gangs-derived/converted_kalos_trace.csv" in names
    pods = "placer/traces/data/alibaba-openb-gpu-2023/pods/openb_pod_list_{}.csv.gz"
    assert pods.format("default") in names and pods.format("multigpu20") in names
    shutil.rmtree(site / "simulations", ignore_errors=True)
    args = ["simulate", "--snapshot", str(OPENB4), "--solver", "greedy", "-o", "json"]
    for spec in SPECS:
        args += ["--workloads", spec]
    # any import of the benchmark package fails, wherever it might be found
    probe = (
        "import sys; sys.modules['simulations'] = None; import placer; "
        "print(placer.__file__, file=sys.stderr); "
        f"from placer.cli import main; sys.exit(main({args!r}))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stderr.splitlines()[0].startswith(str(site))
    from_wheel = json.loads(ran.stdout)
    assert main(args) == 0
    from_checkout = json.loads(capsys.readouterr().out)
    assert from_wheel["input"]["count"] == from_checkout["input"]["count"] > 0
    assert [c["placed"] for c in from_wheel["comparison"]] == [
        c["placed"] for c in from_checkout["comparison"]
    ]
