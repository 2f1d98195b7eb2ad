"""PlacementPolicy parsing (errors name file and field) and matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.errors import PolicyError
from placer.model import Cluster, ComponentDemand, PodDemand, Workload, WorkloadRef
from placer.policy import load_policies, policies_from_yaml, policy_for

GOOD = """
apiVersion: placer.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: training}
spec:
  namespaceSelector:
    matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [team-a]}]
  resourceSelectors:
    labelSelectors:
    - matchLabels: {team: vision}
  clusterSelector:
    matchLabels: {provider: onprem}
    matchExpressions: [{key: region, operator: NotIn, values: [us-east-1]}]
  preferredClusters: [central, east]
  objective: spread
  clusterCosts: {east: 3, west: 2.5}
---
apiVersion: placer.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: everything-else}
"""


def _workload(namespace: str, labels: dict[str, str]) -> Workload:
    pod = PodDemand(requests={"cpu": 1000})
    return Workload(
        ref=WorkloadRef("batch/v1", "Job", namespace, "j"),
        components=(ComponentDemand("main", "", 1, pod),),
        labels=labels,
    )


def test_a_full_policy_parses_and_matches(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(GOOD)
    training, rest = load_policies(path)
    assert training.name == "training"
    assert training.objective == "spread"
    assert training.preferred_clusters == ("central", "east")
    assert training.cost("west") == 2.5 and training.cost("central") == 0.0
    assert training.rank("east") == 1 and training.rank("west") == 2
    vision = _workload("team-a", {"team": "vision"})
    assert policy_for(vision, [training, rest]) is training
    assert policy_for(_workload("team-b", {"team": "vision"}), [training, rest]) is rest
    assert policy_for(_workload("team-a", {"team": "nlp"}), [training, rest]) is rest
    onprem = Cluster(name="central", labels={"provider": "onprem", "region": "eu"})
    east = Cluster(name="east", labels={"provider": "onprem", "region": "us-east-1"})
    assert training.admits(onprem) and not training.admits(east)
    assert rest.admits(east)


def test_cluster_selector_can_name_clusters() -> None:
    (policy,) = policies_from_yaml(
        "apiVersion: placer.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\n"
        "spec: {clusterSelector: {matchLabels: {kubernetes.io/metadata.name: west}}}\n"
    )
    assert policy.admits(Cluster(name="west")) and not policy.admits(Cluster(name="east"))


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ("{objective: tight}", "spec.objective", "'tight' is not one of pack, spread"),
        ("{preferred: [a]}", "spec.preferred", "unknown field 'preferred'"),
        (
            "{clusterSelector: {matchExpressions: [{key: a, operator: Near}]}}",
            "spec.clusterSelector.matchExpressions[0].operator",
            "operator 'Near' is not one of In, NotIn, Exists, DoesNotExist",
        ),
        (
            "{clusterSelector: {matchExpressions: [{key: a, operator: In}]}}",
            "spec.clusterSelector.matchExpressions[0].values",
            "operator In needs at least one value",
        ),
        ("{clusterCosts: {east: -1}}", "spec.clusterCosts.east", "must be a number >= 0"),
        ("{preferredClusters: [a, a]}", "spec.preferredClusters", "names a cluster twice"),
        ("{resourceSelectors: [x]}", "spec.resourceSelectors", "must be a mapping"),
    ],
)
def test_errors_name_file_and_field(tmp_path: Path, spec: str, field: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: placer.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\n"
        f"spec: {spec}\n"
    )
    with pytest.raises(PolicyError) as caught:
        load_policies(path)
    assert str(caught.value).startswith(f"{path}: {field}: {message}")


def test_document_level_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no such file"):
        load_policies(tmp_path / "missing.yaml")
    with pytest.raises(PolicyError, match="holds no PlacementPolicy"):
        policies_from_yaml("", source="empty.yaml")
    with pytest.raises(PolicyError, match="not valid YAML: line "):
        policies_from_yaml("a: [", source="x.yaml")
    with pytest.raises(PolicyError, match=r"x.yaml: kind: kind is 'Other'"):
        policies_from_yaml("apiVersion: placer.dev/v1alpha1\nkind: Other\n", source="x.yaml")
    twice = "apiVersion: placer.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\n"
    with pytest.raises(PolicyError, match=r"\(document 2\): metadata.name: a second policy"):
        policies_from_yaml(twice + "---\n" + twice, source="x.yaml")
