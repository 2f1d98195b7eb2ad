"""A virtual workload's status follows its pods, as its controller's would: ``Running`` only
once every pod is Running and Ready; a Job counts as ``ready`` only such pods. Over HTTPS to
a virtual member with the realism reactor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from placer.definitions import Catalog, phases_of
from placer.kube import KubeClient
from tests.builders import objects
from tests.builders.waiting import wait_until

CATALOG = Catalog.load()


def job(name: str, *, gpus: int, parallelism: int = 1, scheduler: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
        ],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parallelism": parallelism, "template": {"spec": spec}},
    }


def pod_phases(member: KubeClient, name: str) -> list[str]:
    pods = member.list("v1", "Pod", namespace="default").items
    return sorted(p["status"]["phase"] for p in pods if p["metadata"]["name"].startswith(name))


def test_a_job_whose_pod_waits_is_not_running(member: KubeClient) -> None:
    """KAI schedules no pod without a queue label: the pod stays Pending, the Job has it
    active and none ready (Initializing), as the Job controller reports."""
    member.create(job("kai", gpus=1, scheduler="kai-scheduler"), namespace="default")
    wait_until(lambda: pod_phases(member, "kai") == ["Pending"], timeout=30, what="kai pod")
    obj = member.get("batch/v1", "Job", "kai", namespace="default")
    assert obj["status"]["active"] == 1 and obj["status"]["ready"] == 0, obj["status"]
    assert phases_of(obj, CATALOG) == ("Initializing",)


def test_a_half_bound_job_counts_its_ready_pods(member: KubeClient) -> None:
    member.create(job("half", gpus=4, parallelism=2), namespace="default")
    wait_until(lambda: pod_phases(member, "half") == ["Pending", "Running"], timeout=30, what="1/2")
    obj = member.get("batch/v1", "Job", "half", namespace="default")
    assert (obj["status"]["active"], obj["status"]["ready"]) == (2, 1), obj["status"]


def test_a_waiting_workload_runs_once_its_pods_do(member: KubeClient) -> None:
    """The second JobSet's pod waits for the first's GPUs: not Running until they are freed
    and its pod is bound."""
    member.create(objects.jobset("first", gpus=4), namespace="default")
    member.create(objects.jobset("second", gpus=4), namespace="default")

    def phases(name: str) -> tuple[str, ...]:
        obj = member.get("jobset.x-k8s.io/v1alpha2", "JobSet", name, namespace="default")
        return phases_of(obj, CATALOG)

    wait_until(lambda: pod_phases(member, "second") == ["Pending"], timeout=30, what="waiting")
    assert phases("first") == ("Running",)
    assert "Running" not in phases("second")
    member.delete("jobset.x-k8s.io/v1alpha2", "JobSet", "first", namespace="default")
    wait_until(lambda: phases("second") == ("Running",), timeout=30, what="second running")
    assert pod_phases(member, "second") == ["Running"]


def gpu_pod_template(gpus: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": gpus}
    container = {"name": "main", "image": "x", "resources": {"limits": limits}}
    return {"spec": {"restartPolicy": "Never", "containers": [container]}}


def pytorchjob(name: str, *, workers: int, gpus: int) -> dict[str, Any]:
    worker = {"replicas": workers, "template": gpu_pod_template(gpus)}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Worker": worker}},
    }


def raycluster(name: str, *, workers: int, gpus: int) -> dict[str, Any]:
    head = {"rayStartParams": {}, "template": gpu_pod_template(0)}
    group = {
        "groupName": "gpu",
        "replicas": workers,
        "rayStartParams": {},
        "template": gpu_pod_template(gpus),
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"headGroupSpec": head, "workerGroupSpecs": [group]},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            objects.jobset("half", replicas=2, gpus=4),
            lambda s: [(j["active"], j["ready"]) for j in s["replicatedJobsStatus"]] == [(0, 0)],
        ),
        (
            pytorchjob("half", workers=2, gpus=4),
            lambda s: [(c["type"], c["status"]) for c in s["conditions"]] == [("Created", "True")],
        ),
        (
            raycluster("half", workers=2, gpus=4),
            lambda s: (s["desiredWorkerReplicas"], s["readyWorkerReplicas"]) == (2, 1),
        ),
    ],
    ids=["JobSet", "PyTorchJob", "RayCluster"],
)
def test_a_half_started_workload_of_another_kind_reports_initializing(
    member: KubeClient, obj: dict[str, Any], expected: Callable[[dict[str, Any]], bool]
) -> None:
    """Its controller's own waiting status (the counts it keeps), which its definition maps to
    ``Initializing``: not an empty status, not ``Running``, while a pod of it waits for room
    (the member's one node has 4 GPUs; the pods ask 4 each)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    member.create(obj, namespace="default")
    wait_until(
        lambda: (
            pod_phases(member, "half").count("Pending") == 1
            and "Running" in pod_phases(member, "half")
        ),
        timeout=30,
        what="one pod running, one waiting",
    )

    def status() -> dict[str, Any]:
        got: dict[str, Any] = member.get(api_version, kind, "half", namespace="default")
        return got.get("status") or {}

    wait_until(lambda: bool(status()), timeout=30, what="a status written")
    obj = member.get(api_version, kind, "half", namespace="default")
    assert expected(obj["status"]), obj["status"]
    assert phases_of(obj, CATALOG) == ("Initializing",)
