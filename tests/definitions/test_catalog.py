"""The catalog: built-in definitions (packaged with the wheel), user directories, lookup."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from placer.definitions import (
    Catalog,
    builtin_catalog_dir,
    decompose,
    definition_from_dict,
    load_definitions,
)
from placer.definitions.loader import slug
from placer.errors import DefinitionError, DefinitionInvalidError, NoDefinitionError


def test_builtin_catalog_covers_the_required_kinds(catalog: Catalog) -> None:
    kinds = {str(d.target) for d in catalog.definitions}
    assert kinds == {
        "jobset.x-k8s.io/v1alpha2 JobSet",
        "kubeflow.org/v1 PyTorchJob",
        "kubeflow.org/v2beta1 MPIJob",
        "ray.io/v1 RayCluster",
        "ray.io/v1 RayJob",
        "ray.io/v1 RayService",
        "serving.kserve.io/v1beta1 InferenceService",
        "serving.kserve.io/v1alpha1 LLMInferenceService",
        "serving.kserve.io/v1alpha2 LLMInferenceService",
        "serving.knative.dev/v1 Service",
        "apps.nvidia.com/v1alpha1 NIMService",
        "apps.nvidia.com/v1alpha1 NIMCache",
        "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet",
        "milvus.io/v1beta1 Milvus",
        "grove.io/v1alpha1 PodCliqueSet",
        "nvidia.com/v1alpha1 DynamoGraphDeployment",
        "nvidia.com/v1beta1 DynamoGraphDeployment",
        "v1 Pod",
        "batch/v1 Job",
        "batch/v1 CronJob",
        "apps/v1 Deployment",
        "apps/v1 StatefulSet",
        "agents.x-k8s.io/v1beta1 Sandbox",
    }
    for definition in catalog.definitions:
        assert definition.origin == "catalog"
        assert definition.target is not None
        # file and metadata name follow upstream's slug (one definition per root kind)
        assert definition.name == slug(definition.target)
        assert Path(definition.source or "").stem == definition.name


def test_builtin_is_loaded_once(catalog: Catalog) -> None:
    assert Catalog.builtin() is catalog


def test_user_directories_replace_builtin_definitions(tmp_path: Path, catalog: Catalog) -> None:
    document = dict(load_definitions(builtin_catalog_dir() / "batch-job-v1.yaml")[0].document)
    document["spec"]["structureDefinition"]["rootComponent"]["scaleDefinition"] = {
        "replicasPath": "7"
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(document))
    mine = Catalog.load([tmp_path])
    job = mine.find("batch/v1", "Job")
    assert job.origin == "file"
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}
    assert decompose(obj, mine).components[0].replicas == 7
    assert decompose(obj, catalog).components[0].replicas == 1
    assert mine.find("apps/v1", "Deployment") is catalog.find("apps/v1", "Deployment")
    assert len(mine) == len(catalog)


def test_later_definitions_win_and_are_validated(catalog: Catalog) -> None:
    document = dict(load_definitions(builtin_catalog_dir() / "core-pod-v1.yaml")[0].document)
    document["metadata"] = {"name": "my-pods"}
    cluster = definition_from_dict(document, source="cluster/hub", origin="cluster")
    merged = catalog.with_definitions([cluster])
    assert merged.find("v1", "Pod").name == "my-pods"
    assert catalog.find("v1", "Pod").name == "core-pod-v1"  # the original is unchanged
    broken = dict(document)
    broken["spec"] = {"structureDefinition": {"rootComponent": {"name": "x"}}}
    with pytest.raises(DefinitionInvalidError):
        catalog.with_definitions([definition_from_dict(broken)])


def test_lookup_by_name_and_kind(catalog: Catalog) -> None:
    assert catalog.get("batch-job-v1").name == "batch-job-v1"
    with pytest.raises(DefinitionError, match="no definition named 'nope'"):
        catalog.get("nope")
    with pytest.raises(NoDefinitionError):
        catalog.find("example.com/v1", "Nothing")


def test_invalid_user_definitions_are_refused_with_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: run.ai/v1alpha1\nkind: Karta\nmetadata: {name: bad}\nspec:\n"
        "  structureDefinition:\n    rootComponent:\n      name: r\n"
        "      kind: {group: example.com, version: v1, kind: Bad}\n"
    )
    with pytest.raises(DefinitionInvalidError, match=r"bad.yaml: definition 'bad' is invalid"):
        Catalog.load([tmp_path])


@pytest.mark.slow
def test_the_wheel_ships_the_catalog(tmp_path: Path, built_wheel: Path) -> None:
    """Build the wheel from a copy of the sources and load the catalog from it alone."""
    with zipfile.ZipFile(built_wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith("placer/definitions/builtin/")]
        archive.extractall(tmp_path / "site")
    assert len(names) == 23
    probe = (
        "import placer, placer.definitions as d; "
        "print(placer.__file__); print(len(d.Catalog.builtin()))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    where, count = ran.stdout.split()
    assert where.startswith(str(tmp_path / "site"))
    assert count == "23"
