"""``placer plan`` spreading a Deployment over the virtual fleet (gathered over HTTPS): divided
3/2/1 by weight, by what fits, duplicated with a registry per region, a lost cluster's share
divided over the others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placer.cli import main
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "clusters" / "demo.yaml"
EXAMPLES = ROOT / "deploy" / "examples"
INFERENCE = str(EXAMPLES / "inference.yaml")


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main(["plan", "-f", INFERENCE, *argv, "-o", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out else None


def shares(data: Any) -> dict[str, int]:
    return {p["cluster"]: len(p["pods"]) for p in data["placements"]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("spread")
    with VirtualFleet(load_snapshot(DEMO)) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp / "kubeconfig")
        yield virtual, virtual.write_fleet_file(tmp / "fleet.yaml", kubeconfig=kubeconfig)


def test_divided_three_two_one_with_an_override_per_region(
    served: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, fleet_file = served
    policy = str(EXAMPLES / "spread-policies.yaml")
    code, data = plan(capsys, "--fleet", str(fleet_file), "--policy", policy)
    assert code == 0
    assert shares(data) == {"east": 3, "west": 2, "central": 1}
    assert {p["workload"]["name"] for p in data["placements"]} == {"llm-inference"}
    copies = {p["cluster"]: p["copy"] for p in data["placements"]}
    assert copies["east"]["replicas"] == {"deployment": 3}
    assert copies["east"]["manifest"]["spec"]["replicas"] == 3
    assert copies["central"]["manifest"]["spec"]["replicas"] == 1
    images = {
        c: copy["manifest"]["spec"]["template"]["spec"]["containers"][0]["image"]
        for c, copy in copies.items()
    }
    assert images["central"] == "registry.eu.example.com/nvidia/tritonserver:24.05-py3"
    assert images["east"] == "nvcr.io/nvidia/tritonserver:24.05-py3"
    assert copies["central"]["manifest"]["metadata"]["labels"]["region"] == "eu"
    assert data["summary"]["placed"] == 1


def test_duplicated_to_the_selected_clusters(
    served: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, fleet_file = served
    policy = str(EXAMPLES / "spread-duplicated.yaml")
    code, data = plan(capsys, "--fleet", str(fleet_file), "--policy", policy)
    assert code == 0
    assert shares(data) == {"east": 6, "central": 6}  # aws and onprem, not gcp's west
    registries = {
        p["cluster"]: p["copy"]["manifest"]["spec"]["template"]["spec"]["containers"][0][
            "image"
        ].split("/")[0]
        for p in data["placements"]
    }
    assert registries == {"east": "registry.us.example.com", "central": "registry.eu.example.com"}


def test_dynamic_division_and_a_lost_cluster(
    served: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    virtual, fleet_file = served
    policy = str(EXAMPLES / "spread-dynamic.yaml")
    code, data = plan(capsys, "--fleet", str(fleet_file), "--policy", policy)
    assert code == 0
    # in proportion to the 1-GPU replicas that fit: east 10, west 16, central 12
    assert shares(data) == {"east": 2, "west": 2, "central": 2}
    # west stops answering: its share goes to the others, no replica twice, none lost
    virtual.server("west").stop()
    code, data = plan(capsys, "--fleet", str(fleet_file), "--policy", policy)
    assert code == 0
    assert shares(data) == {"east": 3, "central": 3}
    pods = [(p["cluster"], pod["index"]) for p in data["placements"] for pod in p["pods"]]
    assert len(pods) == len(set(pods)) == 6


def test_snapshot_free_submit_refuses_spread_policies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A division needs the members' capacity: submit --snapshot-free refuses a spread
    workload rather than place it whole (nothing is contacted)."""
    policy = str(EXAMPLES / "spread-policies.yaml")
    code = main(
        [
            *("submit", "-f", INFERENCE, "--policy", policy, "--snapshot-free"),
            *("--kubeconfig", "/nonexistent/kc"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "Deployment/default/llm-inference: its policy spreads it over clusters" in err
    assert "cannot be combined with --snapshot-free yet" in err


def test_the_controller_takes_spread_policies() -> None:
    """A hub PlacementPolicy with replicaScheduling is used (the controller places spread
    workloads: tests/controller/test_spread.py)."""
    import yaml

    from placer.controller.hubconfig import policies_from_hub

    policy = EXAMPLES / "spread-policies.yaml"
    hub = policies_from_hub([yaml.safe_load(policy.read_text())])
    assert [p.name for p in hub.policies] == ["serving-weighted"]
    assert hub.problems == {}
