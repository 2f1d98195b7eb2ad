"""Hand-made fleets and timed workloads for the simulation tests."""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from types import ModuleType

import pytest

from placer.model import (
    GPU_SHARE,
    ComponentDemand,
    Fleet,
    Gang,
    Node,
    PodDemand,
    Workload,
    WorkloadRef,
)
from placer.quantity import CPU, GPU, MEMORY
from tests.builders import fleets as builders

GIB = 2**30


@dataclass(frozen=True)
class Item:
    """A timed workload (the shape ``placer.simulate`` expects)."""

    workload: Workload
    arrival_s: float
    duration_s: float | None = None


def gpu_node(name: str, gpus: int = 8, cpu: int = 64, memory_gib: int = 512) -> Node:
    """A node whose ``gpus`` GPU devices are all free."""
    return builders.node(name, gpus, cpu=cpu, memory=memory_gib, devices=(1000,) * gpus)


def fleet(*sizes: int, gpus: int = 8) -> Fleet:
    """Clusters ``c0``, ``c1``, ... with ``sizes[i]`` identical GPU nodes each."""
    return builders.fleet(
        *(
            builders.cluster(f"c{i}", *(gpu_node(f"c{i}-n{k}", gpus) for k in range(n)))
            for i, n in enumerate(sizes)
        )
    )


def gang(
    name: str, pods: int, gpus: int = 0, share: int = 0, cpu: int = 4, memory_gib: int = 16
) -> Workload:
    """A one-component JobSet of ``pods`` identical pods (all or nothing)."""
    requests = {CPU: cpu * 1000, MEMORY: memory_gib * GIB}
    if gpus:
        requests[GPU] = gpus
    if share:
        requests[GPU_SHARE] = share
    component = ComponentDemand("worker", "", pods, PodDemand(requests=requests))
    return Workload(
        ref=WorkloadRef("jobset.x-k8s.io/v1alpha2", "JobSet", "test", name),
        components=(component,),
        gangs=(Gang("worker", ("worker",), pods),),
    )


def random_stream(seed: int, count: int = 60, horizon: float = 600.0) -> list[Item]:
    """Single-component gangs with random shapes, arrivals and durations (arrival order)."""
    rng = random.Random(seed)
    items = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.3:
            workload = gang(f"w{i:03d}", 1, share=rng.choice((250, 500, 700)), cpu=2)
        elif kind < 0.7:
            workload = gang(f"w{i:03d}", rng.choice((1, 2)), gpus=rng.choice((1, 2, 4)))
        else:
            workload = gang(f"w{i:03d}", rng.choice((2, 3, 4)), gpus=8, cpu=32)
        duration = None if rng.random() < 0.1 else rng.uniform(20, 300)
        items.append(Item(workload, rng.uniform(0, horizon), duration))
    return sorted(items, key=lambda item: item.arrival_s)


@pytest.fixture
def kit() -> ModuleType:
    """This module: the builders above, for tests (conftest is not importable by name)."""
    return sys.modules[__name__]
