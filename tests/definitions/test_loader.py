"""Reading definition documents: both API eras, files, directories, streams, and bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from placer.definitions import definition_from_dict, load_definitions, parse_documents
from placer.definitions.documents import MalformedYamlError
from placer.definitions.model import STATUS_ORDER
from placer.errors import DefinitionError, DefinitionInvalidError, InputError

KARTA = """\
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: widgets}
spec:
  structureDefinition:
    rootComponent:
      name: widget
      kind: {group: example.com, version: v1, kind: Widget}
      specDefinition: {podTemplateSpecPath: .spec.template}
      scaleDefinition: {replicasPath: .spec.replicas}
      statusDefinition:
        conditionsDefinition: {path: .status.conditions}
        statusMappings:
          running: [{byConditions: [{type: Ready, status: "True"}]}]
          pending: [{byPhase: Pending}]
  optimizationInstructions:
    gangScheduling:
      podGroups:
      - name: all
        members: [{componentName: widget, groupByKeyPaths: [.metadata.labels.app]}]
      podGroup:
        name: v2
        subGroups: [{componentName: widget}]
        topology: {topologyName: t, preferredTopologyLevel: rack, requiredTopologyLevel: zone}
"""

RESOURCE_INTERFACE = """\
apiVersion: optimization.nvidia.com/v1alpha1
kind: ResourceInterface
spec:
  structureDefinition:
    rootComponent:
      name: gadget
      kind: {group: example.com, version: v2, kind: Gadget}
      statusDefinition:
        statusMappings: {}
"""


def test_karta_documents_decode_into_the_model(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(KARTA)
    (definition,) = load_definitions(tmp_path / "w.yaml")
    assert definition.name == "widgets"
    assert str(definition.target) == "example.com/v1 Widget"
    assert definition.root.has_pod_definition
    assert definition.root.scale is not None
    assert definition.root.scale.replicas_path == ".spec.replicas"
    status = definition.root.status
    assert status is not None and status.conditions is not None
    # unknown status keys (an old side branch's `pending`) are ignored, as upstream does
    assert list(status.mappings) == ["Running"]
    # CRD defaults for the condition field names, also from files
    assert (status.conditions.type_field, status.conditions.reason_field) == ("type", "reason")
    assert definition.gang is not None
    assert definition.gang.pod_groups[0].members[0].group_by_key_paths == (".metadata.labels.app",)
    assert definition.gang.pod_group is not None
    assert definition.gang.pod_group.topology is not None
    assert definition.origin == "file"
    assert definition.source == str(tmp_path / "w.yaml")


def test_resource_interface_documents_and_missing_names() -> None:
    (document,) = parse_documents(RESOURCE_INTERFACE, "ri.yaml")
    definition = definition_from_dict(document.data, source=document.source)
    assert definition.name == "example-com-gadget-v2"
    assert definition.api_version == "optimization.nvidia.com/v1alpha1"


def test_multi_document_files_directories_lists_and_json(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "both.yaml").write_text(KARTA + "---\n" + RESOURCE_INTERFACE + "---\n")
    (tmp_path / "sub" / "list.yml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n" + _indent(RESOURCE_INTERFACE.replace("v2", "v3"))
    )
    (tmp_path / "sub" / "one.json").write_text(
        '{"apiVersion": "run.ai/v1alpha1", "kind": "Karta", "metadata": {"name": "j"},'
        ' "spec": {"structureDefinition": {"rootComponent": {"name": "r", "kind": '
        '{"group": "example.com", "version": "v4", "kind": "Gadget"}, '
        '"statusDefinition": {"statusMappings": {}}}}}}'
    )
    (tmp_path / "README.md").write_text("not yaml: [")
    names = [d.name for d in load_definitions(tmp_path)]
    assert names == ["widgets", "example-com-gadget-v2", "example-com-gadget-v3", "j"]
    sources = [d.source for d in load_definitions(tmp_path / "both.yaml")]
    assert sources == [f"{tmp_path}/both.yaml#1", f"{tmp_path}/both.yaml#2"]


def _indent(text: str) -> str:
    lines = text.splitlines()
    return "\n".join(["- " + lines[0]] + ["  " + line for line in lines[1:]]) + "\n"


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: run.ai/v1alpha1\nkind: Karta\nspec:\n  a: [1, 2\n")
    with pytest.raises(MalformedYamlError) as info:
        load_definitions(bad)
    assert str(bad) in str(info.value)
    assert "line 5" in str(info.value)
    assert info.value.exit_code == 2


def test_missing_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_definitions(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"apiVersion": "v1", "kind": "Pod"}, "not a Workload Map definition: found v1 Pod"),
        ([1, 2], "expected a mapping, got a list"),
        ({"kind": "Karta"}, "found <no apiVersion> Karta"),
    ],
)
def test_documents_that_are_not_definitions(data: Any, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        definition_from_dict(data, source="x.yaml")


def test_every_type_problem_is_reported_with_its_field() -> None:
    (document,) = parse_documents(
        KARTA.replace("replicasPath: .spec.replicas", "replicasPath: 3").replace(
            "podTemplateSpecPath: .spec.template", "podTemplateSpecPath: [a]"
        ),
        "w.yaml",
    )
    data = dict(document.data)
    data["spec"]["structureDefinition"]["childComponents"] = {"name": "oops"}
    with pytest.raises(DefinitionInvalidError) as info:
        definition_from_dict(data, source="w.yaml")
    problems = info.value.problems
    root = "spec.structureDefinition.rootComponent"
    assert f"{root}.specDefinition.podTemplateSpecPath: expected a string, got a list" in problems
    assert f"{root}.scaleDefinition.replicasPath: expected a string, got a number" in problems
    assert "spec.structureDefinition.childComponents: expected a list, got a mapping" in problems
    assert "definition 'widgets' is invalid (3 problem(s))" in str(info.value)


def test_timestamps_stay_strings() -> None:
    (document,) = parse_documents("a: 2026-05-01T10:00:00Z\nb: 2026-05-01\n", "t.yaml")
    assert document.data == {"a": "2026-05-01T10:00:00Z", "b": "2026-05-01"}


def test_status_order_is_upstreams() -> None:
    assert STATUS_ORDER == (
        "Resuming",
        "Suspending",
        "Suspended",
        "Running",
        "Failed",
        "Completed",
        "Initializing",
        "Degraded",
    )
