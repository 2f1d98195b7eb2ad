"""What changed in a manifest since placer placed it (placer.dispatch.changes, pure)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from placer.definitions import Catalog, decompose
from placer.dispatch.changes import copy_changed, describe_changes, field_differences
from placer.dispatch.outcomes import Manifest
from placer.dispatch.record import (
    ANNOTATION_MANIFEST,
    ANNOTATION_MOVING_FROM,
    PlacementRecord,
    dispatch_manifest,
)

SEED = Path(__file__).resolve().parents[2] / "examples" / "jobset-demo.yaml"
CATALOG = Catalog.builtin()


def manifest(data: dict[str, Any]) -> Manifest:
    return Manifest(data, decompose(data, CATALOG))


def seed() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(SEED.read_text())
    return data


def placed(data: dict[str, Any]) -> dict[str, Any]:
    """The copy as a member stores it: the body placer applied, plus what the server adds."""
    m = manifest(data)
    record = PlacementRecord("central", "d1", "2026-01-01T00:00:00Z")
    body = dispatch_manifest(m.body, m.ref, record)
    body["metadata"].update(uid="u1", resourceVersion="7", generation=1)
    body["spec"]["managedBy"] = "jobset.sigs.k8s.io/jobset-controller"  # a server default
    body["status"] = {"replicatedJobsStatus": []}
    return body


def test_the_same_manifest_is_unchanged_whatever_the_server_added() -> None:
    live = placed(seed())
    reordered = dict(reversed(list(seed().items())))
    assert not copy_changed(manifest(seed()), live)
    assert not copy_changed(manifest(reordered), live)


def test_any_field_the_user_changed_or_removed_counts() -> None:
    live = placed(seed())
    changed = seed()
    changed["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 3
    assert copy_changed(manifest(changed), live)
    removed = seed()
    del removed["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"]
    assert copy_changed(manifest(removed), live)
    assert describe_changes(manifest(removed), live) == (
        "fields the manifest no longer sets are removed",
    )


def test_a_copy_without_the_hash_is_compared_field_by_field() -> None:
    live = placed(seed())
    del live["metadata"]["annotations"][ANNOTATION_MANIFEST]
    assert not copy_changed(manifest(seed()), live)
    changed = seed()
    changed["spec"]["replicatedJobs"][1]["replicas"] = 3
    assert copy_changed(manifest(changed), live)


def test_a_copy_waiting_in_a_move_is_changed_until_resumed() -> None:
    live = placed(seed())
    live["metadata"]["annotations"][ANNOTATION_MOVING_FROM] = "east"
    live["spec"]["suspend"] = True
    assert copy_changed(manifest(seed()), live)
    assert describe_changes(manifest(seed()), live)[0] == "resumed after its move from east"


def test_changes_name_replicas_requests_and_images_per_component() -> None:
    live = placed(seed())
    changed = seed()
    worker = changed["spec"]["replicatedJobs"][1]
    worker["replicas"] = 3
    container = worker["template"]["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "trainer:v2"
    container["resources"]["limits"]["nvidia.com/gpu"] = 8
    assert describe_changes(manifest(changed), live) == (
        "replicatedjob/worker: replicas 2 -> 3",
        "replicatedjob/worker: requests per pod nvidia.com/gpu 4 -> 8",
        "replicatedjob/worker: image trainer nvcr.io/nvidia/pytorch:24.05-py3 -> trainer:v2",
    )


def test_other_fields_are_named_with_their_values() -> None:
    live = placed(seed())
    changed = seed()
    changed["spec"]["ttlSecondsAfterFinished"] = 600
    changed["metadata"]["labels"] = {"team": "a"}
    assert describe_changes(manifest(changed), live) == (
        "metadata.labels.team: (none) -> a",
        "spec.ttlSecondsAfterFinished: (none) -> 600",
    )


def test_field_differences_compare_lists_by_item_and_ignore_server_keys() -> None:
    desired = {"a": [{"x": 1}, {"x": 2}], "b": "1"}
    live = {"a": [{"x": 1, "default": True}, {"x": 3}], "b": "1", "c": "server"}
    assert field_differences(desired, live) == ["a[1].x: 3 -> 2"]
    assert field_differences({"a": [1]}, {"a": [1, 2]}) == ["a: 2 items -> 1"]
    assert field_differences({"n": 1}, {"n": "1"}) == []  # a number the server keeps as text
    assert field_differences(copy.deepcopy(desired), desired) == []
