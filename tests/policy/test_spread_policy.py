"""The spreading fields of a PlacementPolicy (Karmada's names): parsed strictly, errors name
the field; overrides applied to a copy."""

from __future__ import annotations

from typing import Any

import pytest

from placer.errors import PolicyError
from placer.model import Cluster
from placer.policy import policies_from_yaml
from placer.spread import apply_overrides, rewrite_image

HEAD = "apiVersion: placer.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\nspec:\n"


def parse(spec: str) -> Any:
    (policy,) = policies_from_yaml(HEAD + spec, source="p.yaml")
    return policy


def test_karmada_fields_parse() -> None:
    policy = parse(
        """  replicaScheduling:
    replicaSchedulingType: Divided
    replicaDivisionPreference: Weighted
    weightPreference:
      staticWeightList:
      - targetCluster: {clusterNames: [east, west]}
        weight: 2
      - targetCluster: {labelSelector: {matchLabels: {region: eu}}}
        weight: 1
    maxReplicasPerCluster: 5
  spreadConstraints: [{spreadByField: cluster, minGroups: 2, maxGroups: 3}]
"""
    )
    spread = policy.spread
    scheduling = spread.scheduling
    assert (scheduling.type, scheduling.division, scheduling.dynamic) == (
        "Divided",
        "Weighted",
        False,
    )
    assert scheduling.max_per_cluster == 5 and scheduling.min_per_cluster == 0
    assert (spread.min_clusters, spread.max_clusters) == (2, 3)
    assert scheduling.static_weight(Cluster("west")) == 2
    assert scheduling.static_weight(Cluster("x", labels={"region": "eu"})) == 1
    assert scheduling.static_weight(Cluster("x")) == 0
    assert parse("  objective: pack\n").spread is None


@pytest.mark.parametrize(
    ("spec", "field", "text"),
    [
        (
            "  replicaScheduling: {replicaSchedulingType: Split}\n",
            "spec.replicaScheduling.replicaSchedulingType",
            "'Split' is not one of Duplicated, Divided",
        ),
        (
            "  replicaScheduling: {replicaSchedulingType: Divided, weightPreference: "
            "{dynamicWeight: Free}}\n",
            "spec.replicaScheduling.weightPreference.dynamicWeight",
            "is not AvailableReplicas",
        ),
        (
            "  replicaScheduling: {replicaSchedulingType: Divided, weightPreference: "
            "{staticWeightList: [{targetCluster: {clusterNames: [a]}, weight: 0}]}}\n",
            "spec.replicaScheduling.weightPreference.staticWeightList[0].weight",
            "must be an integer >= 1",
        ),
        (
            "  replicaScheduling: {replicaSchedulingType: Duplicated, "
            "replicaDivisionPreference: Aggregated}\n",
            "spec.replicaScheduling.replicaSchedulingType",
            "apply to Divided only",
        ),
        (
            "  replicaScheduling: {replicas: 3}\n",
            "spec.replicaScheduling.replicas",
            "unknown field 'replicas'",
        ),
        (
            "  spreadConstraints: [{spreadByField: region, maxGroups: 2}]\n",
            "spec.spreadConstraints[0].spreadByField",
            "spreads by cluster only",
        ),
        (
            "  overrideRules: [{overriders: {imageOverrider: [{component: Host, value: x}]}}]\n",
            "spec.overrideRules[0].overriders.imageOverrider[0].component",
            "'Host' is not one of Registry, Repository, Tag",
        ),
        (
            "  overrideRules: [{overriders: {plaintext: [{path: spec, operator: add}]}}]\n",
            "spec.overrideRules[0].overriders.plaintext[0].path",
            "must be a JSON pointer",
        ),
    ],
)
def test_errors_name_the_field(spec: str, field: str, text: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse(spec)
    message = str(caught.value)
    assert "p.yaml" in message and field in message and text in message


def test_image_rewrites() -> None:
    assert rewrite_image("nvcr.io/nvidia/triton:24.05", "Registry", "eu.example") == (
        "eu.example/nvidia/triton:24.05"
    )
    assert rewrite_image("nginx", "Registry", "eu.example") == "eu.example/nginx"
    assert rewrite_image("localhost:5000/a/b:1", "Tag", "2") == "localhost:5000/a/b:2"
    assert rewrite_image("a/b@sha256:00", "Repository", "c/d") == "c/d@sha256:00"


def test_overrides_apply_to_the_matching_cluster_only() -> None:
    policy = parse(
        """  overrideRules:
  - targetCluster: {labelSelector: {matchLabels: {region: eu}}}
    overriders:
      imageOverrider: [{component: Registry, operator: replace, value: eu.example}]
      plaintext: [{path: /metadata/labels/region, operator: add, value: eu}]
      mergePatch: {spec: {template: {metadata: {annotations: {tier: eu}}}}}
"""
    )
    manifest = {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "template": {
                "spec": {
                    "initContainers": [{"name": "i", "image": "busybox"}],
                    "containers": [{"name": "c", "image": "nvcr.io/x/y:1"}],
                }
            }
        },
    }
    rules = policy.spread.overrides
    eu = apply_overrides(manifest, Cluster("c", labels={"region": "eu"}), rules)
    assert eu["metadata"]["labels"] == {"app": "web", "region": "eu"}
    pod = eu["spec"]["template"]
    assert pod["spec"]["containers"][0]["image"] == "eu.example/x/y:1"
    assert pod["spec"]["initContainers"][0]["image"] == "eu.example/busybox"
    assert pod["metadata"]["annotations"] == {"tier": "eu"}
    assert apply_overrides(manifest, Cluster("u", labels={"region": "us"}), rules) == manifest
    assert manifest["metadata"]["labels"] == {"app": "web"}  # the input is not changed


def test_an_override_that_does_not_apply_names_the_cluster() -> None:
    policy = parse(
        "  overrideRules: [{overriders: {plaintext: [{path: /spec/missing/x, "
        "operator: replace, value: 1}]}}]\n"
    )
    with pytest.raises(ValueError, match="override for cluster east does not apply"):
        apply_overrides({"spec": {}}, Cluster("east"), policy.spread.overrides)
