"""Issue 17: `placer submit` dispatches a spread workload's copies — one per cluster, each with
its replicas written, the policy's overrides applied, its own placement record and in-flight
ledger entry — all or nothing; a re-submission is unchanged; `placer delete` removes every
copy. Over HTTPS to the virtual demo fleet (clusters/demo.yaml) through a fleet file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from placer.cli import main
from placer.dispatch.record import PlacementRecord
from placer.dispatch.spread import ANNOTATION_SPREAD
from tests.submit.conftest import ROOT, Fleet

EXAMPLES = ROOT / "deploy" / "examples"
INFERENCE = EXAMPLES / "inference.yaml"
WEIGHTED = EXAMPLES / "spread-policies.yaml"
DUPLICATED = EXAMPLES / "spread-duplicated.yaml"


def fleet_file(fleet: Fleet, tmp_path: Path) -> Path:
    return fleet.virtual.write_fleet_file(tmp_path / "fleet.yaml", kubeconfig=fleet.kubeconfig)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main([*argv, "-o", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def deployments(fleet: Fleet, cluster: str) -> list[dict[str, Any]]:
    return fleet.virtual.server(cluster).store.list("deployments.apps", "default")


def copies(fleet: Fleet) -> dict[str, dict[str, Any]]:
    found = {}
    for cluster in ("east", "west", "central"):
        for obj in deployments(fleet, cluster):
            if obj["metadata"]["name"] == "llm-inference":
                found[cluster] = obj
    return found


def image(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def test_divided_three_two_one_each_copy_with_record_entry_and_override(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=False)
    fleet_path = fleet_file(fleet, tmp_path)
    argv = ("submit", "-f", str(INFERENCE), "--fleet", str(fleet_path), "--policy", str(WEIGHTED))
    code, data, err = run(capsys, *argv)
    assert code == 0, err
    placed = {p["cluster"]: p for p in data["placements"]}
    assert {c: len(p["pods"]) for c, p in placed.items()} == {"east": 3, "west": 2, "central": 1}
    assert {p["state"] for p in placed.values()} == {"dispatched"}
    assert data["summary"]["placed"] == 1
    live = copies(fleet)
    assert {c: o["spec"]["replicas"] for c, o in live.items()} == {
        "east": 3,
        "west": 2,
        "central": 1,
    }
    # the eu cluster's copy: its registry and label; the others as written
    assert image(live["central"]) == "registry.eu.example.com/nvidia/tritonserver:24.05-py3"
    assert live["central"]["metadata"]["labels"]["region"] == "eu"
    assert image(live["east"]) == "nvcr.io/nvidia/tritonserver:24.05-py3"
    assert "region" not in live["east"]["metadata"]["labels"]
    decisions = set()
    for cluster, obj in live.items():
        record = PlacementRecord.from_object(obj)
        assert record is not None and record.cluster == cluster
        decisions.add(record.decision)
        mark = json.loads(obj["metadata"]["annotations"][ANNOTATION_SPREAD])
        assert mark["copies"] == {
            "east": {"deployment": 3},
            "west": {"deployment": 2},
            "central": {"deployment": 1},
        }
        # one in-flight entry per copy, on its own member, with its own pods
        entries = fleet.entries(cluster)
        assert len(entries) == 1
        (text,) = entries[0]["data"].values()
        assert len(json.loads(text)["pods"]) == obj["spec"]["replicas"]
    assert decisions == {data["decision"]}

    # the same file again: every copy is placer's, unchanged; nothing is sent
    code, again, err = run(capsys, *argv)
    assert code == 0, err
    assert {p["cluster"]: p["state"] for p in again["placements"]} == {
        "east": "unchanged",
        "west": "unchanged",
        "central": "unchanged",
    }
    assert {c: o["metadata"]["resourceVersion"] for c, o in copies(fleet).items()} == {
        c: o["metadata"]["resourceVersion"] for c, o in live.items()
    }

    # get and describe show every copy; describe says which copy of how many it is
    code = main(["get", "deployment", "--kubeconfig", str(fleet.kubeconfig), "-o", "json"])
    listed = json.loads(capsys.readouterr().out)
    assert code == 0
    assert sorted(i["cluster"] for i in listed["items"]) == ["central", "east", "west"]
    code = main(["describe", "deployment/llm-inference", "--kubeconfig", str(fleet.kubeconfig)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "exists on several clusters" not in err
    assert out.count("Spread: one of 3 copies (central: 1 deployment; east: 3 deployment; ") == 3

    # placer delete removes every copy and its ledger entry
    code, deleted, err = run(
        capsys, "delete", "-f", str(INFERENCE), "--kubeconfig", str(fleet.kubeconfig)
    )
    assert code == 0, err
    assert sorted(d["cluster"] for d in deleted["items"]) == ["central", "east", "west"]
    assert copies(fleet) == {}
    assert all(fleet.entries(c) == [] for c in ("east", "west", "central"))


def test_duplicated_to_the_selected_clusters_with_a_registry_per_region(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=False)
    code, _, err = run(
        capsys,
        "submit",
        "-f",
        str(INFERENCE),
        "--fleet",
        str(fleet_file(fleet, tmp_path)),
        "--policy",
        str(DUPLICATED),
    )
    assert code == 0, err
    live = copies(fleet)
    assert set(live) == {"east", "central"}  # aws and onprem; not gcp's west
    assert {c: o["spec"]["replicas"] for c, o in live.items()} == {"east": 6, "central": 6}
    assert {c: image(o).split("/")[0] for c, o in live.items()} == {
        "east": "registry.us.example.com",
        "central": "registry.eu.example.com",
    }


def test_a_copy_refused_by_its_member_removes_the_others(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """All or nothing: west refuses its copy (422), so the copies applied on east and central
    are removed again with their ledger entries, and west is not replaced by another cluster
    (the division was made for these three)."""
    fleet = demo_fleet(pods=False)
    fleet_path = fleet_file(fleet, tmp_path)
    fleet.virtual.server("west").faults.fail(
        422,
        verb="patch",
        resource="deployments.apps",
        times=None,
        message='Deployment.apps "llm-inference" is invalid: spec.template: Forbidden',
    )
    code, data, err = run(
        capsys,
        "submit",
        "-f",
        str(INFERENCE),
        "--fleet",
        str(fleet_path),
        "--policy",
        str(WEIGHTED),
    )
    assert code == 1, err
    assert data["placements"] == []
    (unplaced,) = data["unplaced"]
    assert unplaced["state"] == "failed"
    assert "removed again" in unplaced["error"]
    assert "west: patch deployments/default/llm-inference: 422 Invalid" in unplaced["error"]
    assert {c["cluster"]: c["state"] for c in unplaced["copies"]} == {
        "east": "failed",
        "west": "failed",
        "central": "failed",
    }
    assert copies(fleet) == {}
    assert all(fleet.entries(c) == [] for c in ("east", "west", "central"))


def test_divided_by_what_fits_on_the_free_nodes(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """dynamicWeight: AvailableReplicas, at most 4 per cluster: in proportion to the 1-GPU
    replicas each cluster's free nodes hold, node by node (east 10, west 16, central 12);
    with west's nodes cordoned, none fit there and the others take its share."""
    fleet = demo_fleet(pods=False)
    dynamic = EXAMPLES / "spread-dynamic.yaml"
    argv = ("-f", str(INFERENCE), "--fleet", str(fleet_file(fleet, tmp_path)))
    code, data, err = run(capsys, "plan", *argv, "--policy", str(dynamic))
    assert code == 0, err
    assert {p["cluster"]: len(p["pods"]) for p in data["placements"]} == {
        "east": 2,
        "west": 2,
        "central": 2,
    }
    # west's nodes cordoned: nothing fits there now, so its share goes to the others
    # (3/3, within maxReplicasPerCluster 4) and no copy is sent to west
    store = fleet.virtual.server("west").store
    for node in store.list("nodes"):
        node["spec"]["unschedulable"] = True
        store.replace(node)
    code, data, err = run(capsys, "submit", *argv, "--policy", str(dynamic))
    assert code == 0, err
    assert {c: o["spec"]["replicas"] for c, o in copies(fleet).items()} == {
        "east": 3,
        "central": 3,
    }
    assert {p["cluster"]: len(p["pods"]) for p in data["placements"]} == {
        "east": 3,
        "central": 3,
    }


def test_reading_a_copys_mark_loads_neither_solver_nor_client() -> None:
    """`placer get`/`describe` read the spread mark: that import stays light."""
    import subprocess
    import sys

    probe = (
        "import sys, placer.inventory.describe, placer.dispatch.spread\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}"
        " & {'numpy', 'ortools', 'pandas', 'kubernetes'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
