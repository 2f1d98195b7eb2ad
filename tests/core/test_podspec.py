"""Effective pod requests (kube-scheduler's formula) and node matching."""

from __future__ import annotations

import re
from typing import Any

import pytest

from placer.model import Node, PodDemand, Taint, Toleration
from placer.podspec import node_mismatch, pod_demand, pod_requests

GiB = 2**30


def _c(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **kw: Any):
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "image": "x", "resources": resources, **kw}


def test_containers_sum_and_limits_default_requests() -> None:
    spec = {
        "containers": [
            _c({"cpu": "1", "memory": "1Gi"}, {"nvidia.com/gpu": 4}),
            _c({"cpu": "500m"}),
        ]
    }
    assert pod_requests(spec) == {"cpu": 1500, "memory": GiB, "nvidia.com/gpu": 4}


def test_init_containers_take_the_max() -> None:
    spec = {
        "initContainers": [_c({"cpu": "4"}), _c({"memory": "8Gi"})],
        "containers": [_c({"cpu": "1", "memory": "1Gi"})],
    }
    assert pod_requests(spec) == {"cpu": 4000, "memory": 8 * GiB}


def test_native_sidecars_add_to_running_and_to_later_init_containers() -> None:
    # sidecar (1 cpu) starts first, then a 3-cpu init container runs beside it: peak 4 cpu.
    # running = 2 (main) + 1 (sidecar) = 3. Effective = max(3, 4) = 4.
    # The upstream simplified formula (max(init)=3 vs running=2 -> 3) undercounts.
    spec = {
        "initContainers": [
            _c({"cpu": "1"}, restartPolicy="Always"),
            _c({"cpu": "3"}),
        ],
        "containers": [_c({"cpu": "2"})],
    }
    assert pod_requests(spec) == {"cpu": 4000}


def test_init_container_before_sidecar_does_not_see_it() -> None:
    spec = {
        "initContainers": [
            _c({"cpu": "3"}),
            _c({"cpu": "1"}, restartPolicy="Always"),
        ],
        "containers": [_c({"cpu": "1"})],
    }
    # init peak: 3 (alone) ; sidecar step: 1 ; running: 1 + 1 = 2 -> 3
    assert pod_requests(spec) == {"cpu": 3000}


def test_pod_level_resources_replace_cpu_memory_and_overhead_adds() -> None:
    spec = {
        "containers": [_c({"cpu": "1", "memory": "1Gi"}, {"nvidia.com/gpu": 1})],
        "resources": {"limits": {"cpu": "4"}, "requests": {"memory": "2Gi"}},
        "overhead": {"cpu": "250m"},
    }
    assert pod_requests(spec) == {"cpu": 4250, "memory": 2 * GiB, "nvidia.com/gpu": 1}


def test_constraints_and_matching() -> None:
    spec = {
        "containers": [_c({"cpu": "1"})],
        "nodeSelector": {"gpu": "h100"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n9"]}
                            ]
                        },
                    ]
                }
            }
        },
    }
    pod = pod_demand(spec)
    base = {"cpu": 8000}
    ok = Node("n1", base, labels={"gpu": "h100", "zone": "a"}, taints=(Taint("dedicated", "x"),))
    assert node_mismatch(pod, ok) is None
    assert "node selector" in (node_mismatch(pod, Node("n2", base, labels={"zone": "a"})) or "")
    wrong_zone = Node("n3", base, labels={"gpu": "h100", "zone": "b"})
    assert node_mismatch(pod, wrong_zone) == "required node affinity not matched"
    by_name = Node("n9", base, labels={"gpu": "h100", "zone": "b"})
    assert node_mismatch(pod, by_name) is None
    tainted = Node(
        "n4", base, labels={"gpu": "h100", "zone": "a"}, taints=(Taint("gpu", "", "NoExecute"),)
    )
    assert node_mismatch(pod, tainted) == "taint gpu:NoExecute not tolerated"
    soft = Node(
        "n5",
        base,
        labels={"gpu": "h100", "zone": "a"},
        taints=(Taint("x", "", "PreferNoSchedule"),),
    )
    assert node_mismatch(pod, soft) is None
    assert node_mismatch(pod, Node("n6", base, labels={"gpu": "h100", "zone": "a"}, ready=False))


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "v", ""), Taint("k", "v", "NoExecute"), True),
        (Toleration("k", "Equal", "w", ""), Taint("k", "v", "NoSchedule"), False),
        (Toleration("", "Exists", "", ""), Taint("any", "v", "NoSchedule"), True),
        (Toleration("k", "Exists", "", "NoExecute"), Taint("k", "v", "NoSchedule"), False),
    ],
)
def test_toleration_rules(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert toleration.tolerates(taint) is expected


def test_empty_pod_demand() -> None:
    assert pod_demand({}) == PodDemand(requests={})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"containers": {"name": "c"}}, "containers: expected a list of containers, got a mapping"),
        ({"containers": ["c"]}, "containers[0]: expected a container, got a string"),
        ({"initContainers": "c"}, "initContainers: expected a list of containers, got a string"),
        (
            {"containers": [{"name": "c", "resources": ["nvidia.com/gpu"]}]},
            "containers[0].resources: expected a mapping, got a list",
        ),
        (
            {"containers": [{"name": "c", "resources": {"limits": [{"nvidia.com/gpu": 8}]}}]},
            "containers[0].resources.limits: expected a mapping, got a list",
        ),
    ],
)
def test_a_malformed_template_is_refused_not_read_as_asking_nothing(
    spec: dict[str, Any], message: str
) -> None:
    """The API server refuses these pods; they were read as asking for nothing (an 8-GPU pod
    placed as 0 GPUs). Pods read back from a cluster (``strict=False``) stay lenient."""
    with pytest.raises(ValueError, match=re.escape(message)):
        pod_requests(spec)
    assert pod_requests(spec, strict=False) == {}
