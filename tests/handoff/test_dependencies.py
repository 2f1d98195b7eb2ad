"""Issue 15: the objects a workload's pods name travel with it (placer.dispatch.dependencies),
on the virtual demo fleet over HTTPS, through `placer submit -f` with them in the same file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.definitions import Catalog, decompose
from placer.dispatch import Manifest
from placer.dispatch.dependencies import attach, references
from placer.snapshot import load_snapshot
from placer.testing import Store
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
SEED = yaml.safe_load((ROOT / "examples" / "jobset-demo.yaml").read_text())
SECRET_VALUE = "c3VwZXItc2VjcmV0LXRva2Vu"  # base64 of a token that must never be shown


def jobset(
    name: str, *, gpus: int = 1, config: str = "train-config", **labels: str
) -> dict[str, Any]:
    body = json.loads(json.dumps(SEED))
    body["metadata"] = {"name": name, "namespace": "default", "labels": dict(labels)}
    for job in body["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        container["resources"]["limits"] = {"nvidia.com/gpu": gpus}
        container["envFrom"] = [{"configMapRef": {"name": config}}]
        container["env"] = [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub-token", "key": "t"}}}
        ]
        pod["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}]
    return body


def config_map(name: str = "train-config") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}


SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "hub-token"},
    "type": "Opaque",
    "data": {"t": SECRET_VALUE},
}
CLAIM = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "datasets"},
    "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}},
}


class Members:
    def __init__(self, virtual: VirtualFleet, kubeconfig: Path, tmp_path: Path) -> None:
        self.virtual = virtual
        self.kubeconfig = kubeconfig
        self.tmp_path = tmp_path

    def store(self, cluster: str = "central") -> Store:
        return self.virtual.server(cluster).store

    def names(self, resource: str, cluster: str = "central") -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.store(cluster).list(resource, "default"))

    def submit(
        self,
        capsys: pytest.CaptureFixture[str],
        *objects: dict[str, Any],
        extra: tuple[str, ...] = (),
    ) -> tuple[int, dict[str, Any], str, str]:
        path = self.tmp_path / "input.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        code = main(
            ["submit", "--kubeconfig", str(self.kubeconfig), "-f", str(path), "-o", "json", *extra]
        )
        out, err = capsys.readouterr()
        return code, json.loads(out), out, err


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    with VirtualFleet(snapshot, setup=realism_setup(pods=False)) as virtual:
        yield Members(virtual, virtual.write_kubeconfig(tmp_path / "kc"), tmp_path)


def test_references_of_the_pod_templates() -> None:
    body = jobset("refs")
    pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["serviceAccountName"] = "trainer"
    pod["imagePullSecrets"] = [{"name": "registry"}]
    pod["volumes"].append(
        {"name": "p", "projected": {"sources": [{"secret": {"name": "s2", "optional": True}}]}}
    )
    manifest = Manifest(body, decompose(body, Catalog.builtin()))
    found = {(d.kind, d.name): d for d in references(manifest)}
    assert set(found) == {
        ("ConfigMap", "train-config"),
        ("Secret", "hub-token"),
        ("PersistentVolumeClaim", "datasets"),
        ("ServiceAccount", "trainer"),
        ("Secret", "registry"),
        ("Secret", "s2"),
    }
    assert found[("Secret", "hub-token")].required
    assert "env[0].valueFrom.secretKeyRef" in found[("Secret", "hub-token")].where
    assert not found[("Secret", "registry")].required  # image pull secrets: carried if given
    assert not found[("Secret", "s2")].required  # optional: true
    needs = attach([manifest], [config_map(), SECRET])[str(manifest.ref)]
    assert {d.name for d, _ in needs.supplied} == {"train-config", "hub-token"}
    assert {d.name for d in needs.expected} == {"datasets", "trainer", "registry", "s2"}


def test_a_jobset_lands_with_its_configmap_secret_and_claim_and_leaves_with_them(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, out, err = members.submit(
        capsys, jobset("demo", gpus=4), config_map(), SECRET, CLAIM
    )
    assert code == 0, err
    [placement] = data["placements"]
    assert placement["cluster"] == "central"
    assert sorted(placement["handoff"]["dependencies"]) == [
        "ConfigMap/train-config",
        "PersistentVolumeClaim/datasets",
        "Secret/hub-token",
    ]
    [job] = members.store().list("jobsets.jobset.x-k8s.io", "default")
    uid = job["metadata"]["uid"]
    for resource, name in (
        ("configmaps", "train-config"),
        ("secrets", "hub-token"),
        ("persistentvolumeclaims", "datasets"),
    ):
        obj = members.store().get(resource, name, "default")
        assert obj["metadata"]["labels"]["placer.dev/placed-by"] == "placer"
        assert [r["uid"] for r in obj["metadata"]["ownerReferences"]] == [uid]
    assert members.store().get("secrets", "hub-token", "default")["data"] == {"t": SECRET_VALUE}
    # secrets never appear in output
    assert SECRET_VALUE not in out and SECRET_VALUE not in err
    # nothing of it went elsewhere
    for other in ("east", "west"):
        assert "train-config" not in members.names("configmaps", other)
    # deleting the workload removes them (owner references, garbage collection)
    members.store().delete("jobsets.jobset.x-k8s.io", "demo", "default")
    assert "train-config" not in members.names("configmaps")
    assert "hub-token" not in members.names("secrets")
    assert members.names("persistentvolumeclaims") == []


def test_a_shared_configmap_stays_while_another_placed_workload_uses_it(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    pin = {"placer.dev/cluster": "central"}
    code, _, _, err = members.submit(
        capsys, jobset("one", **pin), jobset("two", **pin), config_map(), SECRET, CLAIM
    )
    assert code == 0, err
    shared = members.store().get("configmaps", "train-config", "default")
    owners = sorted(r["name"] for r in shared["metadata"]["ownerReferences"])
    assert owners == ["one", "two"]
    members.store().delete("jobsets.jobset.x-k8s.io", "one", "default")
    assert "train-config" in members.names("configmaps")  # "two" still uses it
    members.store().delete("jobsets.jobset.x-k8s.io", "two", "default")
    assert "train-config" not in members.names("configmaps")


def test_a_missing_secret_fails_before_anything_is_applied(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, _, _ = members.submit(capsys, jobset("demo", gpus=4), config_map(), CLAIM)
    assert code == 1
    [unplaced] = data["unplaced"]
    [attempt] = unplaced["attempts"]
    assert attempt["cluster"] == "central" and attempt["code"] == 404
    assert "Secret default/hub-token" in attempt["error"]
    assert "env[0].valueFrom.secretKeyRef" in attempt["error"]
    assert "neither in the input nor on cluster central" in attempt["error"]
    # nothing of it on the member: no JobSet, no ConfigMap, no claim
    assert members.store().list("jobsets.jobset.x-k8s.io", "default") == []
    assert "train-config" not in members.names("configmaps")
    assert members.names("persistentvolumeclaims") == []


def test_a_secret_already_on_the_member_is_used_as_it_is(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    members.store().create({**SECRET, "metadata": {"name": "hub-token", "namespace": "default"}})
    theirs = {**CLAIM, "metadata": {"name": "datasets", "namespace": "default"}}
    members.store().create(theirs)
    code, data, _, err = members.submit(capsys, jobset("demo", gpus=4), config_map(), CLAIM)
    assert code == 0, err
    notes = data["placements"][0]["notes"]
    assert any(
        "PersistentVolumeClaim default/datasets is on the member and not placer's" in n
        for n in notes
    )
    claim = members.store().get("persistentvolumeclaims", "datasets", "default")
    assert "ownerReferences" not in claim["metadata"]  # the user's: never owned by placer
    secret = members.store().get("secrets", "hub-token", "default")
    assert "ownerReferences" not in secret["metadata"]


def test_dry_run_names_them_and_writes_nothing(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, out, err = members.submit(
        capsys, jobset("demo", gpus=4), config_map(), SECRET, CLAIM, extra=("--dry-run",)
    )
    assert code == 0, err
    notes = data["placements"][0]["notes"]
    assert "Secret default/hub-token would be created before the workload" in notes
    assert SECRET_VALUE not in out
    assert "hub-token" not in members.names("secrets")
    assert members.names("persistentvolumeclaims") == []


def test_an_object_no_workload_names_is_a_warning(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _, err = members.submit(
        capsys, jobset("demo", gpus=4), config_map(), config_map("spare"), SECRET, CLAIM
    )
    assert code == 0, err
    assert "ConfigMap spare in the input is named by no workload's pods: not dispatched" in err
    assert "spare" not in members.names("configmaps")


def test_an_unchanged_resubmission_restores_a_deleted_configmap_and_updates_a_changed_one(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = (jobset("demo", gpus=4), config_map(), SECRET, CLAIM)
    code, _, _, err = members.submit(capsys, *inputs)
    assert code == 0, err
    [job] = members.store().list("jobsets.jobset.x-k8s.io", "default")
    members.store().delete("configmaps", "train-config", "default")
    # the same input again: the workload is unchanged, its ConfigMap comes back, owned by it
    code, data, out, err = members.submit(capsys, *inputs)
    assert code == 0, err
    [placement] = data["placements"]
    assert placement["state"] == "unchanged"
    assert (
        "ConfigMap default/train-config restored (it was missing on the member)"
        in (placement["notes"])
    )
    restored = members.store().get("configmaps", "train-config", "default")
    assert restored["data"] == {"a": "1"}
    assert [r["uid"] for r in restored["metadata"]["ownerReferences"]] == [job["metadata"]["uid"]]
    assert SECRET_VALUE not in out and SECRET_VALUE not in err
    # a changed ConfigMap in the input: updated beside the unchanged workload
    changed = config_map()
    changed["data"] = {"a": "2"}
    code, data, _, err = members.submit(capsys, inputs[0], changed, SECRET, CLAIM)
    assert code == 0, err
    assert "ConfigMap default/train-config updated" in data["placements"][0]["notes"]
    assert members.store().get("configmaps", "train-config", "default")["data"] == {"a": "2"}
    # nothing to do: nothing said
    code, data, _, err = members.submit(capsys, inputs[0], changed, SECRET, CLAIM)
    assert code == 0, err
    assert not any("ConfigMap" in n for n in data["placements"][0].get("notes", ()))
    # a dry run says what it would restore and writes nothing
    members.store().delete("secrets", "hub-token", "default")
    code, data, _, err = members.submit(capsys, *inputs, extra=("--dry-run",))
    assert code == 0, err
    assert (
        "Secret default/hub-token would be restored (it was missing on the member)"
        in (data["placements"][0]["notes"])
    )
    assert "hub-token" not in members.names("secrets")


def test_a_changed_workload_updated_in_place_brings_its_configmap_along(
    members: Members, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _, err = members.submit(capsys, jobset("demo", gpus=4), config_map(), SECRET, CLAIM)
    assert code == 0, err
    body = jobset("demo", gpus=4)
    body["metadata"]["annotations"] = {"team": "vision"}  # a change that fits where it is
    changed = config_map()
    changed["data"] = {"a": "3"}
    code, data, _, err = members.submit(capsys, body, changed, SECRET, CLAIM)
    assert code == 0, err
    [placement] = data["placements"]
    assert placement["state"] == "updated"
    assert "ConfigMap default/train-config updated" in placement["notes"]
    assert members.store().get("configmaps", "train-config", "default")["data"] == {"a": "3"}
