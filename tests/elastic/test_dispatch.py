"""An elastic workload submitted to the virtual demo fleet over HTTPS: the copy on the member
carries the chosen count (read back with the kubernetes client's view of the store and with
kubectl), and `placer plan` and `placer submit` show chosen vs max in text and JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from placer.cli import main
from tests.submit.conftest import Fleet, demo_fleet, submit

__all__ = ["demo_fleet"]  # the fixture, imported for this module's tests

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "deploy" / "examples" / "pytorchjob-elastic.yaml"
DEMO = ROOT / "clusters" / "demo.yaml"
#: west's A100 nodes hold 8 pods of 2 GPUs (clusters/demo.yaml): the master and 7 workers.
WORKERS = 7


def test_plan_shows_chosen_against_max(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-f", str(JOB), "--snapshot", str(DEMO)]) == 0
    out = capsys.readouterr().out
    assert (
        f"PyTorchJob/team-a/elastic-pretrain -> west: worker at {WORKERS} of max 8 replicas "
        "(elastic, min 2)"
    ) in out
    assert main(["plan", "-f", str(JOB), "--snapshot", str(DEMO), "-o", "json"]) == 0
    [placement] = json.loads(capsys.readouterr().out)["placements"]
    assert placement["elastic"] == [
        {"component": "worker", "replicas": WORKERS, "min": 2, "max": 8}
    ]
    assert sum(p["component"] == "worker" for p in placement["pods"]) == WORKERS


def test_submit_writes_the_chosen_count_on_the_member(
    demo_fleet: Callable[..., Fleet],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    fleet = demo_fleet()
    code, data, _ = submit(capsys, fleet, JOB)
    assert code == 0, data
    [placement] = data["placements"]
    assert placement["cluster"] == "west" and placement["dispatched"] is True
    assert placement["elastic"] == [
        {"component": "worker", "replicas": WORKERS, "min": 2, "max": 8}
    ]
    store = fleet.virtual.server("west").store
    job = store.get("pytorchjobs.kubeflow.org", "elastic-pretrain", "team-a")
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == WORKERS
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert job["spec"]["elasticPolicy"] == {
        "rdzvBackend": "c10d",
        "minReplicas": 2,
        "maxReplicas": 8,
    }
    # live describe: the chosen count against the range
    args = ["describe", "pytorchjob/elastic-pretrain", "-n", "team-a"]
    assert main([*args, "--kubeconfig", str(fleet.kubeconfig)]) == 0
    out = capsys.readouterr().out
    assert "Elastic (resizable while running: yes):" in out
    assert ["worker", str(WORKERS), "2", "8"] in [line.split() for line in out.splitlines()]
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    got = subprocess.run(
        [
            kubectl,
            "--kubeconfig",
            str(fleet.kubeconfig),
            "--context",
            "west",
            "get",
            "pytorchjobs.kubeflow.org",
            "elastic-pretrain",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.spec.pytorchReplicaSpecs.Worker.replicas}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert got.stdout == str(WORKERS)


def test_submit_text_shows_chosen_against_max(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = demo_fleet()
    args = ["submit", "--kubeconfig", str(fleet.kubeconfig), "-f", str(JOB), "--dry-run"]
    assert main(args) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = lines.index("PyTorchJob/team-a/elastic-pretrain -> west")
    assert f"  worker at {WORKERS} of max 8 replicas (elastic, min 2)" in lines[at + 1 : at + 4]


def test_submit_never_goes_below_the_minimum(
    demo_fleet: Callable[..., Fleet],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # west holds the master and 7 workers: a minimum of 8 is not placed at all, one of 7 at 7
    fleet = demo_fleet()
    for name, low, placed in (("eight", 8, False), ("seven", 7, True)):
        data = yaml.safe_load(JOB.read_text())
        data["metadata"]["name"] = name
        data["spec"]["elasticPolicy"]["minReplicas"] = low
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        code, result, _ = submit(capsys, fleet, path)
        jobs = {
            cluster: fleet.virtual.server(cluster).store.list("pytorchjobs.kubeflow.org", "team-a")
            for cluster in ("east", "west", "central")
        }
        found = [j for items in jobs.values() for j in items if j["metadata"]["name"] == name]
        if placed:
            assert code == 0, result
            [job] = found
            assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 7
        else:
            assert code != 0 and result["placements"] == []
            assert found == []


def test_an_update_keeps_the_chosen_count(
    demo_fleet: Callable[..., Fleet],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    fleet = demo_fleet()
    assert submit(capsys, fleet, JOB)[0] == 0
    data = yaml.safe_load(JOB.read_text())
    spec = data["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    spec["containers"][0]["image"] = "nvcr.io/nvidia/pytorch:24.06-py3"
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(data))
    code, result, _ = submit(capsys, fleet, changed)
    assert code == 0, result
    job = fleet.virtual.server("west").store.get(
        "pytorchjobs.kubeflow.org", "elastic-pretrain", "team-a"
    )
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["template"]["spec"]["containers"][0]["image"].endswith("24.06-py3")
    assert worker["replicas"] == WORKERS
