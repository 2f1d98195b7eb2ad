"""Status mapping: every status each built-in definition maps, on a sample object that has it.

The cases live in ``samples/status.yaml``; the expected phases are exact (upstream's fixed
order, several statuses may match at once, ``Undefined`` when none does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.definitions import Catalog, definition_from_dict, phases_of

CASES: dict[str, list[dict[str, Any]]] = yaml.safe_load(
    (Path(__file__).parent / "samples" / "status.yaml").read_text()
)


def _object(catalog: Catalog, name: str, case: dict[str, Any]) -> dict[str, Any]:
    target = catalog.get(name).target
    assert target is not None
    obj: dict[str, Any] = {
        "apiVersion": target.api_version,
        "kind": target.kind,
        "metadata": {"name": "sample", **case.get("metadata", {})},
        "spec": case.get("spec", {}),
    }
    if "status" in case:
        obj["status"] = case["status"]
    return obj


@pytest.mark.parametrize(
    ("name", "index"),
    [(name, i) for name, cases in sorted(CASES.items()) for i in range(len(cases))],
)
def test_status_sample_matches_exactly(catalog: Catalog, name: str, index: int) -> None:
    case = CASES[name][index]
    assert phases_of(_object(catalog, name, case), catalog) == tuple(case["expect"])


def test_every_mapped_status_has_a_sample(catalog: Catalog) -> None:
    assert set(CASES) == {d.name for d in catalog.definitions}
    for definition in catalog.definitions:
        status = definition.root.status
        assert status is not None
        covered = {phase for case in CASES[definition.name] for phase in case["expect"]}
        missing = set(status.mappings) - covered
        assert not missing, f"{definition.name}: no sample for {sorted(missing)}"


def _definition(mappings: dict[str, Any], **status: Any) -> Any:
    return definition_from_dict(
        {
            "apiVersion": "run.ai/v1alpha1",
            "kind": "Karta",
            "metadata": {"name": "t"},
            "spec": {
                "structureDefinition": {
                    "rootComponent": {
                        "name": "root",
                        "kind": {"group": "example.com", "version": "v1", "kind": "Thing"},
                        "statusDefinition": {**status, "statusMappings": mappings},
                    }
                }
            },
        }
    )


def _thing(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "x"},
        "status": status,
    }


def test_fixed_order_and_several_matches() -> None:
    definition = _definition(
        {
            "degraded": [{"byPhase": "Up"}],
            "running": [{"byPhase": "Up"}],
            "resuming": [{"byExpression": {"expression": ".status.r", "expectedResult": "true"}}],
        },
        phaseDefinition={"path": ".status.phase"},
    )
    assert phases_of(_thing({"phase": "Up", "r": True}), definition) == (
        "Resuming",
        "Running",
        "Degraded",
    )
    assert phases_of(_thing({"phase": "Down"}), definition) == ("Undefined",)


def test_conditions_clauses_and_defaults() -> None:
    # no typeFieldName/statusFieldName/reasonFieldName: placer applies the CRD defaults to
    # files too (upstream's Go reader does not, so reasons never matched; spec gap 7)
    definition = _definition(
        {
            "failed": [{"byConditions": [{"type": "Ready", "status": "False", "reason": "Crash"}]}],
            "running": [{"byConditions": [{"type": "Ready", "status": "True"}]}],
            "initializing": [{"byConditions": [{"type": "Ready"}]}],
        },
        conditionsDefinition={"path": ".status.conditions"},
    )
    crash = _thing({"conditions": [{"type": "Ready", "status": "False", "reason": "Crash"}]})
    assert phases_of(crash, definition) == ("Failed", "Initializing")
    other = _thing({"conditions": [{"type": "Ready", "status": "False", "reason": "Other"}]})
    assert phases_of(other, definition) == ("Initializing",)
    assert phases_of(_thing({}), definition) == ("Undefined",)


def test_by_expression_uses_tostring_of_the_first_output() -> None:
    definition = _definition(
        {
            "running": [{"byExpression": {"expression": ".status.n, 7", "expectedResult": "3"}}],
            "failed": [{"byExpression": {"expression": "empty", "expectedResult": ""}}],
            "completed": [
                {"byExpression": {"expression": ".status.o", "expectedResult": '{"a":1}'}}
            ],
        }
    )
    assert phases_of(_thing({"n": 3.0, "o": {"a": 1}}), definition) == ("Running", "Completed")


def test_a_phase_of_the_wrong_type_is_an_error() -> None:
    from placer.errors import InterpretationError

    definition = _definition(
        {"running": [{"byPhase": "Up"}]}, phaseDefinition={"path": ".status.phase"}
    )
    with pytest.raises(InterpretationError, match=r"phaseDefinition.path.*expected a string"):
        phases_of(_thing({"phase": 3}), definition)
