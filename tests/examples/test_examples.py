"""The shipped examples stay true: every workload decomposes and places on the demo fleet, the
example policy and fleet file load, and the policy changes where things go as its comments say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.cli import main
from placer.fleet.config import load_fleet_file
from placer.policy import load_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEMO_FLEET = ROOT / "clusters" / "demo.yaml"
POLICY = ROOT / "deploy" / "examples" / "placementpolicy.yaml"
FLEET_FILE = ROOT / "deploy" / "examples" / "fleet.yaml"


def plan(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    # A directory, as `kubectl apply -f DIR` takes one: every example in it.
    code = main(["plan", "-f", str(EXAMPLES), "--snapshot", str(DEMO_FLEET), "-o", "json", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    data: dict[str, object] = json.loads(out)
    return data


def clusters_by_name(data: dict[str, object]) -> dict[str, str]:
    placements = data["placements"]
    assert isinstance(placements, list)
    return {p["workload"]["name"]: p["cluster"] for p in placements}


def test_every_example_workload_places_on_the_demo_fleet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    placed = clusters_by_name(plan(capsys))
    assert placed["demo"] == "central"  # the seed: only central has three 4-GPU blocks
    # The fine-tuning job selects A100 nodes: only west has them.
    assert placed["llama-finetune"] == "west"
    assert set(placed) == {"demo", "llama-finetune", "batch-inference", "llm-serving"}


def test_describe_reads_a_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "-f", str(EXAMPLES), "-o", "json"]) == 0
    described = json.loads(capsys.readouterr().out)
    names = [item["workload"]["name"] for item in described]
    # Files in sorted order, documents in file order.
    assert names == ["demo", "llm-serving", "llama-finetune", "batch-inference"]


def test_the_example_policy_loads_and_steers(capsys: pytest.CaptureFixture[str]) -> None:
    policies = load_policies(POLICY)
    assert [p.name for p in policies] == ["training-on-prem-first", "default"]
    assert policies[0].preferred_clusters == ("central", "east")
    placed = clusters_by_name(plan(capsys, "--policy", str(POLICY)))
    # Under the default policy (spread, cheapest first) the seed still fits only on central,
    # and every other example still has a home.
    assert placed["demo"] == "central"
    assert len(placed) == 4


def test_the_example_fleet_file_loads(tmp_path: Path) -> None:
    config = load_fleet_file(FLEET_FILE, environ={})
    assert config.names == ("east", "west", "central")
    east, _, central = config.clusters
    assert east.context == "east-admin" and east.timeout == 20
    assert central.labels["provider"] == "onprem"
    assert [t.key for t in central.taints] == ["placer.dev/reserved"]
    # its accelerator section parses, and replaces only the keys it gives
    assert config.accelerators.shared_resources[0].replicas == 4
    assert config.accelerators.device_class("gpu.amd.com") is not None
    assert config.accelerators.fractions  # not given: placer's defaults
    # The kubeconfigs it names do not ship: each cluster says so, naming the file.
    assert "kubeconfigs/east.yaml" in east.problem
