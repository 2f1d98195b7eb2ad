"""What definitions say about pods: label reads and the labels a framework would set."""

from __future__ import annotations

import pytest

from placer.definitions import Catalog, expected_pod_labels
from placer.definitions.pods import pod_field_key


@pytest.mark.parametrize(
    ("expression", "key"),
    [
        (
            '.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]',
            ("labels", "jobset.sigs.k8s.io/replicatedjob-name"),
        ),
        (".metadata.labels.app", ("labels", "app")),
        ('.metadata.labels["g"] // "0"', ("labels", "g")),
        ('.metadata.labels["c"] | ascii_downcase', ("labels", "c")),
        ('(.metadata.annotations["a"])?', ("annotations", "a")),
        ('.metadata.labels["a"] // .metadata.labels["b"]', ("labels", "a")),
        ("[.metadata.ownerReferences[]? | .uid][0]", None),
        (".labels.app", None),
        ('.spec.metadata.labels["x"]', None),
        (".a[", None),
    ],
)
def test_pod_field_key(expression: str, key: tuple[str, str] | None) -> None:
    assert pod_field_key(expression) == key


def test_labels_for_a_jobset_pod(catalog: Catalog) -> None:
    definition = catalog.get("jobset-x-k8s-io-jobset-v1alpha2")
    assert expected_pod_labels(definition, "replicatedjob", "workers", workload_name="demo") == {
        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "jobset.sigs.k8s.io/jobset-name": "demo",
    }


def test_labels_for_pytorch_and_lws_and_milvus(catalog: Catalog) -> None:
    torch = catalog.get("kubeflow-org-pytorchjob-v1")
    assert expected_pod_labels(torch, "worker", workload_name="bert") == {
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/job-name": "bert",
    }
    lws = catalog.get("leaderworkerset-x-k8s-io-leaderworkerset-v1")
    assert expected_pod_labels(lws, "leader", workload_name="l", replica_index=1) == {
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
        "leaderworkerset.sigs.k8s.io/group-index": "1",
        "leaderworkerset.sigs.k8s.io/name": "l",
    }
    milvus = catalog.get("milvus-io-milvus-v1beta1")
    assert expected_pod_labels(milvus, "pulsar-broker") == {"app": "pulsar", "component": "broker"}


def test_labels_match_the_definition_selectors(catalog: Catalog) -> None:
    ray = catalog.get("ray-io-raycluster-v1")
    labels = expected_pod_labels(ray, "worker", "gpu-group", workload_name="rc")
    assert labels == {
        "ray.io/node-type": "worker",
        "ray.io/group": "gpu-group",
        "ray.io/cluster": "rc",
    }
