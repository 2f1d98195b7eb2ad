"""Issue 6 acceptance: `placer submit` on three loopback clusters reached through kubeconfigs.

The fleet is the demo fleet served virtually (clusters/demo.yaml): the seed JobSet (3 pods x 4
GPUs) fits only `central`. Realism is off unless a test needs pods, so that placed workloads
stay invisible to capacity gathering and only the in-flight ledger protects them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from placer.cli import main
from placer.dispatch.record import LABEL_PLACED_BY, PlacementRecord
from placer.dispatch.submit import gather_charged
from placer.fleet import fleet_from_kubeconfigs, member_clients
from placer.testing import AdmissionRequest, StatusError
from tests.submit.conftest import SEED, Fleet, renamed, submit


def test_seed_lands_in_central_with_its_record_and_refusals(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = demo_fleet()
    code, data, _ = submit(capsys, fleet, SEED)
    assert code == 0
    [placement] = data["placements"]
    assert placement["cluster"] == "central"
    assert placement["dispatched"] is True and placement["error"] is None
    assert set(placement["refused"]) == {"east", "west"}
    assert "total free GPUs too low" in placement["refused"]["east"]
    [obj] = fleet.jobsets("central")
    record = PlacementRecord.from_object(obj)
    assert record is not None and record.cluster == "central"
    assert record.decision == data["decision"]
    assert obj["metadata"]["labels"][LABEL_PLACED_BY] == "placer"
    assert sorted(n for nodes in record.plan.values() for n in nodes) == [
        "central-l40s-0",
        "central-l40s-1",
        "central-l40s-2",
    ]
    assert [m["manager"] for m in obj["metadata"]["managedFields"]] == ["placer"]
    assert fleet.jobsets("east") == [] and fleet.jobsets("west") == []
    assert len(fleet.entries("central")) == 1  # pods not visible yet: in flight


def test_second_identical_jobset_is_refused_by_the_ledger_and_resubmission_changes_nothing(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=False)
    code, first, _ = submit(capsys, fleet, SEED)
    assert code == 0 and first["placements"][0]["cluster"] == "central"
    version = fleet.virtual.server("central").store.resource_version

    code, second, _err = submit(capsys, fleet, renamed(tmp_path, "demo-2"))
    assert code == 1
    assert second["placements"] == []
    [unplaced] = second["unplaced"]
    assert unplaced["workload"]["name"] == "demo-2" and unplaced["dispatched"] is False
    # the pods of the first are not visible, only its in-flight entry holds central's GPUs
    assert "largest free block 0" in unplaced["reasons"]["central"]
    assert [o["metadata"]["name"] for o in fleet.jobsets("central")] == ["demo"]

    code, again, _ = submit(capsys, fleet, SEED)
    assert code == 0
    [placement] = again["placements"]
    assert placement["state"] == "unchanged" and placement["dispatched"] is False
    assert placement["cluster"] == "central"
    assert placement["record"]["decision"] == first["decision"]
    # nothing was written anywhere
    assert fleet.virtual.server("central").store.resource_version == version
    assert fleet.jobsets("east") == [] and fleet.jobsets("west") == []


def test_with_pods_visible_the_second_goes_nowhere_and_the_entry_is_retired(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet(pods=True)
    assert submit(capsys, fleet, SEED)[0] == 0
    pods = fleet.virtual.server("central").store.list("pods", "default")
    assert sorted(p["spec"]["nodeName"] for p in pods) == [
        "central-l40s-0",
        "central-l40s-1",
        "central-l40s-2",
    ]
    code, second, _ = submit(capsys, fleet, renamed(tmp_path, "demo-2"))
    assert code == 1 and second["placements"] == []
    # every pod observed bound: the entry no longer counts (no double count); it stays stored
    # for a while, so that a concurrent decision reading the ledger back still finds it
    assert "largest free block 0" in second["unplaced"][0]["reasons"]["central"]
    config = fleet_from_kubeconfigs([fleet.kubeconfig])
    with member_clients(config) as clients:
        charged, ledger, _, _ = gather_charged(config, clients)
    assert charged.cluster("central").free()["nvidia.com/gpu"] == 0
    [entry] = ledger.entries()
    assert entry.workload.name == "demo" and entry.placement.pods == ()
    assert len(fleet.entries("central")) == 1


def test_chosen_cluster_failing_with_422_sends_it_to_the_next_with_nothing_left_behind(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet()
    small = renamed(tmp_path, "small", namespace="team-a", gpus=2)  # fits every cluster
    code, dry, _ = submit(capsys, fleet, small, extra=("--dry-run",))
    assert code == 0
    chosen = dry["placements"][0]["cluster"]
    assert dry["placements"][0]["state"] == "dry-run"

    def deny(request: AdmissionRequest) -> None:
        if request.resource.kind == "JobSet" and request.operation == "CREATE":
            raise StatusError(
                422,
                'JobSet.jobset.x-k8s.io "small" is invalid: spec.replicatedJobs[0].name: '
                "Invalid value: must be unique",
                reason="Invalid",
            )

    fleet.virtual.server(chosen).store.add_admission(deny)
    code, data, _ = submit(capsys, fleet, small)
    assert code == 0
    [placement] = data["placements"]
    assert placement["cluster"] != chosen and placement["dispatched"] is True
    [attempt] = placement["attempts"]
    assert attempt["cluster"] == chosen and attempt["code"] == 422
    assert attempt["reason"] == "Invalid"
    assert "must be unique" in attempt["error"]
    # nothing left on the refusing cluster: no object, no ledger entry, no namespace placer made
    assert fleet.jobsets(chosen) == []
    assert fleet.entries(chosen) == []
    assert "team-a" not in fleet.namespaces(chosen)
    # and the workload landed in team-a on the new cluster, nowhere else
    [obj] = fleet.jobsets(placement["cluster"])
    assert obj["metadata"]["namespace"] == "team-a"
    assert "team-a" in fleet.namespaces(placement["cluster"])


def test_a_422_everywhere_appears_in_the_error_with_its_reason(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = demo_fleet()
    for name in ("east", "west", "central"):
        fleet.virtual.server(name).faults.fail(
            422,
            verb="patch",
            resource="jobsets.jobset.x-k8s.io",
            times=None,
            message='JobSet.jobset.x-k8s.io "demo" is invalid: spec.suspend: Forbidden',
        )
    code = main(["submit", "--kubeconfig", str(fleet.kubeconfig), "-f", str(SEED)])
    out, _err = capsys.readouterr()
    assert code == 1
    assert "JobSet/default/demo: not placed" in out
    assert (
        "  central: dispatch failed: patch jobsets/default/demo: 422 Invalid: "
        'JobSet.jobset.x-k8s.io "demo" is invalid: spec.suspend: Forbidden'
    ) in out
    # the other clusters keep their capacity reasons
    assert "east     total free GPUs too low (needs 12, 10 free)" in out
    assert fleet.jobsets("central") == [] and fleet.entries("central") == []


def test_namespace_team_a_and_no_credential_in_any_output_or_log(
    demo_fleet: Callable[..., Fleet],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    fleet = demo_fleet(pods=True)
    manifest = renamed(tmp_path, "train", namespace="team-a")
    with caplog.at_level(logging.DEBUG):
        code = main(
            ["submit", "--kubeconfig", str(fleet.kubeconfig), "-f", str(manifest), "--wait=20s"]
        )
        out, err = capsys.readouterr()
        assert code == 0
        assert "JobSet/team-a/train on central: Running" in err
        fleet.virtual.server("west").stop()  # an unreachable cluster's error text too
        code = main(["submit", "--kubeconfig", str(fleet.kubeconfig), "-f", str(manifest)])
        out2, err2 = capsys.readouterr()
        code = main(["get", "--kubeconfig", str(fleet.kubeconfig), "-A"])
        out3, err3 = capsys.readouterr()
    assert "west" in err2  # the warning names the unreachable cluster
    [obj] = fleet.jobsets("central", "team-a")
    assert obj["metadata"]["namespace"] == "team-a"
    assert fleet.jobsets("central", "default") == []
    assert all(fleet.jobsets(c) == [] for c in ("east",))
    token = fleet.token()
    texts = [out, err, out2, err2, out3, err3, caplog.text]
    assert all(token not in text for text in texts)
    ca = fleet.virtual.server("central").ca_pem.decode().splitlines()[1]
    assert all(ca not in text for text in texts)


def test_snapshot_free_follows_the_policy_and_writes_no_ledger_entry(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = demo_fleet()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: placer.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: prefer-west}\n"
        "spec: {preferredClusters: [west, central]}\n"
    )
    code, data, _ = submit(capsys, fleet, SEED, extra=("--snapshot-free", "--policy", str(policy)))
    assert code == 0
    [placement] = data["placements"]
    # no capacity is read: the policy's first choice, although no west node has 4 free GPUs
    assert placement["cluster"] == "west" and placement["dispatched"] is True
    assert data["summary"]["solver"] == "snapshot-free"
    assert fleet.entries("west") == []
    [obj] = fleet.jobsets("west")
    record = PlacementRecord.from_object(obj)
    assert record is not None and record.plan == {}
    fleet.virtual.server("west").stop()
    code, data, err = submit(capsys, fleet, renamed(tmp_path, "other"), extra=("--snapshot-free",))
    # without a policy: the first reachable cluster in fleet order; west's probe failed
    assert code == 0 and data["placements"][0]["cluster"] == "east"
    assert "warning: cluster west: get version: unreachable" in err


def test_wait_times_out_when_the_workload_never_runs(
    demo_fleet: Callable[..., Fleet], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = demo_fleet(pods=False)  # nothing plays the JobSet controller: no status
    code = main(["submit", "--kubeconfig", str(fleet.kubeconfig), "-f", str(SEED), "--wait=1"])
    _, err = capsys.readouterr()
    assert code == 1
    assert "JobSet/default/demo on central: Undefined" in err
    assert "error: JobSet/default/demo on central: timed out after 1s" in err
