"""Issue 13, the lifecycle: `placer delete -f FILE | TYPE/NAME` finds the copy across the fleet and
deletes it — only placer's own unless --force — with its ledger entry and the namespace placer
created for it once empty; exit 3 when it is nowhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from tests.submit.conftest import ROOT, SEED, Fleet, renamed, submit


def delete(
    capsys: pytest.CaptureFixture[str], fleet: Fleet, *args: str
) -> tuple[int, dict[str, Any], str]:
    code = main(["delete", "--kubeconfig", str(fleet.kubeconfig), "-o", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def test_delete_by_type_and_name_as_a_process(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = demo_fleet(pods=True)
    assert submit(capsys, fleet, SEED)[0] == 0
    assert len(fleet.entries("central")) == 1
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "placer",
            "delete",
            "jobset/demo",
            "--kubeconfig",
            str(fleet.kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "JobSet/default/demo on central: deleted"
    assert fleet.jobsets("central") == []
    assert fleet.entries("central") == []
    assert "default" in fleet.namespaces("central")  # not placer's: kept


def test_delete_by_file_retires_the_namespace_placer_made_once_empty(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    alone = renamed(tmp_path, "alone", namespace="team-x")
    shared = renamed(tmp_path, "shared", namespace="team-y", gpus=2)
    assert submit(capsys, fleet, alone)[0] == 0
    assert submit(capsys, fleet, shared)[0] == 0
    clusters = {
        name: cluster
        for cluster in ("east", "west", "central")
        for name in ("alone", "shared")
        if any(o["metadata"]["name"] == name for o in fleet.jobsets(cluster))
    }
    # the user keeps a ConfigMap of their own next to "shared"
    fleet.virtual.server(clusters["shared"]).store.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "team-y"},
            "data": {"a": "b"},
        }
    )
    code, data, _ = delete(capsys, fleet, "-f", str(alone), "-f", str(shared), "--wait=60s")
    assert code == 0, data
    assert [(i["workload"]["name"], i["state"]) for i in data["items"]] == [
        ("alone", "deleted"),
        ("shared", "deleted"),
    ]
    [first, second] = data["items"]
    assert "namespace team-x deleted (placer created it; nothing else in it)" in first["notes"]
    assert second["notes"] == []
    assert "team-x" not in fleet.namespaces(clusters["alone"])
    assert "team-y" in fleet.namespaces(clusters["shared"])
    for cluster in ("east", "west", "central"):
        assert fleet.jobsets(cluster) == []
        assert fleet.virtual.server(cluster).store.list("pods", "team-x") == []


def test_not_found_anywhere_is_exit_3(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = demo_fleet()
    code, data, _ = delete(capsys, fleet, "jobset/nothing", "-n", "team-z")
    assert code == 3
    [item] = data["items"]
    assert item["state"] == "not-found" and item["workload"]["namespace"] == "team-z"
    code = main(["delete", "lws/nothing", "--kubeconfig", str(fleet.kubeconfig)])
    assert code == 3
    assert "LeaderWorkerSet/default/nothing: not found on any reachable cluster" in (
        capsys.readouterr().err
    )


def test_an_object_placer_did_not_place_is_deleted_only_with_force(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = demo_fleet()
    theirs: dict[str, Any] = yaml.safe_load(SEED.read_text())
    fleet.virtual.server("west").store.put(theirs)
    code, data, _ = delete(capsys, fleet, "-f", str(SEED))
    assert code == 1
    [item] = data["items"]
    assert item["state"] == "refused" and item["cluster"] == "west"
    assert "no placer placement record" in item["error"] and "--force" in item["error"]
    assert len(fleet.jobsets("west")) == 1
    code, data, _ = delete(capsys, fleet, "-f", str(SEED), "--force")
    assert code == 0 and data["items"][0]["state"] == "deleted"
    assert fleet.jobsets("west") == []


def test_a_controller_copy_is_deleted_on_the_hub(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = demo_fleet()
    assert submit(capsys, fleet, SEED)[0] == 0
    [obj] = fleet.jobsets("central")
    obj["metadata"]["labels"]["placer.dev/hub"] = "hub-1"
    fleet.virtual.server("central").store.put(obj)
    code, data, _ = delete(capsys, fleet, "jobset/demo")
    assert code == 1
    assert "placement controller of hub hub-1" in data["items"][0]["error"]
    assert len(fleet.jobsets("central")) == 1


def test_usage_errors(demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]) -> None:
    fleet = demo_fleet()
    assert main(["delete", "--kubeconfig", str(fleet.kubeconfig)]) == 2
    assert main(["delete", "jobset", "--kubeconfig", str(fleet.kubeconfig)]) == 2
    assert main(["delete", "nosuchkind/x", "--kubeconfig", str(fleet.kubeconfig)]) == 4
    capsys.readouterr()
