"""Every built-in definition on a realistic sample manifest, with totals checked by hand.

Units are placer's canonical ones: cpu in millicores, memory and storage in bytes, everything
else in counts. The arithmetic behind each number is in the comment next to it (effective pod
requests as kube-scheduler computes them: sidecars add, init containers peak, pod-level
resources replace cpu/memory, overhead adds).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from placer.definitions import Catalog, Document, decompose, read_documents
from placer.quantity import add, scale

Sample = Callable[[str], list[Document]]

GI = 2**30
MI = 2**20
GPU = "nvidia.com/gpu"


# (sample file, document index) -> {definition, components: {label: (replicas, per-pod requests)}}
EXPECTED: dict[tuple[str, int], dict[str, Any]] = {
    ("jobset", 0): {
        "definition": "jobset-x-k8s-io-jobset-v1alpha2",
        "components": {
            # driver: running = 4 cpu + 500m sidecar, 16Gi + 512Mi; the init container (2, 4Gi)
            # starts before the sidecar and is smaller.
            "replicatedjob/driver": (1, {"cpu": 4500, "memory": 16 * GI + 512 * MI, GPU: 1}),
            # workers: 4 Jobs x min(parallelism 2, completions 2) pods
            "replicatedjob/workers": (8, {"cpu": 16000, "memory": 128 * GI, GPU: 8, "rdma/ib": 1}),
        },
        "total": {"cpu": 132500, "memory": 1040 * GI + 512 * MI, GPU: 65, "rdma/ib": 8},
        "pods": 9,
        "priority": 10,
    },
    ("jobset", 1): {
        "definition": "jobset-x-k8s-io-jobset-v1alpha2",
        "components": {
            # 2 Jobs x min(parallelism 4, completions 3); requests default to limits
            "replicatedjob/eval": (6, {"cpu": 2000, "memory": 8 * GI, GPU: 1}),
            # parallelism unset: 1 pod per Job, 3 Jobs
            "replicatedjob/report": (3, {"cpu": 500, "memory": 1 * GI}),
        },
        "total": {"cpu": 13500, "memory": 51 * GI, GPU: 6},
        "pods": 9,
    },
    ("job", 0): {
        "definition": "batch-job-v1",
        "components": {
            # containers 750m/1.25Gi < init 1/2Gi, plus overhead 100m/64Mi; 4 pods at a time
            "job": (4, {"cpu": 1100, "memory": 2 * GI + 64 * MI}),
        },
        "total": {"cpu": 4400, "memory": 8 * GI + 256 * MI},
        "pods": 4,
    },
    ("job", 1): {
        "definition": "batch-job-v1",
        "components": {
            # completions 1 < parallelism 4: one pod; a MIG slice from the limits
            "job": (1, {"cpu": 2000, "memory": 10 * GI, "nvidia.com/mig-1g.10gb": 1}),
        },
        "total": {"cpu": 2000, "memory": 10 * GI, "nvidia.com/mig-1g.10gb": 1},
        "pods": 1,
    },
    ("cronjob", 0): {
        "definition": "batch-cronjob-v1",
        "components": {"cronjob": (2, {"cpu": 2000, "memory": 4 * GI, GPU: 1})},
        "total": {"cpu": 4000, "memory": 8 * GI, GPU: 2},
        "pods": 2,
    },
    ("pod", 0): {
        "definition": "core-pod-v1",
        "components": {
            # pod-level resources (4, 8Gi) replace max(running 3/5Gi, init 6/1Gi); GPUs from
            # the container
            "pod": (1, {"cpu": 4000, "memory": 8 * GI, GPU: 2}),
        },
        "total": {"cpu": 4000, "memory": 8 * GI, GPU: 2},
        "pods": 1,
    },
    ("deployment", 0): {
        "definition": "apps-deployment-v1",
        "components": {"deployment": (3, {"cpu": 1100, "memory": 2 * GI + 128 * MI, GPU: 1})},
        "total": {"cpu": 3300, "memory": 6 * GI + 384 * MI, GPU: 3},
        "pods": 3,
    },
    ("deployment", 1): {
        "definition": "apps-deployment-v1",
        "components": {"deployment": (1, {"cpu": 250, "memory": 256 * MI})},
        "total": {"cpu": 250, "memory": 256 * MI},
        "pods": 1,
    },
    ("statefulset", 0): {
        "definition": "apps-statefulset-v1",
        "components": {
            "statefulset": (2, {"cpu": 2000, "memory": 4 * GI, "ephemeral-storage": 20 * GI})
        },
        "total": {"cpu": 4000, "memory": 8 * GI, "ephemeral-storage": 40 * GI},
        "pods": 2,
    },
    ("pytorchjob", 0): {
        "definition": "kubeflow-org-pytorchjob-v1",
        "components": {
            "master": (1, {"cpu": 32000, "memory": 256 * GI, GPU: 8}),
            # the init container (100m/64Mi) is smaller than the container
            "worker": (3, {"cpu": 32000, "memory": 256 * GI, GPU: 8}),
        },
        "total": {"cpu": 128000, "memory": 1024 * GI, GPU: 32},
        "pods": 4,
    },
    ("pytorchjob", 1): {
        "definition": "kubeflow-org-pytorchjob-v1",
        "components": {
            "master": (0, {}),
            "worker": (2, {"cpu": 4000, "memory": 16 * GI, GPU: 1}),
        },
        "total": {"cpu": 8000, "memory": 32 * GI, GPU: 2},
        "pods": 2,
    },
    ("mpijob", 0): {
        "definition": "kubeflow-org-mpijob-v2beta1",
        "components": {
            "launcher": (1, {"cpu": 1000, "memory": 2 * GI}),
            "worker": (4, {"cpu": 16000, "memory": 64 * GI, GPU: 4}),
        },
        "total": {"cpu": 65000, "memory": 258 * GI, GPU: 16},
        "pods": 5,
    },
    ("raycluster", 0): {
        "definition": "ray-io-raycluster-v1",
        "components": {
            "head": (1, {"cpu": 4000, "memory": 16 * GI}),
            # replicas unset: raised to minReplicas 1
            "worker/cpu-group": (1, {"cpu": 2000, "memory": 4 * GI}),
            "worker/gpu-group": (2, {"cpu": 8000, "memory": 32 * GI, GPU: 4}),
            # 1 replica x 4 hosts
            "worker/tpu-slice": (4, {"cpu": 24000, "memory": 96 * GI, "google.com/tpu": 4}),
        },
        "total": {"cpu": 118000, "memory": 468 * GI, GPU: 8, "google.com/tpu": 16},
        "pods": 8,
    },
    ("rayjob", 0): {
        "definition": "ray-io-rayjob-v1",
        "components": {
            "head": (1, {"cpu": 2000, "memory": 8 * GI}),
            "worker/gpu": (2, {"cpu": 4000, "memory": 16 * GI, GPU: 1}),
            # KubeRay's default submitter: requests 500m / 200Mi
            "submitter": (1, {"cpu": 500, "memory": 200 * MI}),
        },
        "total": {"cpu": 10500, "memory": 40 * GI + 200 * MI, GPU: 2},
        "pods": 4,
    },
    ("rayjob", 1): {
        "definition": "ray-io-rayjob-v1",
        "components": {
            "head": (1, {"cpu": 2000, "memory": 8 * GI}),
            "worker/small": (1, {"cpu": 1000, "memory": 2 * GI}),
            "submitter": (0, {"cpu": 500, "memory": 200 * MI}),
        },
        "total": {"cpu": 3000, "memory": 10 * GI},
        "pods": 2,
    },
    ("rayservice", 0): {
        "definition": "ray-io-rayservice-v1",
        "components": {
            "head": (1, {"cpu": 4000, "memory": 16 * GI}),
            "worker/gpu-workers": (2, {"cpu": 8000, "memory": 48 * GI, GPU: 1}),
        },
        "total": {"cpu": 20000, "memory": 112 * GI, GPU: 2},
        "pods": 3,
    },
    ("leaderworkerset", 0): {
        "definition": "leaderworkerset-x-k8s-io-leaderworkerset-v1",
        "components": {
            "leader": (2, {"cpu": 8000, "memory": 32 * GI, GPU: 8}),
            # 2 groups x (size 4 - 1); the native sidecar adds 200m / 256Mi
            "worker": (6, {"cpu": 8200, "memory": 32 * GI + 256 * MI, GPU: 8}),
        },
        "total": {"cpu": 65200, "memory": 257 * GI + 512 * MI, GPU: 64},
        "pods": 8,
    },
    ("leaderworkerset", 1): {
        "definition": "leaderworkerset-x-k8s-io-leaderworkerset-v1",
        "components": {
            # no leaderTemplate: the leader runs the worker template
            "leader": (1, {"cpu": 1000, "memory": 1 * GI}),
            "worker": (1, {"cpu": 1000, "memory": 1 * GI}),
        },
        "total": {"cpu": 2000, "memory": 2 * GI},
        "pods": 2,
    },
    ("sandbox", 0): {
        "definition": "agents-x-k8s-io-sandbox-v1beta1",
        "components": {"agent": (1, {"cpu": 2000, "memory": 8 * GI, GPU: 1})},
        "total": {"cpu": 2000, "memory": 8 * GI, GPU: 1},
        "pods": 1,
    },
    ("knative", 0): {
        "definition": "serving-knative-dev-service-v1",
        # initial-scale 3 > min-scale 2; + the queue-proxy Knative injects (25m cpu)
        "components": {"revision": (3, {"cpu": 1025, "memory": 1 * GI, GPU: 1})},
        "total": {"cpu": 3075, "memory": 3 * GI, GPU: 3},
        "pods": 3,
    },
    ("inferenceservice", 0): {
        "definition": "serving-kserve-io-inferenceservice-v1beta1",
        "components": {
            # the model block becomes kserve-container: requests 2 / 8Gi, GPU from the limits;
            # KServe's default Serverless mode injects queue-proxy (25m), and the hf:// model
            # the storage-initializer init container (100m / 100Mi: less than the running pod)
            "predictor": (2, {"cpu": 2025, "memory": 8 * GI, GPU: 1}),
            "transformer": (1, {"cpu": 1025, "memory": 2 * GI}),
            "explainer": (0, {}),
        },
        "total": {"cpu": 5075, "memory": 18 * GI, GPU: 2},
        "pods": 3,
    },
    ("llminferenceservice", 0): {
        "definition": "serving-kserve-io-llminferenceservice-v1alpha2",
        "components": {
            "main": (2, {"cpu": 4000, "memory": 32 * GI, GPU: 1}),
            "prefill": (1, {"cpu": 8000, "memory": 64 * GI, GPU: 2}),
            "worker": (0, {}),
            "router-scheduler": (1, {"cpu": 500, "memory": 512 * MI}),
        },
        "total": {"cpu": 16500, "memory": 128 * GI + 512 * MI, GPU: 4},
        "pods": 4,
    },
    ("llminferenceservice", 1): {
        "definition": "serving-kserve-io-llminferenceservice-v1alpha1",
        "components": {
            "main": (1, {"cpu": 2000, "memory": 8 * GI, GPU: 1}),
            "prefill": (0, {}),
            "worker": (0, {}),
            "router-scheduler": (0, {}),
        },
        "total": {"cpu": 2000, "memory": 8 * GI, GPU: 1},
        "pods": 1,
    },
    ("nimservice", 0): {
        "definition": "apps-nvidia-com-nimservice-v1alpha1",
        "components": {"nimservice": (2, {"cpu": 4000, "memory": 24 * GI, GPU: 1})},
        "total": {"cpu": 8000, "memory": 48 * GI, GPU: 2},
        "pods": 2,
    },
    ("nimcache", 0): {
        "definition": "apps-nvidia-com-nimcache-v1alpha1",
        "components": {"nimcache": (1, {"cpu": 500, "memory": 6 * GI})},
        "total": {"cpu": 500, "memory": 6 * GI},
        "pods": 1,
    },
    ("milvus", 0): {
        "definition": "milvus-io-milvus-v1beta1",
        "components": {
            "standalone": (0, {}),
            "proxy": (2, {"cpu": 1000, "memory": 2 * GI}),
            "mixcoord": (1, {"cpu": 1000, "memory": 4 * GI}),
            "datanode": (2, {"cpu": 2000, "memory": 8 * GI}),
            "querynode": (3, {"cpu": 4000, "memory": 16 * GI}),
            "streamingnode": (0, {}),
            "indexnode": (1, {"cpu": 4000, "memory": 8 * GI, GPU: 1}),
            "rootcoord": (0, {}),
            "datacoord": (0, {}),
            "querycoord": (0, {}),
            "indexcoord": (0, {}),
            "cdc": (0, {}),
            "etcd": (3, {"cpu": 500, "memory": 1 * GI}),
            "minio": (4, {"cpu": 1000, "memory": 4 * GI}),
            "pulsar-zookeeper": (3, {"cpu": 200, "memory": 512 * MI}),
            "pulsar-bookkeeper": (3, {"cpu": 1000, "memory": 4 * GI}),
            "pulsar-broker": (2, {"cpu": 1000, "memory": 2 * GI}),
            "pulsar-proxy": (1, {"cpu": 500, "memory": 512 * MI}),
        },
        # cpu: 2000 + 1000 + 4000 + 12000 + 4000 + 1500 + 4000 + 600 + 3000 + 2000 + 500
        # memory: 4 + 4 + 16 + 48 + 8 + 3 + 16 + 1.5 + 12 + 4 + 0.5 Gi
        "total": {"cpu": 34600, "memory": 117 * GI, GPU: 1},
        "pods": 25,
    },
    ("milvus", 1): {
        "definition": "milvus-io-milvus-v1beta1",
        "components": {
            "standalone": (1, {"cpu": 250, "memory": 1 * GI}),
            "etcd": (1, {}),
            "minio": (1, {"memory": 256 * MI}),
        },
        "total": {"cpu": 250, "memory": 1 * GI + 256 * MI},
        "pods": 3,
    },
    ("podcliqueset", 0): {
        "definition": "grove-io-podcliqueset-v1alpha1",
        "components": {
            "clique/frontend": (2, {"cpu": 1000, "memory": 2 * GI}),
            # cliques of the `prefill` scaling group are replicated by its 2 replicas
            "clique/prefill-leader": (2, {"cpu": 16000, "memory": 128 * GI, GPU: 4}),
            "clique/prefill-worker": (6, {"cpu": 16000, "memory": 128 * GI, GPU: 4}),
        },
        "total": {"cpu": 130000, "memory": 1028 * GI, GPU: 32},
        "pods": 10,
    },
    ("podcliqueset", 1): {
        "definition": "grove-io-podcliqueset-v1alpha1",
        # 2 replicas of the set x 3 pods; no scaling groups
        "components": {"clique/worker": (6, {"cpu": 4000, "memory": 32 * GI, GPU: 1})},
        "total": {"cpu": 24000, "memory": 192 * GI, GPU: 6},
        "pods": 6,
    },
    ("dynamo-v1alpha1", 0): {
        "definition": "nvidia-com-dynamographdeployment-v1alpha1",
        "components": {
            "service/Frontend": (1, {"cpu": 1000, "memory": 2 * GI}),
            # Dynamo's `gpu` is nvidia.com/gpu
            "service/VllmDecodeWorker": (2, {"cpu": 8000, "memory": 64 * GI, GPU: 2}),
            # 1 replica x 2 nodes
            "service/VllmPrefillWorker": (2, {"cpu": 32000, "memory": 256 * GI, GPU: 8}),
        },
        "total": {"cpu": 81000, "memory": 642 * GI, GPU: 20},
        "pods": 5,
    },
    ("dynamo-v1beta1", 0): {
        "definition": "nvidia-com-dynamographdeployment-v1beta1",
        "components": {
            "component/Frontend": (1, {"cpu": 1000, "memory": 2 * GI}),
            # main + metrics sidecar container
            "component/decode": (2, {"cpu": 16100, "memory": 128 * GI + 128 * MI, GPU: 4}),
        },
        "total": {"cpu": 33200, "memory": 258 * GI + 256 * MI, GPU: 8},
        "pods": 3,
    },
}


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0]}#{k[1]}")
def test_sample_decomposes_to_hand_checked_totals(
    catalog: Catalog, sample: Sample, key: tuple[str, int]
) -> None:
    name, index = key
    expected = EXPECTED[key]
    document = sample(name)[index]
    result = decompose(document.data, catalog, source=document.source)
    assert result.definition.name == expected["definition"]
    got = {c.label: (c.replicas, dict(c.pod.requests)) for c in result.components}
    wanted = expected["components"]
    for label, (replicas, requests) in wanted.items():
        assert label in got, f"{label} missing; got {sorted(got)}"
        assert got[label][0] == replicas, label
        if replicas:
            assert got[label][1] == requests, label
    if len(wanted) == len(got):
        assert set(got) == set(wanted)
    else:  # only zero-replica components may be left out of the table above
        assert all(got[label][0] == 0 for label in set(got) - set(wanted))
    workload = result.workload
    # an elastic component is placed from its minimum (tests/elastic): the declared count less
    below = {c.label: c.replicas - c.elastic[0] for c in result.components if c.elastic}
    assert workload.pod_count == expected["pods"] - sum(below.values())
    fewer = add(
        *(scale(result.component(*c.split("/", 1)).pod.requests, n) for c, n in below.items())
    )
    assert add(workload.total_requests(), fewer) == expected["total"]
    total = add(*(scale(c.pod.requests, c.replicas) for c in result.components))
    assert {k: v for k, v in total.items() if v} == expected["total"]
    assert all(c.replicas > 0 for c in workload.components)
    assert workload.priority == expected.get("priority", 0)


def test_every_builtin_definition_has_a_sample(catalog: Catalog) -> None:
    covered = {e["definition"] for e in EXPECTED.values()}
    assert covered == {d.name for d in catalog.definitions}


def test_the_seed_example_matches_the_acceptance_numbers(catalog: Catalog, repo: Path) -> None:
    document = read_documents(repo / "examples" / "jobset-demo.yaml")[0]
    result = decompose(document.data, catalog, source=document.source)
    by_instance = {c.instance: c for c in result.components}
    assert by_instance["leader"].replicas == 1
    assert by_instance["leader"].pod.gpus * 1 == 4
    assert by_instance["worker"].replicas == 2
    assert by_instance["worker"].pod.gpus * by_instance["worker"].replicas == 8
    assert result.workload.pod_count == 3
    assert result.workload.gpus == 12
    assert result.ref.namespace == "default"


def test_scheduling_constraints_reach_the_pod_demand(catalog: Catalog, sample: Sample) -> None:
    jobset = decompose(sample("jobset")[0].data, catalog)
    workers = jobset.component("replicatedjob", "workers").pod
    assert workers.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert [t.key for t in workers.tolerations] == ["nvidia.com/gpu"]
    # built pod specs keep them too (upstream's fragmented form cannot)
    isvc = decompose(sample("inferenceservice")[0].data, catalog).component("predictor").pod
    assert isvc.node_selector == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert [t.key for t in isvc.tolerations] == ["nvidia.com/gpu"]
    nim = decompose(sample("nimservice")[0].data, catalog).component("nimservice").pod
    assert nim.node_selector == {"nvidia.com/gpu.present": "true"}
    milvus = decompose(sample("milvus")[0].data, catalog).component("proxy").pod
    assert [t.value for t in milvus.tolerations] == ["milvus"]
    dynamo = decompose(sample("dynamo-v1alpha1")[0].data, catalog)
    assert [t.key for t in dynamo.component("service", "VllmDecodeWorker").pod.tolerations] == [
        "nvidia.com/gpu"
    ]


def test_templates_are_pod_template_specs(catalog: Catalog, sample: Sample) -> None:
    for name in ("jobset", "inferenceservice", "milvus", "dynamo-v1alpha1", "podcliqueset"):
        for document in sample(name):
            for component in decompose(document.data, catalog).components:
                assert set(component.template) == {"metadata", "spec"}
                assert isinstance(component.template["spec"], dict)
    grove = decompose(sample("podcliqueset")[0].data, catalog)
    assert grove.component("clique", "frontend").template["metadata"] == {
        "labels": {"role": "frontend"}
    }


def test_min_and_max_replicas_are_reported(catalog: Catalog, sample: Sample) -> None:
    torch = decompose(sample("pytorchjob")[0].data, catalog).component("worker")
    assert (torch.min_replicas, torch.max_replicas) == (2, 6)
    knative = decompose(sample("knative")[0].data, catalog).component("revision")
    assert (knative.replicas, knative.min_replicas, knative.max_replicas) == (3, 2, 10)
