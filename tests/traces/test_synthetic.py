"""Synthetic gangs: deterministic for a seed, within the cap, shaped like the design says."""

from __future__ import annotations

from collections import Counter

import pytest

from placer.model import GPU_SHARE
from placer.traces.kalos import read_kalos_jobs
from placer.traces.openb import OpenbTask, read_openb_tasks
from placer.traces.synthetic import GangMix, kalos_tail, synthetic_gangs
from placer.traces.workloads import gpu_milli, total_gpu_milli


@pytest.fixture(scope="module")
def inputs() -> tuple[tuple[OpenbTask, ...], tuple[int, ...]]:
    return read_openb_tasks("default"), kalos_tail(read_kalos_jobs())


def test_same_seed_same_gangs_other_seed_other_gangs(
    inputs: tuple[tuple[OpenbTask, ...], tuple[int, ...]],
) -> None:
    tasks, tail = inputs
    mix = GangMix(max_gang_gpus=200)
    first = synthetic_gangs(tasks, tail, mix, seed=5, count=300)
    assert synthetic_gangs(tasks, tail, mix, seed=5, count=300) == first
    assert synthetic_gangs(tasks, tail, mix, seed=6, count=300) != first


def test_shape_cap_and_order(inputs: tuple[tuple[OpenbTask, ...], tuple[int, ...]]) -> None:
    tasks, tail = inputs
    items = synthetic_gangs(tasks, tail, GangMix(max_gang_gpus=200), seed=1, count=1000)
    assert len(items) == 1000
    assert [i.workload.ref.name for i in items] == [f"gang-{k:05d}" for k in range(1000)]
    assert [i.arrival_s for i in items] == sorted(i.arrival_s for i in items)
    assert max(gpu_milli(i.workload) for i in items) <= 200_000
    components = Counter(len(i.workload.components) for i in items)
    assert set(components) == {1, 2, 3}
    assert 0.6 < components[1] / 1000 < 0.8  # 70 % single-component workloads
    replicas = [c.replicas for i in items for c in i.workload.components]
    single = sum(r == 1 for r in replicas) / len(replicas)
    assert 0.6 < single < 0.85  # small = 0.7 (a few tail draws are clamped to one pod)
    assert max(replicas) >= 100  # the Kalos tail reaches the cap with 1- and 2-GPU pods
    for item in items:
        workload = item.workload
        assert [g.min_member for g in workload.gangs] == [c.replicas for c in workload.components]
        for component in workload.components:
            if component.replicas > 1:  # multi-pod components copy whole-GPU tasks
                assert GPU_SHARE not in component.pod.requests and component.pod.gpus >= 1


def test_target_demand_and_no_fractional_option(
    inputs: tuple[tuple[OpenbTask, ...], tuple[int, ...]],
) -> None:
    tasks, tail = inputs
    mix = GangMix(max_gang_gpus=100, fractional=False, max_components=1, time_scale=0.01)
    items = synthetic_gangs(tasks, tail, mix, seed=2, target_gpu_milli=2_000_000)
    total = total_gpu_milli(items)
    assert 2_000_000 <= total < 2_000_000 + 100_000  # stops once the demand is reached
    assert all(len(i.workload.components) == 1 for i in items)
    assert not any(GPU_SHARE in i.workload.components[0].pod.requests for i in items)
    assert max(i.arrival_s for i in items) < 149 * 86_400 * 0.01


def test_invalid_requests_are_refused(
    inputs: tuple[tuple[OpenbTask, ...], tuple[int, ...]],
) -> None:
    tasks, tail = inputs
    with pytest.raises(ValueError, match="exactly one"):
        synthetic_gangs(tasks, tail, GangMix(max_gang_gpus=8), seed=1)
    with pytest.raises(ValueError, match="max_components"):
        GangMix(max_gang_gpus=8, max_components=4)
