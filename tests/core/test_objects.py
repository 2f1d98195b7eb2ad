"""placer.objects: one accessor for each metadata field, tolerant of hostile objects."""

from __future__ import annotations

from typing import Any

import pytest

from placer.objects import (
    annotations_of,
    finalizers_of,
    generation_of,
    is_deleting,
    labels_of,
    meta,
    name_key,
    name_of,
    namespace_of,
    owner_references_of,
    uid_of,
    version_of,
)

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "42",
        "generation": 3,
        "labels": {"app": "x", "bad": 5},
        "annotations": {"a": "b", "n": None},
        "finalizers": ["placer.dev/placement", 7],
        "ownerReferences": [{"uid": "o-1", "controller": True}, "junk"],
        "deletionTimestamp": "2026-01-01T00:00:00Z",
    },
}


def test_accessors_read_every_field() -> None:
    assert name_of(POD) == "p"
    assert namespace_of(POD) == "team-a"
    assert name_key(POD) == ("team-a", "p")
    assert uid_of(POD) == "u-1"
    assert version_of(POD) == "42"
    assert generation_of(POD) == 3
    assert labels_of(POD) == {"app": "x"}
    assert annotations_of(POD) == {"a": "b"}
    assert finalizers_of(POD) == ["placer.dev/placement"]
    assert owner_references_of(POD) == [{"uid": "o-1", "controller": True}]
    assert is_deleting(POD)


@pytest.mark.parametrize("metadata", [None, [], "x", 5, {}])
def test_absent_or_malformed_metadata_reads_as_empty(metadata: object) -> None:
    obj = {"kind": "Pod", "metadata": metadata}
    assert meta(obj) == {}
    assert (name_of(obj), namespace_of(obj), uid_of(obj), version_of(obj)) == ("", "", "", "")
    assert name_key(obj) == ("", "")
    assert generation_of(obj) is None
    assert labels_of(obj) == {} and annotations_of(obj) == {}
    assert finalizers_of(obj) == [] and owner_references_of(obj) == []
    assert not is_deleting(obj)


def test_values_of_the_wrong_type_read_as_absent() -> None:
    obj = {"metadata": {"name": 5, "uid": ["u"], "generation": True, "labels": ["a"]}}
    assert name_of(obj) == "" and uid_of(obj) == ""
    assert generation_of(obj) is None
    assert labels_of(obj) == {}


def test_labels_are_a_copy() -> None:
    labels = labels_of(POD)
    labels["new"] = "y"
    assert "new" not in POD["metadata"]["labels"]
