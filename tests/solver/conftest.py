"""Hand-made fleets and workloads for solver tests, and a checked ``decide`` helper.

Every decision made through ``decide`` is checked by the independent verifier, so each test
also asserts a zero realisation gap.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from placer.model import (
    Cluster,
    ComponentDemand,
    Decision,
    Fleet,
    Node,
    PodDemand,
    Taint,
    Toleration,
    Workload,
    WorkloadRef,
)
from placer.policy import PlacementPolicy
from placer.quantity import CPU, GPU, MEMORY, PODS
from placer.solver import solve, verify

GIB = 2**30


def node(
    name: str,
    gpus: int = 8,
    used: int = 0,
    *,
    cpu: int = 64,
    memory: int = 512,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    devices: Sequence[int] | None = None,
    extra: Mapping[str, int] | None = None,
    ready: bool = True,
) -> Node:
    """A node with ``gpus`` GPUs of which ``used`` are taken (cpu cores, memory GiB)."""
    allocatable = {CPU: cpu * 1000, MEMORY: memory * GIB, PODS: 110, **(extra or {})}
    if gpus:
        allocatable[GPU] = gpus
    return Node(
        name=name,
        allocatable=allocatable,
        requested={GPU: used} if used else {},
        labels=dict(labels or {}),
        taints=tuple(taints),
        gpu_devices=tuple(devices) if devices is not None else None,
        ready=ready,
    )


def cluster(name: str, *nodes: Node, **kwargs: Any) -> Cluster:
    return Cluster(name=name, nodes=tuple(nodes), **kwargs)


def fleet(*clusters: Cluster) -> Fleet:
    return Fleet(clusters=tuple(clusters))


def pod(
    gpus: int = 0,
    cpu: int = 1,
    *,
    share: int = 0,
    selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Toleration] = (),
    extra: Mapping[str, int] | None = None,
) -> PodDemand:
    requests = {CPU: cpu * 1000, MEMORY: GIB, **(extra or {})}
    if gpus:
        requests[GPU] = gpus
    if share:
        requests["placer.dev/gpu-milli"] = share
    return PodDemand(
        requests=requests, node_selector=dict(selector or {}), tolerations=tuple(tolerations)
    )


def workload(
    name: str,
    *components: tuple[str, int, PodDemand],
    namespace: str = "default",
    **kwargs: Any,
) -> Workload:
    """``components`` as (name, replicas, pod)."""
    return Workload(
        ref=WorkloadRef("jobset.x-k8s.io/v1alpha2", "JobSet", namespace, name),
        components=tuple(ComponentDemand(n, "", r, p) for n, r, p in components),
        **kwargs,
    )


def random_jobs(
    rng: random.Random,
    count: int,
    *,
    replicas: Sequence[int],
    gpus: Sequence[int],
    cpu: tuple[int, int],
) -> list[Workload]:
    """``count`` one-component jobs ``j0``, ``j1``, …: replicas and GPUs per pod drawn from
    the choices given, cores uniformly from the ``cpu`` range."""
    return [
        workload(
            f"j{i}",
            ("w", rng.choice(replicas), pod(gpus=rng.choice(gpus), cpu=rng.randint(*cpu))),
        )
        for i in range(count)
    ]


def split_fleet(nodes: Sequence[Node], clusters: int) -> Fleet:
    """``nodes`` in ``clusters`` clusters ``c0``, ``c1``, … of equal size, in order."""
    size = len(nodes) // clusters
    return fleet(*(cluster(f"c{c}", *nodes[size * c : size * (c + 1)]) for c in range(clusters)))


def where(decision: Decision) -> dict[str, str]:
    """workload name -> cluster of the placed ones."""
    return {p.workload.name: p.cluster for p in decision.placements}


def reasons(decision: Decision, name: str) -> Mapping[str, str]:
    return next(u.reasons for u in decision.unplaced if u.workload.name == name)


Decide = Callable[..., Decision]


@pytest.fixture
def decide() -> Decide:
    """``solve`` + the verifier: fails the test on any verifier finding."""

    def run(
        workloads: Sequence[Workload],
        the_fleet: Fleet,
        *,
        policies: Sequence[PlacementPolicy] = (),
        **kwargs: Any,
    ) -> Decision:
        decision = solve(workloads, the_fleet, policies=policies, **kwargs)
        assert verify(decision, workloads, the_fleet, policies=policies) == []
        return decision

    return run


@pytest.fixture
def kit() -> Any:
    """The builders of this module, for tests (``kit.node(...)``, ``kit.workload(...)``)."""
    import types

    return types.SimpleNamespace(
        node=node,
        cluster=cluster,
        fleet=fleet,
        pod=pod,
        workload=workload,
        random_jobs=random_jobs,
        split_fleet=split_fleet,
        where=where,
        reasons=reasons,
    )
