"""``placer submit --queues`` on the virtual demo fleet (loopback API servers, real kubeconfig):
the work placer already placed counts toward its queue, so a second submission cannot pass the
queue's limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from placer.cli import main
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "deploy" / "examples" / "queues" / "jobs.yaml"
QUEUES = ROOT / "deploy" / "examples" / "queues" / "queues.yaml"


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    virtual = VirtualFleet(
        load_snapshot(ROOT / "clusters" / "demo.yaml"), setup=realism_setup(pods=False)
    ).start()
    try:
        yield virtual.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        virtual.stop()


def _job(tmp_path: Path, name: str) -> Path:
    found = next(d for d in yaml.safe_load_all(JOBS.read_text()) if d["metadata"]["name"] == name)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(found))
    return path


def test_placed_work_counts_toward_the_queue_limit(
    kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tight = tmp_path / "queues.yaml"
    tight.write_text(QUEUES.read_text().replace("{quota: 8, limit: 16,", "{quota: 8, limit: 8,"))
    base = ["submit", "--kubeconfig", str(kubeconfig), "--queues", str(tight), "-o", "json"]
    assert main([*base, "-f", str(_job(tmp_path, "a-pretrain"))]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [p["workload"]["name"] for p in first["placements"]] == ["a-pretrain"]
    # a second submission: a-pretrain's 8 GPUs, on a member now, fill team-a's limit
    assert main([*base, "-f", str(_job(tmp_path, "a-finetune"))]) == 1
    second = json.loads(capsys.readouterr().out)
    reasons = second["unplaced"][0]["reasons"]
    assert set(reasons) == {"east", "west", "central"}
    for text in reasons.values():
        assert "queue team-a is at its limit for nvidia.com/gpu: 8 in use + 8 requested" in text
    # placer get queues: the same usage, read from the members
    get = ["get", "queues", "--queues", str(tight), "--kubeconfig", str(kubeconfig)]
    assert main([*get, "-o", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["queues"]}
    assert rows["team-a"]["resources"]["nvidia.com/gpu"] == {
        "quota": 8,
        "limit": 8,
        "overQuotaWeight": 1.0,
        "allocated": 8,
        "overQuota": 0,
    }
    assert rows["research"]["resources"]["nvidia.com/gpu"]["allocated"] == 8
    assert rows["team-b"]["resources"]["nvidia.com/gpu"]["allocated"] == 0
    assert main(get) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "QUEUE",
        "PARENT",
        "RESOURCE",
        "QUOTA",
        "LIMIT",
        "ALLOCATED",
        "OVER",
        "QUOTA",
    ]
    assert any(
        line.split()[:6] == ["team-a", "research", "nvidia.com/gpu", "8", "8", "8"]
        for line in lines
    )
    assert main(["get", "queues", "--kubeconfig", str(kubeconfig)]) == 2


def test_a_running_elastic_workload_counts_at_its_running_count(
    kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The elastic PyTorchJob runs a master and 7 workers of 2 GPUs on west (16 GPUs, its
    minimum is 6): its queue is charged 16, so a Job of 8 more GPUs passes the limit of 20."""
    queues = tmp_path / "queues.yaml"
    queues.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "placer.dev/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": "team-a"},
                "spec": {"resources": {"nvidia.com/gpu": {"quota": 8, "limit": 20}}},
            }
        )
    )
    elastic = yaml.safe_load((ROOT / "deploy" / "examples" / "pytorchjob-elastic.yaml").read_text())
    elastic["metadata"]["labels"] = {"placer.dev/queue": "team-a"}
    path = tmp_path / "elastic.yaml"
    path.write_text(yaml.safe_dump(elastic))
    base = ["submit", "--kubeconfig", str(kubeconfig), "--queues", str(queues), "-o", "json"]
    assert main([*base, "-f", str(path)]) == 0
    [placement] = json.loads(capsys.readouterr().out)["placements"]
    assert sum(p["component"] == "worker" for p in placement["pods"]) == 7  # 16 GPUs
    get = ["get", "queues", "--queues", str(queues), "--kubeconfig", str(kubeconfig)]
    assert main([*get, "-o", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["queues"]
    assert row["resources"]["nvidia.com/gpu"]["allocated"] == 16
    assert main([*base, "-f", str(_job(tmp_path, "a-finetune"))]) == 1
    [unplaced] = json.loads(capsys.readouterr().out)["unplaced"]
    for text in unplaced["reasons"].values():
        assert "queue team-a is at its limit for nvidia.com/gpu: 16 in use + 8 requested" in text
