"""Validation: upstream's rules (spec section 10) plus placer's, each naming component and field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from placer.definitions import Catalog, check_definition, definition_from_dict, validate_definition
from placer.errors import DefinitionInvalidError

BASE: dict[str, Any] = {
    "apiVersion": "run.ai/v1alpha1",
    "kind": "Karta",
    "metadata": {"name": "widgets"},
    "spec": {
        "structureDefinition": {
            "rootComponent": {
                "name": "widget",
                "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
                "statusDefinition": {
                    "phaseDefinition": {"path": ".status.phase"},
                    "statusMappings": {"running": [{"byPhase": "Running"}]},
                },
            },
            "childComponents": [
                {
                    "name": "worker",
                    "ownerRef": "widget",
                    "specDefinition": {"podTemplateSpecPath": ".spec.workers[].template"},
                    "scaleDefinition": {"replicasPath": ".spec.workers[].replicas"},
                    "instanceIdPath": ".spec.workers[].name",
                    "podSelector": {
                        "componentInstanceSelector": {"idPath": '.metadata.labels["w"]'}
                    },
                }
            ],
        },
        "optimizationInstructions": {
            "gangScheduling": {
                "podGroups": [
                    {
                        "name": "all",
                        "members": [
                            {
                                "componentName": "worker",
                                "groupByKeyPaths": ['.metadata.labels["w"]'],
                            }
                        ],
                    }
                ]
            }
        },
    },
}
ROOT = "spec.structureDefinition.rootComponent"
CHILD = "spec.structureDefinition.childComponents[0]"


def problems_after(change: Any) -> list[str]:
    data = copy.deepcopy(BASE)
    change(data)
    return validate_definition(definition_from_dict(data, source="w.yaml"))


def root(data: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = data["spec"]["structureDefinition"]["rootComponent"]
    return value


def child(data: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = data["spec"]["structureDefinition"]["childComponents"][0]
    return value


def test_the_base_definition_is_valid() -> None:
    assert problems_after(lambda d: None) == []


def test_duplicate_names_stop_validation() -> None:
    problems = problems_after(lambda d: child(d).update(name="widget", ownerRef=None))
    assert problems == ["component name widget is not unique"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: root(d).pop("kind"),
            f"component 'widget' {ROOT}: root component must have full kind (group, version, kind)",
        ),
        (
            lambda d: root(d)["kind"].update(group=""),
            "root component must have full kind",
        ),
        (
            lambda d: root(d).update(ownerRef="x"),
            f"component 'widget' {ROOT}: root component cannot have owner ref",
        ),
        (
            lambda d: root(d).pop("statusDefinition"),
            f"component 'widget' {ROOT}: root component must have status definition",
        ),
        (
            lambda d: child(d).pop("ownerRef"),
            f"component 'worker' {CHILD}: child component 'worker' has no owner ref",
        ),
        (
            lambda d: child(d).update(ownerRef="ghost"),
            "child component 'worker' has owner ref to non-existing component 'ghost'",
        ),
        (
            lambda d: child(d)["specDefinition"].update(podSpecPath=".spec.x"),
            f"component 'worker' {CHILD}: component 'worker' has multiple pod spec definitions",
        ),
        (
            lambda d: child(d).pop("podSelector"),
            "component 'worker' has instance id path but no pod component instance selector",
        ),
        (
            lambda d: child(d).pop("instanceIdPath"),
            "component 'worker' has pod component instance selector but no instance id path",
        ),
        (
            lambda d: d["spec"]["optimizationInstructions"]["gangScheduling"]["podGroups"][0][
                "members"
            ][0].update(componentName="ghost"),
            "pod-group member component 'ghost' is not defined (should be a root or child "
            "component)",
        ),
        (
            lambda d: d["spec"]["optimizationInstructions"]["gangScheduling"].update(
                podGroup={"name": "g", "subGroups": [{"componentName": "ghost"}]}
            ),
            "podGroup.subGroups[0]: sub-group component 'ghost' is not defined",
        ),
        (
            lambda d: child(d)["podSelector"].update(componentTypeSelector={"value": "x"}),
            f"component 'worker' {CHILD}.podSelector.componentTypeSelector: at least one of "
            "keyPath or matchLabels must be set",
        ),
        (
            lambda d: child(d)["podSelector"].update(
                componentTypeSelector={"value": "x", "matchLabels": {"a": "b"}}
            ),
            "componentTypeSelector: value requires keyPath",
        ),
        (
            lambda d: root(d).update(
                suspendDefinition={
                    "suspendActions": [{"path": ".spec.mode", "value": "Suspended"}],
                    "resumeActions": [{"path": ".spec.mode", "value": '"Running"'}],
                }
            ),
            f"component 'widget' {ROOT}.suspendDefinition.suspendActions[0].value: 'Suspended' "
            "is not JSON",
        ),
    ],
)
def test_structural_rules(change: Any, expected: str) -> None:
    problems = problems_after(change)
    assert any(expected in p for p in problems), problems


def test_ownership_cycles() -> None:
    def cycle(d: dict[str, Any]) -> None:
        children = d["spec"]["structureDefinition"]["childComponents"]
        children[0]["ownerRef"] = "other"
        children.append({"name": "other", "ownerRef": "worker"})

    assert problems_after(cycle) == ["ownership cycle detected involving component worker"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: child(d)["scaleDefinition"].update(replicasPath="range(3)"),
            f"component 'worker' {CHILD}.scaleDefinition.replicasPath: JQ expression 'range(3)' "
            "failed validation: function 'range' may produce excessive output and is not allowed",
        ),
        (
            lambda d: child(d).update(instanceIdPath=".spec.workers[] | .name |= 1"),
            "instanceIdPath: JQ expression '.spec.workers[] | .name |= 1' failed validation: "
            "modifying operator '|=' is not allowed",
        ),
        (
            lambda d: root(d)["statusDefinition"]["statusMappings"].update(
                failed=[{"byExpression": {"expression": "[..] | length", "expectedResult": "1"}}]
            ),
            "statusMappings.failed[0].byExpression.expression: JQ expression '[..] | length' "
            "failed validation: recursive descent operator '..' is not allowed",
        ),
        (
            lambda d: child(d)["podSelector"]["componentInstanceSelector"].update(idPath=".a["),
            "podSelector.componentInstanceSelector.idPath: failed to parse JQ expression '.a['",
        ),
        (
            lambda d: d["spec"]["optimizationInstructions"]["gangScheduling"]["podGroups"][0][
                "members"
            ][0]["groupByKeyPaths"].append("del(.x)"),
            "podGroups[0].members[0].groupByKeyPaths[1]: JQ expression 'del(.x)' failed "
            "validation: del function is not allowed",
        ),
        (
            lambda d: child(d)["scaleDefinition"].update(minReplicasPath=""),
            "scaleDefinition.minReplicasPath: empty jq expression",
        ),
        (
            lambda d: child(d)["specDefinition"].update(
                podTemplateSpecPath="def f: walk(.); .spec.workers[].template"
            ),
            "function 'walk' may produce excessive output",
        ),
    ],
)
def test_jq_rules(change: Any, expected: str) -> None:
    problems = problems_after(change)
    assert any(expected in p for p in problems), problems


def test_all_problems_are_reported_at_once() -> None:
    def many(d: dict[str, Any]) -> None:
        root(d).update(ownerRef="x")
        child(d)["scaleDefinition"].update(replicasPath="repeat(1)")
        child(d)["specDefinition"].update(podTemplateSpecPath=".a[")

    assert len(problems_after(many)) == 3


def test_check_definition_raises_naming_the_definition_and_source() -> None:
    data = copy.deepcopy(BASE)
    root(data).pop("statusDefinition")
    definition = definition_from_dict(data, source="w.yaml")
    with pytest.raises(DefinitionInvalidError) as info:
        check_definition(definition)
    assert str(info.value).startswith("w.yaml: definition 'widgets' is invalid (1 problem(s))")
    with pytest.raises(DefinitionInvalidError):
        Catalog().with_definitions([definition])


def test_the_builtin_catalog_is_valid(catalog: Catalog) -> None:
    assert len(catalog) == 23
    for definition in catalog.definitions:
        assert validate_definition(definition) == [], definition.name
