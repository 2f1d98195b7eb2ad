"""``placer plan`` end to end: files in, decision out (text and JSON), errors as messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "examples" / "jobset-demo.yaml")
FLEET = str(ROOT / "clusters" / "demo.yaml")


def test_plan_needs_a_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-f", DEMO]) == 2
    assert "give the fleet's capacity with --snapshot FILE" in capsys.readouterr().err


def test_a_bad_policy_is_reported_with_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: placer.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\n"
        "spec: {objective: fastest}\n"
    )
    assert main(["plan", "-f", DEMO, "--snapshot", FLEET, "--policy", str(policy)]) == 1
    assert f"error: {policy}: spec.objective: 'fastest' is not one of" in capsys.readouterr().err


def test_plan_places_the_demo_jobset_on_central(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("placer.definitions")
    assert main(["plan", "-f", DEMO, "--snapshot", FLEET, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["cluster"] for p in data["placements"]] == ["central"]
    assert len(data["placements"][0]["pods"]) == 3
    refused = data["placements"][0]["refused"]
    assert refused["east"] == "total free GPUs too low (needs 12, 10 free)"
    assert "largest free block 2" in refused["west"]
    assert main(["plan", "-f", DEMO, "--snapshot", FLEET]) == 0
    text = capsys.readouterr().out
    assert "JobSet/default/demo -> central\n  east  refused: total free GPUs too low" in text
    # first-fit picks west by its totals and finds no node there: unplaced, exit 1
    assert main(["plan", "-f", DEMO, "--snapshot", FLEET, "--solver", "first-fit"]) == 1
    out = capsys.readouterr().out
    assert "JobSet/default/demo: not placed" in out
    assert "first-fit chose this cluster on cluster totals, but" in out
