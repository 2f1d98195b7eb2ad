"""Issue 15: gangs handed to each member's scheduler, on the virtual demo fleet over HTTPS.

`placer submit --fleet FILE` where the fleet file names each member's scheduler. The seed JobSet
(one gang of 3 pods x 4 GPUs) fits only `central`; what lands there is checked against the field
names of each project's API: KAI (`schedulerName: kai-scheduler`, label `kai.scheduler/queue`,
`run.ai/v1alpha1` Karta), Kueue (label `kueue.x-k8s.io/queue-name`, created suspended), Volcano
(`scheduling.volcano.sh/v1beta1` PodGroup, annotation `scheduling.k8s.io/group-name`) and the
scheduler-plugins coscheduling plugin (`scheduling.x-k8s.io/v1alpha1` PodGroup, label
`scheduling.x-k8s.io/pod-group`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.snapshot import load_snapshot
from placer.testing import Store
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "jobset-demo.yaml"
JOBSETS = "jobsets.jobset.x-k8s.io"
VOLCANO_GROUPS = "podgroups.scheduling.volcano.sh"
COSCHEDULING_GROUPS = "podgroups.scheduling.x-k8s.io"
KARTAS = "kartas.run.ai"


class Members:
    def __init__(self, virtual: VirtualFleet, kubeconfig: Path, tmp_path: Path) -> None:
        self.virtual = virtual
        self.kubeconfig = kubeconfig
        self.tmp_path = tmp_path

    def store(self, cluster: str) -> Store:
        return self.virtual.server(cluster).store

    def fleet_file(self, scheduler: Any, *, others: Any = None) -> Path:
        """A fleet file: ``central`` runs ``scheduler``, east and west ``others``."""
        clusters = []
        for name in ("east", "west", "central"):
            entry: dict[str, Any] = {"name": name, "kubeconfig": str(self.kubeconfig)}
            chosen = scheduler if name == "central" else others
            if chosen is not None:
                entry["scheduler"] = chosen
            clusters.append(entry)
        path = self.tmp_path / "fleet.yaml"
        path.write_text(yaml.safe_dump({"clusters": clusters}))
        return path

    def submit(
        self, capsys: pytest.CaptureFixture[str], fleet: Path, *extra: str, manifest: Path = SEED
    ) -> tuple[int, dict[str, Any], str]:
        code = main(["submit", "--fleet", str(fleet), "-f", str(manifest), "-o", "json", *extra])
        out, err = capsys.readouterr()
        return code, json.loads(out), err


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    # the virtual members serve the schedulers' kinds, as members where they are installed
    with VirtualFleet(snapshot, setup=realism_setup(pods=False)) as virtual:
        yield Members(virtual, virtual.write_kubeconfig(tmp_path / "kc"), tmp_path)


def templates(jobset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        job["name"]: job["template"]["spec"]["template"] for job in jobset["spec"]["replicatedJobs"]
    }


def test_volcano_gets_one_podgroup_per_gang_owned_by_the_workload(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = members.fleet_file({"name": "volcano", "defaultQueue": "research"})
    code, data, err = members.submit(capsys, fleet)
    assert code == 0, err
    [placement] = data["placements"]
    assert placement["cluster"] == "central"
    [jobset] = members.store("central").list(JOBSETS)
    [group] = members.store("central").list(VOLCANO_GROUPS, "default")
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["metadata"]["name"] == "demo"
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "24", "memory": "192Gi", "nvidia.com/gpu": "12"},
        "queue": "research",
    }
    [owner] = group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "JobSet",
        "demo",
        jobset["metadata"]["uid"],
    )
    for template in templates(jobset).values():
        assert template["spec"]["schedulerName"] == "volcano"
        assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "demo"
    recorded = json.loads(jobset["metadata"]["annotations"]["placer.dev/handoff"])
    assert recorded["scheduler"] == "volcano" and recorded["queue"] == "research"
    assert recorded["podGroups"][0]["minMember"] == 3
    assert placement["handoff"] == recorded
    # no gang warning: the member enforces gangs
    assert "gangs are not enforced" not in err
    # deleting the workload deletes its PodGroup (owner reference, garbage collection)
    members.store("central").delete(JOBSETS, "demo", "default")
    assert members.store("central").list(VOLCANO_GROUPS, "default") == []


def test_coscheduling_podgroup_and_pod_label(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = members.fleet_file({"name": "coscheduling", "scheduleTimeoutSeconds": 60})
    code, _, err = members.submit(capsys, fleet)
    assert code == 0, err
    [jobset] = members.store("central").list(JOBSETS)
    [group] = members.store("central").list(COSCHEDULING_GROUPS, "default")
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["scheduleTimeoutSeconds"] == 60
    assert group["spec"]["minResources"]["nvidia.com/gpu"] == "12"
    assert "queue" not in group["spec"]
    for template in templates(jobset).values():
        assert template["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert template["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "demo"
    assert members.store("central").list(VOLCANO_GROUPS, "default") == []


def test_kai_queue_label_scheduler_name_and_karta(
    members: Members, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = yaml.safe_load(SEED.read_text())
    manifest["metadata"]["labels"] = {"placer.dev/queue": "team-a"}
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump(manifest))
    fleet = members.fleet_file({"name": "kai", "queues": {"team-a": "kai-team-a"}})
    code, data, err = members.submit(capsys, fleet, manifest=path)
    assert code == 0, err
    [jobset] = members.store("central").list(JOBSETS)
    assert jobset["metadata"]["labels"]["kai.scheduler/queue"] == "kai-team-a"
    for template in templates(jobset).values():
        assert template["spec"]["schedulerName"] == "kai-scheduler"
        assert template["metadata"]["labels"]["kai.scheduler/queue"] == "kai-team-a"
    [karta] = members.store("central").list(KARTAS)
    assert karta["metadata"]["name"] == "jobset-x-k8s-io-jobset-v1alpha2"
    root = karta["spec"]["structureDefinition"]["rootComponent"]
    assert root["kind"] == {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}
    assert karta["spec"]["optimizationInstructions"]["gangScheduling"]["podGroups"]
    notes = data["placements"][0]["notes"]
    assert any("Karta jobset-x-k8s-io-jobset-v1alpha2 created" in n for n in notes)
    # a second workload of the kind finds the Karta there and creates none
    manifest["metadata"]["name"] = "demo-2"
    manifest["spec"]["replicatedJobs"] = manifest["spec"]["replicatedJobs"][:1]
    path.write_text(yaml.safe_dump(manifest))
    code, data, err = members.submit(capsys, fleet, manifest=path)
    assert code == 0, err
    assert len(members.store("central").list(KARTAS)) == 1
    [placement] = data["placements"]
    if placement["cluster"] == "central":
        assert any("describes jobset.x-k8s.io/v1alpha2 JobSet" in n for n in placement["notes"])


def bare_setup(cluster: Any, server: Any) -> None:
    """A member serving JobSets but none of the schedulers' kinds."""
    server.store.register_resource("jobset.x-k8s.io", "v1alpha2", "JobSet")


def notes_on_a_bare_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scheduler: str
) -> list[str]:
    """The notes of a submission to a member serving none of the schedulers' kinds."""
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    with VirtualFleet(snapshot, setup=bare_setup) as virtual:
        members = Members(virtual, virtual.write_kubeconfig(tmp_path / "bare-kc"), tmp_path)
        code, data, err = members.submit(capsys, members.fleet_file(scheduler))
        assert code == 0, err
        notes: list[str] = data["placements"][0]["notes"]
        return notes


def test_kai_says_why_no_karta_when_the_member_lacks_the_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = notes_on_a_bare_member(tmp_path, capsys, "kai")
    assert any("does not serve run.ai/v1alpha1 Karta" in n for n in notes)


def test_kueue_queue_name_label_and_created_suspended(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = members.fleet_file({"name": "kueue", "defaultQueue": "lq-train"})
    code, _, err = members.submit(capsys, fleet)
    assert code == 0, err
    [jobset] = members.store("central").list(JOBSETS)
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq-train"
    assert jobset["spec"]["suspend"] is True
    for template in templates(jobset).values():
        assert "schedulerName" not in template["spec"]
    assert json.loads(jobset["metadata"]["annotations"]["placer.dev/handoff"]) == {
        "queue": "lq-train",
        "scheduler": "kueue",
        "suspended": True,
    }


def test_kueue_warns_when_the_local_queue_is_not_in_the_namespace(
    members: Members, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = members.fleet_file({"name": "kueue", "defaultQueue": "lq-train"})
    code, data, err = members.submit(capsys, fleet, "--dry-run")
    assert code == 0, err
    warning = (
        "scheduler kueue: warning: LocalQueue lq-train not found in namespace default on the "
        "member: Kueue leaves the workload suspended (inadmissible) until it exists"
    )
    assert any(warning in n for n in data["placements"][0]["notes"])
    # once the LocalQueue is there (kubectl-style apply of Kueue's object), no warning
    members.store("central").create(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "lq-train", "namespace": "default"},
            "spec": {"clusterQueue": "cluster-queue"},
        }
    )
    code, data, err = members.submit(capsys, fleet)
    assert code == 0, err
    assert not any("LocalQueue lq-train not" in n for n in data["placements"][0]["notes"])
    # a member without Kueue: said so
    notes = notes_on_a_bare_member(tmp_path, capsys, "kueue")
    assert any("the member does not serve kueue.x-k8s.io LocalQueue" in n for n in notes)


def test_default_adds_nothing_and_warns_once(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, err = members.submit(capsys, members.fleet_file(None))
    assert code == 0, err
    [jobset] = members.store("central").list(JOBSETS)
    assert "placer.dev/handoff" not in jobset["metadata"].get("annotations", {})
    for template in templates(jobset).values():
        assert "schedulerName" not in template["spec"]
    assert members.store("central").list(VOLCANO_GROUPS, "default") == []
    assert err.count("gangs are not enforced") == 1
    assert "central: JobSet/default/demo" in err
    assert "handoff" not in data["placements"][0]


def test_dry_run_shows_the_podgroup_and_writes_nothing(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = members.fleet_file("volcano")
    code, data, err = members.submit(capsys, fleet, "--dry-run")
    assert code == 0, err
    [placement] = data["placements"]
    assert placement["state"] == "dry-run"
    assert placement["handoff"]["podGroups"] == [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "name": "demo",
            "minMember": 3,
            "minResources": {"cpu": "24", "memory": "192Gi", "nvidia.com/gpu": "12"},
        }
    ]
    assert any(
        "PodGroup scheduling.volcano.sh/v1beta1 demo (minMember 3" in n for n in placement["notes"]
    )
    assert members.store("central").list(VOLCANO_GROUPS, "default") == []
    assert members.store("central").list(JOBSETS) == []
    # the text report shows the same lines
    assert main(["submit", "--fleet", str(fleet), "-f", str(SEED), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "note: scheduler volcano: PodGroup scheduling.volcano.sh/v1beta1 demo" in out
    assert "scheduling.k8s.io/group-name=demo" in out


def test_a_volcano_member_without_the_podgroup_kind_fails_before_the_workload(
    members: Members, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    with VirtualFleet(snapshot, setup=bare_setup) as bare:
        other = Members(bare, bare.write_kubeconfig(tmp_path / "kc2"), tmp_path)
        code, data, _ = other.submit(capsys, other.fleet_file("volcano"))
        assert code == 1
        [unplaced] = data["unplaced"]
        [attempt] = unplaced["attempts"]
        assert attempt["cluster"] == "central" and attempt["code"] == 404
        assert "scheduling.volcano.sh" in attempt["error"]
        # nothing half-dispatched: no JobSet, no claim or ledger entry left with it
        assert bare.server("central").store.list(JOBSETS) == []


def test_pin_nodes_writes_the_node_plan_as_required_affinity(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = members.submit(capsys, members.fleet_file(None), "--pin-nodes")
    assert code == 0, err
    [jobset] = members.store("central").list(JOBSETS)
    plan = json.loads(jobset["metadata"]["annotations"]["placer.dev/pod-nodes"])
    for name, template in templates(jobset).items():
        terms = template["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert terms == [
            {
                "matchFields": [
                    {
                        "key": "metadata.name",
                        "operator": "In",
                        "values": sorted(set(plan[f"replicatedjob/{name}"])),
                    }
                ]
            }
        ]
    assert json.loads(jobset["metadata"]["annotations"]["placer.dev/handoff"]) == {
        "pinnedNodes": True,
        "scheduler": "default",
    }


def test_a_policy_overrides_the_fleet_files_scheduler(
    members: Members, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "placer.dev/v1alpha1",
                "kind": "PlacementPolicy",
                "metadata": {"name": "gangs"},
                "spec": {"scheduler": "coscheduling"},
            }
        )
    )
    fleet = members.fleet_file("volcano")
    code, _, err = members.submit(capsys, fleet, "--policy", str(policy))
    assert code == 0, err
    assert members.store("central").list(VOLCANO_GROUPS, "default") == []
    assert len(members.store("central").list(COSCHEDULING_GROUPS, "default")) == 1


def test_a_cluster_label_names_the_scheduler(
    members: Members, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = members.fleet_file(None)
    data = yaml.safe_load(fleet.read_text())
    for entry in data["clusters"]:
        entry["labels"] = {"placer.dev/scheduler": "volcano"}
    fleet.write_text(yaml.safe_dump(data))
    code, _, err = members.submit(capsys, fleet)
    assert code == 0, err
    [group] = members.store("central").list(VOLCANO_GROUPS, "default")
    assert group["spec"]["minMember"] == 3


@pytest.mark.kubectl
def test_kubectl_sees_the_podgroup(members: Members, capsys: pytest.CaptureFixture[str]) -> None:
    kubectl = shutil.which("kubectl") or "/usr/bin/kubectl"
    if not Path(kubectl).exists():
        pytest.skip("kubectl not installed")
    code, _, err = members.submit(capsys, members.fleet_file("volcano"))
    assert code == 0, err
    result = subprocess.run(
        [
            kubectl,
            "--kubeconfig",
            str(members.kubeconfig),
            "--context",
            "central",
            "get",
            "podgroups.scheduling.volcano.sh",
            "-n",
            "default",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    [group] = json.loads(result.stdout)["items"]
    assert group["spec"]["minMember"] == 3
    assert group["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


def test_an_update_in_place_keeps_the_handoff(
    members: Members, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A changed workload updated where it is stays handed to its member's scheduler: the pod
    templates keep their scheduler and group, the PodGroup follows the new gang size."""
    fleet = members.fleet_file("volcano")
    code, _, err = members.submit(capsys, fleet)
    assert code == 0, err
    manifest = yaml.safe_load(SEED.read_text())
    manifest["metadata"].setdefault("annotations", {})["team"] = "vision"
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(manifest))
    code, data, err = members.submit(capsys, fleet, manifest=path)
    assert code == 0, err
    [placement] = data["placements"]
    assert placement["state"] == "updated"
    [jobset] = members.store("central").list(JOBSETS)
    assert jobset["metadata"]["annotations"]["team"] == "vision"
    for template in templates(jobset).values():
        assert template["spec"]["schedulerName"] == "volcano"
        assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "demo"
    assert json.loads(jobset["metadata"]["annotations"]["placer.dev/handoff"])["podGroups"]
    [group] = members.store("central").list(VOLCANO_GROUPS, "default")
    assert group["spec"]["minMember"] == 3
    assert [r["uid"] for r in group["metadata"]["ownerReferences"]] == [jobset["metadata"]["uid"]]


def test_a_kueue_copy_updated_in_place_is_suspended_again_only_if_it_waits(
    members: Members, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = members.fleet_file({"name": "kueue", "defaultQueue": "lq-train"})
    code, _, err = members.submit(capsys, fleet)
    assert code == 0, err
    manifest = yaml.safe_load(SEED.read_text())
    path = tmp_path / "changed.yaml"

    def resubmit(team: str) -> dict[str, Any]:
        manifest["metadata"].setdefault("annotations", {})["team"] = team
        path.write_text(yaml.safe_dump(manifest))
        code, data, err = members.submit(capsys, fleet, manifest=path)
        assert code == 0, err
        assert data["placements"][0]["state"] == "updated"
        [jobset] = members.store("central").list(JOBSETS)
        assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq-train"
        return dict(jobset)

    # still waiting for Kueue: stays suspended
    assert resubmit("a")["spec"]["suspend"] is True
    # Kueue admits it (unsuspends it, as its own manager): an update does not stop it
    store = members.store("central")
    [jobset] = store.list(JOBSETS)
    jobset["spec"]["suspend"] = False
    store.put(jobset)
    assert resubmit("b")["spec"].get("suspend") in (False, None)


@pytest.mark.parametrize(
    ("scheduler", "warned"),
    [
        ({"name": "volcano"}, ""),  # Volcano's own default Queue
        ({"name": "volcano", "defaultQueue": "research"}, "Queue research not found on the"),
        ({"name": "kai"}, ""),  # default-queue is there
        ({"name": "kai", "defaultQueue": "research"}, "Queue research not found on the"),
    ],
)
def test_kai_and_volcano_queues_are_looked_up_on_the_member(
    members: Members, capsys: pytest.CaptureFixture[str], scheduler: Any, warned: str
) -> None:
    code, data, err = members.submit(capsys, members.fleet_file(scheduler), "--dry-run")
    assert code == 0, err
    notes = data["placements"][0]["notes"]
    found = [n for n in notes if "warning:" in n]
    if warned:
        [note] = found
        assert warned in note and "until it exists" in note
    else:
        assert found == []
