"""The fleet commands end to end: show, snapshot, fleet up, and their bad-input errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from placer.cli import main
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from tests.fleet.processes import read_until

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "clusters" / "demo.yaml"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_show_snapshot_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["fleet", "show", str(DEMO)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["CLUSTER", "REACHABLE", "NODES"]
    assert lines[3].split()[:5] == ["central", "yes", "4", "12/24", "4"]
    code, out, _ = run(["fleet", "show", str(DEMO), "-o", "json"], capsys)
    data = json.loads(out)
    assert [c["name"] for c in data["clusters"]] == ["east", "west", "central"]
    assert data["clusters"][0]["max_free_per_node"]["nvidia.com/gpu"] == 4
    code, out, _ = run(["fleet", "show", str(DEMO), "--nodes"], capsys)
    assert "west-a100-8" in out and "Cordoned" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["fleet", "show", "--kubeconfig", "{tmp}/missing.yaml"], "missing.yaml: no such"),
        (
            ["snapshot", "--kubeconfig", "{kc}", "--context", "north", "-o", "{tmp}/s.yaml"],
            "unknown context 'north'",
        ),
        (["fleet", "show", "--fleet", "{tmp}/bad-fleet.yaml"], "bad-fleet.yaml: clusters[0].name"),
        (["fleet", "show", "{tmp}/bad-snapshot.yaml"], "bad-snapshot.yaml: clusters[0].nodeGroups"),
        (
            ["fleet", "up", "{tmp}/missing-snapshot.yaml", "--kubeconfig-out", "{tmp}/k"],
            "missing-snapshot.yaml: no such file",
        ),
    ],
)
def test_bad_input_is_a_clear_error(
    argv: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad-fleet.yaml").write_text("clusters: [{context: a}]\n", encoding="utf-8")
    (tmp_path / "bad-snapshot.yaml").write_text(
        "apiVersion: placer.dev/v1alpha1\nkind: FleetSnapshot\n"
        "clusters: [{name: a, nodeGroups: 3}]\n",
        encoding="utf-8",
    )
    kc = tmp_path / "kc.yaml"
    kc.write_text(
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c}}]\n",
        encoding="utf-8",
    )
    args = [a.format(tmp=tmp_path, kc=kc) for a in argv]
    code, out, err = run(args, capsys)
    assert code == 1
    assert err.startswith("error: ") and fragment in err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "s.yaml").exists()


def test_show_rejects_snapshot_and_fleet_options_together(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(["fleet", "show", str(DEMO), "--context", "x"], capsys)
    assert code == 2 and "either SNAPSHOT or fleet options" in err


@pytest.mark.slow
def test_snapshot_then_fleet_up_then_snapshot_round_trips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    # 1. a snapshot of live clusters (the demo fleet served in-process)
    with VirtualFleet(load_snapshot(DEMO)) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "demo.kubeconfig")
        code, _, err = run(["snapshot", "--kubeconfig", str(kubeconfig), "-o", str(first)], capsys)
    assert code == 0, err
    assert "3 clusters (3 reachable), 18 nodes" in err

    # 2. `placer fleet up` on it, as users run it (a process, stopped with Ctrl-C)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "placer",
            "fleet",
            "up",
            str(first),
            "--kubeconfig-out",
            str(tmp_path / "up.kubeconfig"),
            "--fleet-out",
            str(tmp_path / "up-fleet.yaml"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        output = read_until(proc, b"serving", timeout=60)
        assert b"kubeconfig: " in output and b"cluster central: https://127.0.0.1:" in output
        # 3. a snapshot of the virtual fleet, through the fleet file it wrote
        code, _, err = run(
            ["snapshot", "--fleet", str(tmp_path / "up-fleet.yaml"), "-o", str(second)], capsys
        )
        assert code == 0, err
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert b"stopping" in stderr and b"Traceback" not in stderr

    before, after = load_snapshot(first), load_snapshot(second)
    assert before.captured_at != "" and after.captured_at != ""
    assert replace(after, captured_at="") == replace(before, captured_at="")
    for cluster in after.clusters:
        assert cluster.labels["region"] and cluster.reachable
