"""The placement record: label-safe values, round trip through an object, the applied body."""

from __future__ import annotations

import re

from placer.dispatch.record import (
    ANNOTATION_PLAN,
    LABEL_PLACED_CLUSTER,
    PlacementRecord,
    dispatch_manifest,
    label_value,
    new_decision_id,
)
from placer.model import Placement, PodAssignment, WorkloadRef

LABEL = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
REF = WorkloadRef("jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "train")


def test_label_values_stay_valid_and_distinct() -> None:
    assert label_value("central") == "central"
    odd = [
        "arn:aws:eks:us-east-1:123456789012:cluster/prod",
        "admin@kind-kind",
        "x" * 80,
        "-leading",
        "///",
    ]
    values = [label_value(text) for text in odd]
    assert all(len(v) <= 63 and LABEL.match(v) for v in values)
    assert len(set(values)) == len(values)
    assert label_value("x" * 80) != label_value("x" * 81)
    assert LABEL.match(new_decision_id())


def test_record_round_trip_through_the_applied_object() -> None:
    placement = Placement(
        REF,
        "user@prod",
        (
            PodAssignment("replicatedjob", "worker", 1, "n2"),
            PodAssignment("replicatedjob", "worker", 0, "n1"),
            PodAssignment("replicatedjob", "leader", 0, "n1"),
        ),
        {},
    )
    record = PlacementRecord.for_placement(placement, "d-1", "2026-01-01T00:00:00Z")
    manifest = {
        "apiVersion": REF.api_version,
        "kind": "JobSet",
        "metadata": {
            "name": "train",
            "labels": {"team": "vision"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "uid": "hub-uid",
            "resourceVersion": "7",
            "managedFields": [{"manager": "kubectl"}],
            "ownerReferences": [{"uid": "x"}],
            "finalizers": ["hub/finalizer"],
        },
        "spec": {"suspend": True},
        "status": {"conditions": []},
    }
    body = dispatch_manifest(manifest, REF, record)
    metadata = body["metadata"]
    assert metadata["namespace"] == "team-a"  # the workload's namespace, always explicit
    for key in ("uid", "resourceVersion", "managedFields", "ownerReferences", "finalizers"):
        assert key not in metadata
    assert "status" not in body and body["spec"] == {"suspend": True}
    assert metadata["labels"]["team"] == "vision"
    assert LABEL.match(metadata["labels"][LABEL_PLACED_CLUSTER])
    assert "kubectl.kubernetes.io/last-applied-configuration" not in metadata["annotations"]
    assert metadata["annotations"][ANNOTATION_PLAN] == (
        '{"replicatedjob/leader":["n1"],"replicatedjob/worker":["n1","n2"]}'
    )
    assert manifest["metadata"]["uid"] == "hub-uid"  # the input is not changed
    again = PlacementRecord.from_object(body)
    assert again == record
    assert PlacementRecord.from_object(manifest) is None


def test_a_hand_edited_plan_is_dropped_not_fatal() -> None:
    obj = {
        "metadata": {
            "labels": {"placer.dev/placed-by": "placer"},
            "annotations": {"placer.dev/placed-cluster": "east", ANNOTATION_PLAN: "{not json"},
        }
    }
    record = PlacementRecord.from_object(obj)
    assert record is not None and record.cluster == "east" and record.plan == {}
