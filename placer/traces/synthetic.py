"""Synthetic gang workloads: openb pod shapes, Kalos gang sizes, seeded and deterministic.

No public trace has gangs *and* the pod shapes of a mixed GPU fleet: openb has realistic pods
(CPU, memory, whole or shared GPUs, GPU-model constraints) but one pod per task; Kalos has real
gang sizes (1–128 pods) but only 8-GPU LLM pods. The multi-cluster benchmark (design C.2 "W2")
combines them:

* a workload is a JobSet of 1–3 replicated jobs (components), drawn with probabilities
  70 / 20 / 10 %; each component is one gang (all its pods or none), and the whole workload
  lands in one cluster;
* a component is ``r`` identical pods copying one openb GPU task (CPU, memory, GPUs, GPU-model
  constraint). With probability ``small`` (default 70 %) it is a single pod (``r = 1``), any
  GPU task — shared GPUs included when ``fractional`` —; otherwise ``r`` comes from the Kalos
  node-count tail (jobs of 2 or more nodes), its pod from the whole-GPU tasks;
* sizes are scaled to the fleet in GPUs: a Kalos job of ``k`` nodes is ``8k`` GPUs; scaled by
  ``max_gang_gpus / 1024`` (1024 GPUs is Kalos' largest gang) it becomes the component's GPU
  size, and ``r = max(2, round(size / GPUs per pod))``. The workload's GPUs are then capped at
  ``max_gang_gpus`` (≈ 15 % of the largest cluster by default, see :mod:`placer.traces.specs`).
  So the largest Kalos gang maps to the cap whatever the pod size, and the gang-size histogram
  (in GPUs) keeps its shape;
* arrival and duration come from the openb task of the first component (creation time and
  lifetime), scaled by ``time_scale`` — realistic, bursty arrivals for stream replays.

``count`` draws a fixed number of workloads; ``target_gpu_milli`` draws until the demand
reaches that many GPU thousandths — the "demand ≥ capacity" batches of the benchmark. Either
way the result depends on the seed and the inputs only (``random.Random(seed)``; no global
state), and is returned in arrival order, named ``gang-00000`` … in that order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from placer.model import ComponentDemand, Gang, Workload, WorkloadRef
from placer.traces.kalos import KalosJob
from placer.traces.openb import OpenbTask
from placer.traces.workloads import TimedWorkload, gpu_milli

__all__ = [
    "COMPONENT_WEIGHTS",
    "INSTANCE_NAMES",
    "GangMix",
    "kalos_tail",
    "synthetic_gangs",
]

#: probability of 1, 2 and 3 components per workload.
COMPONENT_WEIGHTS = (0.7, 0.2, 0.1)
#: replicated-job names by position (cosmetic; an RL-style trainer/sampler/evaluator trio).
INSTANCE_NAMES = ("trainer", "sampler", "evaluator")
#: GPUs of the largest Kalos gang (128 pods × 8 GPUs): the reference the tail is scaled from.
KALOS_MAX_GANG_GPUS = 1024
#: GPUs per Kalos node: a gang of ``k`` nodes is ``8k`` GPUs.
KALOS_GPUS_PER_NODE = 8
_NAMESPACE = "synthetic"


@dataclass(frozen=True)
class GangMix:
    """How synthetic gangs are drawn (see the module docstring)."""

    #: GPU cap of one workload, whole GPUs (≈ 15 % of the largest cluster).
    max_gang_gpus: int
    #: share of components that are a single pod.
    small: float = 0.7
    #: at most this many components per workload (1–3).
    max_components: int = 3
    #: single-pod components may copy shared-GPU (fractional) tasks.
    fractional: bool = True
    #: multiply arrival times and durations.
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.max_gang_gpus < 1:
            raise ValueError("max_gang_gpus must be at least 1")
        if not 0.0 <= self.small <= 1.0:
            raise ValueError("small must be between 0 and 1")
        if not 1 <= self.max_components <= len(COMPONENT_WEIGHTS):
            raise ValueError(f"max_components must be between 1 and {len(COMPONENT_WEIGHTS)}")
        if self.time_scale <= 0:
            raise ValueError("time_scale must be positive")


def kalos_tail(jobs: Sequence[KalosJob]) -> tuple[int, ...]:
    """Node counts of the Kalos jobs with 2 or more nodes (the tail to draw from), sorted."""
    return tuple(sorted(j.pods for j in jobs if j.pods >= 2))


def synthetic_gangs(
    tasks: Sequence[OpenbTask],
    tail: Sequence[int],
    mix: GangMix,
    *,
    seed: int,
    count: int | None = None,
    target_gpu_milli: int | None = None,
) -> tuple[TimedWorkload, ...]:
    """Draw gang workloads.

    Args:
        tasks: openb tasks whose GPU tasks give the pod shapes (and times).
        tail: Kalos node counts of multi-node jobs (:func:`kalos_tail`).
        mix: the drawing parameters.
        seed: random seed; same inputs and seed, same workloads.
        count: draw exactly this many workloads; or
        target_gpu_milli: draw until their GPU demand reaches this (thousandths).

    Raises:
        ValueError: neither or both of ``count`` and ``target_gpu_milli``, or no usable task.
    """
    if (count is None) == (target_gpu_milli is None):
        raise ValueError("give exactly one of count and target_gpu_milli")
    single = [t for t in tasks if t.num_gpu and (mix.fractional or not t.shares_gpu)]
    multi = [t for t in tasks if t.num_gpu and not t.shares_gpu]
    if not single or not multi:
        raise ValueError("the task list has no whole-GPU task to copy")
    if not tail:
        raise ValueError("the gang-size tail is empty")
    rng = random.Random(seed)
    scale = mix.max_gang_gpus / KALOS_MAX_GANG_GPUS
    weights = COMPONENT_WEIGHTS[: mix.max_components]
    drawn: list[TimedWorkload] = []
    demand = 0
    while (count is not None and len(drawn) < count) or (
        target_gpu_milli is not None and demand < target_gpu_milli
    ):
        components: list[ComponentDemand] = []
        budget = mix.max_gang_gpus * 1000
        first = single[0]
        for position in range(rng.choices(range(1, len(weights) + 1), weights)[0]):
            if rng.random() < mix.small:
                task, replicas = rng.choice(single), 1
            else:
                task = rng.choice(multi)
                gang_gpus = rng.choice(tail) * KALOS_GPUS_PER_NODE * scale
                replicas = max(2, round(gang_gpus / task.num_gpu))
            replicas = min(replicas, budget // task.total_gpu_milli)
            if not components:
                first, replicas = task, max(replicas, 1)  # one pod cannot be made smaller
            elif replicas < 1:
                continue  # no room left under the cap for this component
            budget -= task.total_gpu_milli * replicas
            component = ComponentDemand(
                name="replicatedjob",
                instance=INSTANCE_NAMES[position],
                replicas=replicas,
                pod=task.pod(),
            )
            components.append(component)
        life = first.lifetime_s
        workload = _workload(f"draw-{len(drawn)}", tuple(components))
        drawn.append(
            TimedWorkload(
                workload,
                (first.creation_s or 0) * mix.time_scale,
                life * mix.time_scale if life is not None else None,
            )
        )
        demand += gpu_milli(workload)
    drawn.sort(key=lambda item: item.arrival_s)  # stable: ties keep the drawing order
    return tuple(
        replace(item, workload=replace(item.workload, ref=_ref(f"gang-{i:05d}")))
        for i, item in enumerate(drawn)
    )


def _ref(name: str) -> WorkloadRef:
    return WorkloadRef("jobset.x-k8s.io/v1alpha2", "JobSet", _NAMESPACE, name)


def _workload(name: str, components: tuple[ComponentDemand, ...]) -> Workload:
    gangs = tuple(
        Gang(name=c.instance, members=(c.label,), min_member=c.replicas) for c in components
    )
    return Workload(ref=_ref(name), components=components, gangs=gangs)
