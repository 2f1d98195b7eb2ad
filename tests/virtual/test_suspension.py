"""Suspending and resuming a workload on a virtual member, over real HTTPS: its pods go and its
status says ``Suspended`` (no longer ``Running``), as its framework's controller would report;
resumed, its pods come back and it runs again."""

from __future__ import annotations

from placer.definitions import Catalog, phases_of
from placer.kube import KubeClient
from tests.builders import objects
from tests.builders.waiting import wait_until


def test_a_suspended_jobset_reports_suspended_and_runs_again_when_resumed(
    member: KubeClient,
) -> None:
    catalog = Catalog.load()
    member.create(objects.jobset("train", replicas=2, gpus=1, cpu="1"), namespace="default")

    def state() -> tuple[int, tuple[str, ...]]:
        pods = member.list("v1", "Pod", namespace="default").items
        obj = member.get("jobset.x-k8s.io/v1alpha2", "JobSet", "train", namespace="default")
        return len(pods), phases_of(obj, catalog)

    wait_until(lambda: state() == (2, ("Running",)), timeout=30, what="train running")
    member.patch(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "train",
        {"spec": {"suspend": True}},
        namespace="default",
    )
    wait_until(lambda: state() == (0, ("Suspended",)), timeout=30, what="train suspended")
    member.patch(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "train",
        {"spec": {"suspend": False}},
        namespace="default",
    )
    wait_until(lambda: state() == (2, ("Running",)), timeout=30, what="train running again")
