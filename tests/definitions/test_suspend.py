"""Suspend and resume with a definition's suspendDefinition, on copies."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from placer.definitions import Catalog, Document, can_suspend, phases_of, resume, suspend
from placer.errors import DefinitionError

Sample = Callable[[str], list[Document]]


def test_jobset_round_trip(catalog: Catalog, sample: Sample) -> None:
    obj = sample("jobset")[0].data
    original = copy.deepcopy(obj)
    definition = catalog.find(obj["apiVersion"], obj["kind"])
    assert can_suspend(definition)
    suspended = suspend(obj, definition)
    assert suspended["spec"]["suspend"] is True
    assert obj == original  # never modified in place
    resumed = resume(suspended, definition)
    assert resumed["spec"]["suspend"] is False
    assert resumed["spec"]["replicatedJobs"] == obj["spec"]["replicatedJobs"]


def test_nested_paths_are_created(catalog: Catalog, sample: Sample) -> None:
    obj = sample("pytorchjob")[0].data
    assert "runPolicy" not in obj["spec"]
    suspended = suspend(obj, catalog.find(obj["apiVersion"], obj["kind"]))
    assert suspended["spec"]["runPolicy"] == {"suspend": True}


def test_string_values_and_phases(catalog: Catalog, sample: Sample) -> None:
    obj = sample("sandbox")[0].data
    definition = catalog.find(obj["apiVersion"], obj["kind"])
    suspended = suspend(obj, definition)
    assert suspended["spec"]["operatingMode"] == "Suspended"
    suspended["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert phases_of(suspended, definition) == ("Suspending",)
    assert resume(suspended, definition)["spec"]["operatingMode"] == "Running"


def test_kinds_without_suspend_definition(catalog: Catalog, sample: Sample) -> None:
    obj = sample("deployment")[0].data
    definition = catalog.find(obj["apiVersion"], obj["kind"])
    assert not can_suspend(definition)
    with pytest.raises(DefinitionError, match="has no suspendDefinition"):
        suspend(obj, definition)
    with pytest.raises(DefinitionError, match="cannot be resumed"):
        resume(obj, definition)


def test_every_suspendable_builtin_kind_round_trips(catalog: Catalog) -> None:
    for definition in catalog.definitions:
        if not can_suspend(definition):
            continue
        target = definition.target
        assert target is not None
        obj = {"apiVersion": target.api_version, "kind": target.kind, "metadata": {"name": "x"}}
        assert resume(suspend(obj, definition), definition) != obj
