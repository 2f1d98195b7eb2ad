"""Elastic components in definitions: the range read from Workload Map's scale fields, the
errors (min > max, a missing replica path), and writing a chosen count through replicasPath."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.definitions import Catalog, decompose, definition_from_dict, validate_definition
from placer.definitions.elastic import write_replicas
from placer.errors import InterpretationError

ROOT = Path(__file__).resolve().parents[2]
ELASTIC_JOB = ROOT / "deploy" / "examples" / "pytorchjob-elastic.yaml"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.builtin()


def pytorchjob() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ELASTIC_JOB.read_text())
    return data


def raycluster(*groups: dict[str, Any]) -> dict[str, Any]:
    pod = {
        "containers": [
            {"name": "ray", "image": "ray", "resources": {"limits": {"nvidia.com/gpu": 1}}}
        ]
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "default"},
        "spec": {
            "headGroupSpec": {"template": {"spec": copy.deepcopy(pod)}},
            "workerGroupSpecs": [{**g, "template": {"spec": copy.deepcopy(pod)}} for g in groups],
        },
    }


def test_catalog_flags_elastic_and_resizable_frameworks(catalog: Catalog) -> None:
    flags = {
        name: (catalog.get(name).elastic, catalog.get(name).resizable)
        for name in (
            "kubeflow-org-pytorchjob-v1",
            "ray-io-raycluster-v1",
            "ray-io-rayjob-v1",
            "ray-io-rayservice-v1",
            "kubeflow-org-mpijob-v2beta1",
            "jobset-x-k8s-io-jobset-v1alpha2",
        )
    }
    assert flags == {
        "kubeflow-org-pytorchjob-v1": (True, True),
        "ray-io-raycluster-v1": (True, True),
        "ray-io-rayjob-v1": (True, False),
        "ray-io-rayservice-v1": (True, True),
        "kubeflow-org-mpijob-v2beta1": (False, False),
        "jobset-x-k8s-io-jobset-v1alpha2": (False, False),
    }


def test_pytorchjob_workers_range_from_elastic_policy(catalog: Catalog) -> None:
    found = decompose(pytorchjob(), catalog)
    worker = next(c for c in found.workload.components if c.name == "worker")
    master = next(c for c in found.workload.components if c.name == "master")
    assert (worker.replicas, worker.max_replicas, worker.elastic) == (2, 8, True)
    assert (master.replicas, master.elastic) == (1, False)
    # the gang's minMember is the minimum: master + 2 workers
    assert [g.min_member for g in found.gangs] == [3]


def test_job_without_elastic_policy_is_placed_as_declared(catalog: Catalog) -> None:
    data = pytorchjob()
    del data["spec"]["elasticPolicy"]
    found = decompose(data, catalog)
    assert not found.workload.elastic
    assert [c.replicas for c in found.workload.components] == [1, 2]


def test_min_above_max_names_definition_component_and_fields(catalog: Catalog) -> None:
    data = pytorchjob()
    data["spec"]["elasticPolicy"].update(minReplicas=6, maxReplicas=4)
    with pytest.raises(InterpretationError) as caught:
        decompose(data, catalog, source="job.yaml")
    text = str(caught.value)
    assert "job.yaml: PyTorchJob/elastic-pretrain" in text
    assert "definition 'kubeflow-org-pytorchjob-v1'" in text
    assert "component 'worker'" in text
    assert "scaleDefinition.minReplicasPath gives 6, more than maxReplicasPath's 4" in text


def test_min_above_max_fails_describe_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = pytorchjob()
    data["spec"]["elasticPolicy"].update(minReplicas=6, maxReplicas=4)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["describe", "-f", str(path)]) == 1
    assert "minReplicasPath gives 6, more than maxReplicasPath's 4" in capsys.readouterr().err


def elastic_karta(scale: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "trainer", "annotations": {"placer.dev/elastic": "true"}},
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": "trainer",
                    "kind": {"group": "example.com", "version": "v1", "kind": "Trainer"},
                    "specDefinition": {"podTemplateSpecPath": ".spec.template"},
                    "scaleDefinition": scale,
                    "statusDefinition": {
                        "phaseDefinition": {"path": ".status.phase"},
                        "statusMappings": {"running": [{"byPhase": "Running"}]},
                    },
                }
            }
        },
    }


def test_missing_replica_path_of_elastic_definition_is_invalid() -> None:
    definition = definition_from_dict(
        elastic_karta({"minReplicasPath": ".spec.min", "maxReplicasPath": ".spec.max"})
    )
    problems = validate_definition(definition)
    assert problems == [
        "definition 'trainer': component 'trainer' "
        "spec.structureDefinition.rootComponent.scaleDefinition.replicasPath: missing; "
        "the definition is elastic (placer.dev/elastic) and placer writes the chosen "
        "replica count there: add the jq path of the replicas field"
    ]


def test_missing_replica_path_fails_placer_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "trainer.yaml"
    path.write_text(
        yaml.safe_dump(
            elastic_karta({"minReplicasPath": ".spec.min", "maxReplicasPath": ".spec.max"})
        )
    )
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr()
    assert "definition 'trainer'" in out.out + out.err
    assert "scaleDefinition.replicasPath: missing" in out.out + out.err


def test_elastic_flag_without_any_range_is_invalid() -> None:
    definition = definition_from_dict(elastic_karta({"replicasPath": ".spec.replicas"}))
    assert validate_definition(definition) == [
        "definition 'trainer': metadata.annotations[placer.dev/elastic]: no component has a "
        "scaleDefinition.minReplicasPath or maxReplicasPath to place elastically: add them, "
        "or remove the annotation"
    ]


def test_write_through_pytorchjob_replica_path(catalog: Catalog) -> None:
    data = pytorchjob()
    definition = catalog.get("kubeflow-org-pytorchjob-v1")
    written = write_replicas(data, definition, {("worker", ""): 5}, where="job")
    assert written["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 5
    assert written["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert data["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2  # a copy


def test_write_into_the_instances_ray_group(catalog: Catalog) -> None:
    data = raycluster(
        {"groupName": "a", "replicas": 1, "minReplicas": 1, "maxReplicas": 4},
        {"groupName": "b", "minReplicas": 2, "maxReplicas": 6},
    )
    found = decompose(data, catalog)
    ranges = {c.instance: (c.replicas, c.max_replicas) for c in found.workload.components}
    assert ranges == {"": (1, None), "a": (1, 4), "b": (2, 6)}
    definition = found.definition
    written = write_replicas(data, definition, {("worker", "b"): 5, ("worker", "a"): 3}, where="rc")
    groups = written["spec"]["workerGroupSpecs"]
    assert [g.get("replicas") for g in groups] == [3, 5]
    again = decompose(written, catalog)
    assert {c.instance: c.replicas for c in again.components} == {"": 1, "a": 3, "b": 5}


def test_multi_host_group_is_placed_as_declared_with_a_warning(catalog: Catalog) -> None:
    data = raycluster(
        {"groupName": "tpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 3, "numOfHosts": 2}
    )
    found = decompose(data, catalog)
    worker = next(c for c in found.workload.components if c.name == "worker")
    assert (worker.replicas, worker.elastic) == (2, False)
    assert any(
        "cannot write 6 replicas through" in w and "placed at its declared 2 replicas" in w
        for w in found.warnings
    )
