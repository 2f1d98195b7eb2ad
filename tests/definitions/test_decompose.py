"""Interpretation details and bad input: instances, pairing, replicas, templates, the workload."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from placer.definitions import (
    Catalog,
    JqLimits,
    decompose,
    definition_from_dict,
    workload_ref,
)
from placer.errors import InterpretationError, JqError, NoDefinitionError

WIDGETS: dict[str, Any] = {
    "apiVersion": "run.ai/v1alpha1",
    "kind": "Karta",
    "metadata": {"name": "widgets"},
    "spec": {
        "structureDefinition": {
            "rootComponent": {
                "name": "widget",
                "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
                "statusDefinition": {"statusMappings": {}},
            },
            "childComponents": [
                {
                    "name": "worker",
                    "ownerRef": "widget",
                    "specDefinition": {"podTemplateSpecPath": ".spec.workers[].template"},
                    "scaleDefinition": {
                        "replicasPath": ".spec.workers[].replicas",
                        "minReplicasPath": ".spec.workers[].min",
                    },
                    "instanceIdPath": ".spec.workers[].name",
                    "podSelector": {
                        "componentInstanceSelector": {"idPath": '.metadata.labels["w"]'}
                    },
                },
                {
                    "name": "sidekick",
                    "ownerRef": "widget",
                    "specDefinition": {
                        "fragmentedPodSpecDefinition": {
                            "containersPath": ".spec.sidekick.containers",
                            "containerPath": ".spec.sidekick.main",
                            "resourcesPath": ".spec.sidekick.resources",
                            "labelsPath": ".spec.sidekick.labels",
                            "imagePath": ".spec.sidekick.image",
                            "schedulerNamePath": ".spec.sidekick.scheduler",
                            "nodeAffinityPath": ".spec.sidekick.nodeAffinity",
                        }
                    },
                },
            ],
        }
    },
}


def widget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"workers": [], **spec},
    }


def definition(change: Any = None) -> Any:
    data = copy.deepcopy(WIDGETS)
    if change is not None:
        change(data["spec"]["structureDefinition"]["childComponents"][0])
    return definition_from_dict(data, source="widgets.yaml")


def worker(name: str, replicas: Any = 1, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    return {"name": name, "replicas": replicas, "template": template, **extra}


def test_instances_are_sorted_and_paired_by_position() -> None:
    obj = widget(workers=[worker("b", 2, "2"), worker("a", 3, "1", min=1)])
    result = decompose(obj, definition())
    workers = [c for c in result.components if c.name == "worker"]
    assert [(c.instance, c.replicas, c.pod.requests["cpu"]) for c in workers] == [
        ("a", 3, 1000),
        ("b", 2, 2000),
    ]
    assert workers[0].min_replicas == 1
    assert result.ref.namespace == "default"


def test_numeric_strings_a_path_computes_and_missing_replicas() -> None:
    """A scale path may compute a numeric string (upstream reads it as the number)."""

    def as_text(c: dict[str, Any]) -> None:
        c["scaleDefinition"]["replicasPath"] = (
            ".spec.workers[] | if .replicas == null then null else .replicas | tostring end"
        )

    obj = widget(workers=[worker("a", 4), worker("b", None), worker("c", None, min=2)])
    counts = {c.instance: c.replicas for c in decompose(obj, definition(as_text)).components}
    assert counts == {"a": 4, "b": 1, "c": 2, "": 1}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("4", "is the string '4', not a number: write 4 without quotes"),
        ("x", "is the string 'x', not a whole number"),
    ],
)
def test_a_string_in_a_count_field_of_the_object_is_an_error_naming_the_field(
    value: str, problem: str
) -> None:
    """Kubernetes rejects ``replicas: "4"`` in an integer field: so does placer, naming the
    field, where the scale path would have read it as text."""
    obj = widget(workers=[worker("a", 1), worker("b", value)])
    with pytest.raises(InterpretationError) as info:
        decompose(obj, definition(), source="w.yaml")
    assert str(info.value).startswith(
        f"w.yaml: Widget/w1: definition 'widgets': component 'worker': spec.workers[1].replicas "
        f"{problem} (Kubernetes requires an integer there"
    )
    assert "scaleDefinition.replicasPath reads it as a count" in str(info.value)


def test_a_quoted_job_parallelism_is_an_error_not_a_silent_count(catalog: Catalog) -> None:
    """``[$p, completions] | min`` would put the number before the string: 10 pods, not 3."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "quoted"},
        "spec": {
            "parallelism": "3",
            "completions": 10,
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
    }
    with pytest.raises(
        InterpretationError, match=r"Job/quoted: .* spec\.parallelism is the string"
    ):
        decompose(job, catalog)
    job["spec"]["parallelism"] = 3
    assert [c.replicas for c in decompose(job, catalog).components] == [3]


def test_strings_in_labels_and_annotations_are_not_counts(catalog: Catalog) -> None:
    """Knative's scale annotations are strings by their schema (the definition converts them)."""
    service = {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"autoscaling.knative.dev/min-scale": "2"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }
        },
    }
    assert [c.replicas for c in decompose(service, catalog).components] == [2]


@pytest.mark.parametrize(
    ("replicas", "message"),
    [
        ("x", "replicas value 'x' at index 0 is not a number"),  # computed by the path
        (1.5, "replicas value 1.5 at index 0 is not a whole number"),
        (-1, "replicas value -1 at index 0 is negative"),
        (True, "output 0 is a boolean, expected a number"),
        ({"a": 1}, "output 0 is an object, expected a number"),
        (2**31, "out of range"),
    ],
)
def test_bad_replica_values_name_the_path(replicas: Any, message: str) -> None:
    def computed(c: dict[str, Any]) -> None:  # the value passes through a function
        c["scaleDefinition"]["replicasPath"] = ".spec.workers[] | .replicas | values"

    with pytest.raises(InterpretationError) as info:
        decompose(widget(workers=[worker("a", replicas)]), definition(computed), source="w.yaml")
    text = str(info.value)
    assert message in text
    assert text.startswith(
        "w.yaml: Widget/w1: definition 'widgets': component 'worker' scaleDefinition.replicasPath"
    )


def test_count_mismatches_are_errors() -> None:
    def split(c: dict[str, Any]) -> None:
        c["specDefinition"]["podTemplateSpecPath"] = ".spec.workers[] | select(.replicas > 1)"

    with pytest.raises(InterpretationError, match=r"instance ids count \(2\) does not match "):
        decompose(widget(workers=[worker("a", 1), worker("b", 2)]), definition(split))


def test_instance_ids_must_be_non_empty_strings() -> None:
    with pytest.raises(InterpretationError, match="output 0 is the number 7, expected a string"):
        decompose(widget(workers=[worker(7)]), definition())  # type: ignore[arg-type]
    with pytest.raises(InterpretationError, match="contained empty string values"):
        decompose(widget(workers=[worker("")]), definition())


def test_a_template_of_the_wrong_type_is_an_error() -> None:
    obj = widget(workers=[{"name": "a", "replicas": 1, "template": "oops"}])
    with pytest.raises(InterpretationError, match=r"podTemplateSpecPath.*expected a PodTemplate"):
        decompose(obj, definition())


def test_a_bad_quantity_names_the_component() -> None:
    obj = widget(workers=[worker("a", 1, "lots")])
    with pytest.raises(InterpretationError, match=r"component 'worker/a'.*not a quantity: 'lots'"):
        decompose(obj, definition())


def test_a_missing_field_a_path_needs() -> None:
    obj = widget()
    del obj["spec"]["workers"]
    with pytest.raises(JqError) as info:
        decompose(obj, definition(), source="w.yaml")
    text = str(info.value)
    assert "component 'worker' instanceIdPath" in text
    assert "jq '.spec.workers[].name'" in text
    assert "Cannot iterate over null" in text


def test_a_path_that_never_ends_fails_with_the_time_limit() -> None:
    def endless(c: dict[str, Any]) -> None:
        c["scaleDefinition"]["replicasPath"] = "def f: f; f"

    with pytest.raises(JqError) as info:
        decompose(widget(), definition(endless), limits=JqLimits(time_limit=0.3))
    text = str(info.value)
    assert "component 'worker' scaleDefinition.replicasPath" in text
    assert "did not finish within 0.3 s" in text


def test_fragmented_pod_specs_are_synthesised() -> None:
    obj = widget(
        sidekick={
            "containers": [{"name": "helper", "image": "h"}],
            "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": 1}},
            "labels": {"app": "sk"},
            "image": "main:1",
            "scheduler": "kai",
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a"]}]}
                    ]
                }
            },
        }
    )
    sidekick = decompose(obj, definition()).component("sidekick")
    spec = sidekick.template["spec"]
    # the CR-level resources go to the main container when the containers request nothing
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "2", "nvidia.com/gpu": 1}}
    assert spec["containers"][0]["image"] == "h"
    assert spec["schedulerName"] == "kai"
    assert sidekick.template["metadata"] == {"labels": {"app": "sk"}}
    assert sidekick.pod.requests == {"cpu": 2000, "nvidia.com/gpu": 1}
    assert sidekick.pod.affinity[0].match_expressions[0].key == "gpu"


def test_fragment_types_are_checked() -> None:
    with pytest.raises(InterpretationError, match=r"labelsPath.*value of 'a' is the number 1"):
        decompose(widget(sidekick={"labels": {"a": 1}}), definition())
    with pytest.raises(InterpretationError, match=r"containersPath.*expected a list"):
        decompose(widget(sidekick={"containers": {"name": "x"}}), definition())


def test_no_definition_for_the_kind(catalog: Catalog) -> None:
    obj = {"apiVersion": "example.com/v9", "kind": "Gizmo", "metadata": {"name": "g"}}
    with pytest.raises(NoDefinitionError) as info:
        decompose(obj, catalog, source="g.yaml")
    assert info.value.exit_code == 4
    assert "g.yaml: no workload definition covers example.com/v9 Gizmo" in str(info.value)
    assert "--catalog DIR" in str(info.value)


def test_another_version_of_the_same_kind_is_used_when_unambiguous(catalog: Catalog) -> None:
    obj = {
        "apiVersion": "jobset.x-k8s.io/v1beta1",
        "kind": "JobSet",
        "metadata": {"name": "j"},
        "spec": {"replicatedJobs": []},
    }
    assert decompose(obj, catalog).definition.name == "jobset-x-k8s-io-jobset-v1alpha2"
    dynamo = {"apiVersion": "nvidia.com/v2", "kind": "DynamoGraphDeployment", "metadata": {}}
    with pytest.raises(NoDefinitionError):
        decompose({**dynamo, "metadata": {"name": "d"}}, catalog)


def test_workload_settings_from_labels_and_annotations() -> None:
    obj = widget(workers=[worker("a", 2)])
    obj["metadata"] = {
        "name": "w1",
        "namespace": "team-a",
        "labels": {"placer.dev/priority": "5", "placer.dev/group": "exp-1"},
        "annotations": {"placer.dev/cluster": "east", "placer.dev/priority": "9"},
    }
    workload = decompose(obj, definition()).workload
    assert (workload.priority, workload.group, workload.pinned_cluster) == (5, "exp-1", "east")
    assert workload.ref.namespace == "team-a"
    assert [c.label for c in workload.components] == ["worker/a", "sidekick"]


def test_a_bad_priority_names_the_field() -> None:
    obj = widget()
    obj["metadata"]["annotations"] = {"placer.dev/priority": "high"}
    with pytest.raises(InterpretationError) as info:
        decompose(obj, definition(), source="w.yaml")
    assert "metadata.annotations[\"placer.dev/priority\"]: 'high' is not an integer" in str(
        info.value
    )


def test_zero_replica_components_stay_out_of_the_workload() -> None:
    obj = widget(workers=[worker("a", 0), worker("b", 1)])
    result = decompose(obj, definition())
    assert [c.replicas for c in result.components if c.name == "worker"] == [0, 1]
    assert [c.label for c in result.workload.components] == ["worker/b", "sidekick"]


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "Widget", "metadata": {"name": "x"}}, "has no apiVersion"),
        ({"apiVersion": "example.com/v1", "metadata": {"name": "x"}}, "has no kind"),
        ({"apiVersion": "example.com/v1", "kind": "Widget"}, "Widget: metadata.name is missing"),
        ("not an object", "the document is a string, not a Kubernetes object"),
    ],
)
def test_objects_without_identity(obj: Any, message: str) -> None:
    with pytest.raises(InterpretationError, match=message):
        decompose(obj, definition(), source="x.yaml")


def test_generate_name_is_accepted() -> None:
    ref = workload_ref({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "p-"}})
    assert ref.name == "p-"


def test_objects_that_are_not_json_data_are_refused() -> None:
    obj = widget()
    obj["spec"]["when"] = object()
    with pytest.raises(InterpretationError, match="not plain JSON data"):
        decompose(obj, definition())


def test_structure_lists_every_component(catalog: Catalog) -> None:
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {}}},
    }
    result = decompose(lws, catalog)
    nodes = {n.name: n for n in result.structure}
    assert list(nodes) == ["leaderworkerset", "group", "leader", "worker"]
    assert not nodes["group"].pod_bearing and nodes["group"].instances[0].replicas == 3
    assert nodes["leader"].owner == "group"


def test_a_string_where_a_number_belongs_cannot_exhaust_memory(catalog: Catalog) -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "evil"},
        "spec": {
            "replicatedJobs": [
                {"name": "w", "replicas": "x", "template": {"spec": {"parallelism": 2000000000}}}
            ]
        },
    }
    with pytest.raises(InterpretationError, match=r"spec\.replicatedJobs\[0\]\.replicas is"):
        decompose(jobset, catalog)  # the field is named before jq runs

    # a string the fields check cannot see (it comes through an annotation) meets the guard
    def from_annotation(c: dict[str, Any]) -> None:
        c["scaleDefinition"]["replicasPath"] = (
            ".spec.workers[] as $w | .metadata.annotations.n * 2000000000"
        )

    obj = widget(workers=[worker("a", 1)])
    obj["metadata"]["annotations"] = {"n": "x"}
    with pytest.raises(JqError, match="cannot repeat string"):
        decompose(obj, definition(from_annotation))
