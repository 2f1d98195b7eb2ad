"""FGD's replay protocol: tuned to the target GPU share, shuffled, seeded, no departures."""

from __future__ import annotations

from collections import Counter

import pytest

from placer.traces.openb import OpenbTask, fgd_replay, read_openb_tasks
from placer.traces.workloads import gpu_milli, total_gpu_milli

CAPACITY = 6_212_000  # openb's 6,212 GPUs, in thousandths
LARGEST_TASK = 8000  # an 8-GPU task


@pytest.fixture(scope="module")
def default() -> tuple[OpenbTask, ...]:
    return read_openb_tasks("default")


def test_tune_up_reaches_130_percent_and_keeps_every_original(
    default: tuple[OpenbTask, ...],
) -> None:
    items = fgd_replay(default, capacity_gpu_milli=CAPACITY, load=1.3, seed=42)
    total = total_gpu_milli(items)
    target = 1.3 * CAPACITY
    # stops at the first draw that would overshoot: at most one task short, never over
    assert target - LARGEST_TASK < total <= target
    names = [i.workload.ref.name for i in items]
    assert len(set(names)) == len(names)
    originals = [n for n in names if "-copy-" not in n]
    assert sorted(originals) == sorted(t.name for t in default)
    # copies come after the shuffled originals, as FGD appends them
    assert all("-copy-" in n for n in names[len(default) :])
    # CPU-only tasks are drawn too (FGD draws from the whole list)
    by_name = {t.name: t for t in default}
    copied = [by_name[n.split("-copy-")[0]] for n in names[len(default) :]]
    assert any(t.num_gpu == 0 for t in copied)
    assert all(i.duration_s is None for i in items)
    assert [i.arrival_s for i in items] == [float(k) for k in range(len(items))]


def test_tune_down_when_the_list_asks_more_than_the_target() -> None:
    tasks = read_openb_tasks("multigpu50")  # 11,358.8 GPUs > 130 % of 6,212
    items = fgd_replay(tasks, capacity_gpu_milli=CAPACITY, load=1.3, seed=42)
    assert len(items) < len(tasks)
    total = total_gpu_milli(items)
    assert 1.3 * CAPACITY - LARGEST_TASK < total <= 1.3 * CAPACITY
    assert not any("-copy-" in i.workload.ref.name for i in items)


def test_same_seed_same_sequence_other_seed_other_order(default: tuple[OpenbTask, ...]) -> None:
    def order(seed: int) -> list[str]:
        items = fgd_replay(default, capacity_gpu_milli=CAPACITY, seed=seed)
        return [i.workload.ref.name for i in items]

    first = order(42)
    assert order(42) == first
    other = order(43)
    assert other != first
    # the shuffle really mixes: the first 100 arrivals are not the first 100 rows
    assert Counter(n < "openb-pod-0100" for n in first[:100])[True] < 20


def test_load_is_a_share_of_the_given_capacity(default: tuple[OpenbTask, ...]) -> None:
    half = fgd_replay(default, capacity_gpu_milli=CAPACITY, load=0.5, seed=1)
    assert 0.5 * CAPACITY - LARGEST_TASK < total_gpu_milli(half) <= 0.5 * CAPACITY
    small_fleet = fgd_replay(default, capacity_gpu_milli=600_000, load=1.3, seed=1)
    assert total_gpu_milli(small_fleet) <= 780_000
    assert all(gpu_milli(i.workload) >= 0 for i in small_fleet)
