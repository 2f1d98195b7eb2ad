"""Builders for queue tests: queues and priority classes as YAML text, queued workloads, and a
checked ``decide_fair`` (every decision passes the independent verifier and every limit)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from placer.model import Decision, Fleet, Workload
from placer.queues import QueueSet, queues_from_yaml
from placer.solver import verify
from placer.solver.fairshare import FairDecision, Running, solve_fair
from tests.solver.conftest import pod, workload

__all__ = ["check_limits", "gpu_job", "queue_doc", "queues"]


def queue_doc(name: str, parent: str | None = None, **resources: Mapping[str, Any]) -> str:
    """One Queue document; ``resources`` by name with ``__`` for ``/`` and ``_`` for ``.``
    (``nvidia_com__gpu`` is ``nvidia.com/gpu``)."""
    spec: dict[str, Any] = {}
    if parent:
        spec["parent"] = parent
    spec["resources"] = {k.replace("__", "/").replace("_", "."): v for k, v in resources.items()}
    import yaml

    return yaml.safe_dump(
        {
            "apiVersion": "placer.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def queues(*documents: str) -> QueueSet:
    return queues_from_yaml("---\n".join(documents), source="queues.yaml")


def gpu_job(
    name: str,
    queue: str | None,
    pods: int,
    gpus: int,
    *,
    priority: int | None = None,
    priority_class: str | None = None,
    group: str | None = None,
    protected: bool = False,
    created: float | None = None,
) -> Workload:
    """``pods`` pods of ``gpus`` GPUs (1 core each) in ``queue``; ``protected``: labelled
    ``placer.dev/preemptible: "false"``; ``created``: its creation time (Unix seconds)."""
    labels = {"placer.dev/queue": queue} if queue else {}
    if priority is not None:
        labels["placer.dev/priority"] = str(priority)
    if protected:
        labels["placer.dev/preemptible"] = "false"
    return workload(
        name,
        ("w", pods, pod(gpus=gpus)),
        labels=labels,
        priority=priority or 0,
        priority_class=priority_class,
        group=group,
        created=created,
    )


def check_limits(result: FairDecision, the_queues: QueueSet) -> None:
    """Every limit and cluster limit of every queue holds for the usage after the decision."""
    usage = result.usage
    assert usage is not None
    for queue in the_queues:
        for resource, rule in queue.resources.items():
            if rule.limit is not None:
                assert usage.used(queue.name, resource) <= rule.limit, (queue.name, resource)
            for cluster, cap in rule.cluster_limits.items():
                assert usage.used_in(queue.name, cluster, resource) <= cap


@pytest.fixture
def decide_fair() -> Any:
    """``solve_fair`` + the verifier + the limits: fails the test on any finding."""

    def run(
        workloads: Sequence[Workload],
        the_fleet: Fleet,
        the_queues: QueueSet,
        *,
        running: Sequence[Running] = (),
        **kwargs: Any,
    ) -> FairDecision:
        result = solve_fair(workloads, the_fleet, the_queues, running=running, **kwargs)
        decision: Decision = result.decision
        assert verify(decision, workloads, the_fleet) == []
        check_limits(result, the_queues)
        return result

    return run
