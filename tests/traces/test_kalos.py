"""Kalos gangs: every row parses into a gang workload with the trace's units."""

from __future__ import annotations

from collections import Counter

from placer.model import Cluster, Fleet
from placer.quantity import CPU, GPU, MEMORY
from placer.traces.kalos import JOB_TYPE_LABEL, kalos_replay, pod_limits, read_kalos_jobs
from placer.traces.nodes import trace_node

GB = 10**9
GIB = 2**30


def test_every_job_parses_with_hand_checked_rows() -> None:
    jobs = read_kalos_jobs()
    assert len(jobs) == 319
    sizes = Counter(j.pods for j in jobs)
    assert (sizes[1], sizes[32], sizes[64], sizes[128]) == (89, 52, 73, 38)
    assert sum(j.gpus for j in jobs) == 99_711
    first = jobs[0]  # 0,0.0,208,0.5,0.25,8,0,8.0,15.0,15.0,10.0,500
    assert (first.arrival_s, first.duration_s, first.pods, first.gpus_per_pod) == (0, 104, 8, 8)
    assert first.cpu_milli_per_pod == 120_000 and first.memory_per_pod == 1000 * GB
    assert not first.pretrain
    two_gpu = jobs[24]  # 24,684979.0,702,...,1,0,2.0,60.0,60.0,10.0,500
    assert (two_gpu.arrival_s, two_gpu.duration_s, two_gpu.pods) == (684_979, 351, 1)
    assert (two_gpu.gpus_per_pod, two_gpu.cpu_milli_per_pod) == (2, 120_000)
    small = jobs[249]  # 249,6031333.0,42,...,4,0,8.0,3.0,3.0,1.0,500
    assert (small.pods, small.cpu_milli_per_pod, small.memory_per_pod) == (4, 24_000, 100 * GB)
    assert sum(j.pretrain for j in jobs) == 183


def test_a_job_is_one_gang_of_identical_pods() -> None:
    job = read_kalos_jobs()[3]  # 16 pods x 8 GPUs, Pretrain
    workload = job.workload()
    (component,) = workload.components
    assert component.replicas == 16 and component.pod.requests[GPU] == 8
    (gang,) = workload.gangs
    assert gang.members == (component.label,) and gang.min_member == 16
    assert workload.gpus == 128 and workload.labels[JOB_TYPE_LABEL] == "pretrain"
    assert str(workload.ref) == "JobSet/kalos/kalos-job-003"


def test_replay_scales_times_and_fit_lowers_pods_to_the_leanest_eligible_node() -> None:
    lean = trace_node("lean", cpu_milli=64_000, memory_bytes=256 * GIB, gpus=8, model="G2")
    big = trace_node("big", cpu_milli=128_000, memory_bytes=768 * GIB, gpus=8, model="G3")
    small = trace_node("small", cpu_milli=8_000, memory_bytes=60 * GIB, gpus=2, model="P100")
    fleet = Fleet((Cluster("c", (lean, big, small)),))
    assert pod_limits(fleet, 8) == (64_000, 256 * GIB)
    assert pod_limits(fleet, 2) == (8_000, 60 * GIB)  # a 2-GPU pod may take the P100 box
    assert pod_limits(fleet, 1) == (4_000, 30 * GIB)
    jobs = read_kalos_jobs()
    items = kalos_replay(jobs, time_scale=0.01, fit=fleet)
    assert [i.arrival_s for i in items] == sorted(j.arrival_s * 0.01 for j in jobs)
    assert items[0].duration_s == 1.04
    for item in items:
        pod = item.workload.components[0].pod.requests
        cpu, memory = pod_limits(fleet, pod[GPU]) or (0, 0)
        assert pod[CPU] <= cpu and pod[MEMORY] <= memory
    # without fit, the trace's requests stay
    raw = kalos_replay(jobs[:1])[0].workload.components[0].pod.requests
    assert raw == {CPU: 120_000, MEMORY: 1000 * GB, GPU: 8}
