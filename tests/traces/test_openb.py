"""openb reader: every row of every carried list parses, with the trace's units and semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.errors import InputError
from placer.model import GPU_SHARE, NodeSelectorRequirement
from placer.quantity import CPU, GPU, MEMORY, PODS
from placer.traces.nodes import GPU_COUNT_LABEL, GPU_PRODUCT_LABEL
from placer.traces.openb import (
    VARIANTS,
    read_fgd_results,
    read_openb_nodes,
    read_openb_tasks,
    trace_replay,
)
from placer.traces.workloads import gpu_milli

GIB = 2**30

# rows and GPU requests (thousandths) of every carried list, counted from the CSV files
EXPECTED = {
    "default": (8152, 6_086_800),
    "cpu050": (7439, 6_086_800),
    "cpu100": (7853, 6_086_800),
    "cpu200": (8832, 6_086_800),
    "cpu250": (9420, 6_086_800),
    "gpushare40": (8152, 5_641_250),
    "gpushare60": (8152, 4_908_340),
    "gpushare80": (8152, 4_408_190),
    "gpushare100": (8152, 3_952_670),
    "gpuspec10": (8152, 6_086_800),
    "gpuspec20": (8152, 6_086_800),
    "gpuspec25": (8152, 6_086_800),
    "gpuspec33": (8152, 6_086_800),
    "multigpu20": (8324, 7_086_800),
    "multigpu30": (8508, 8_086_800),
    "multigpu40": (8746, 9_442_800),
    "multigpu50": (9061, 11_358_800),
}


def test_gpu_nodes_hand_checked_rows_and_totals() -> None:
    nodes = read_openb_nodes("gpu")
    assert len(nodes) == 1213
    assert sum(n.allocatable[GPU] for n in nodes) == 6212
    first = nodes[0]  # openb-node-0000,64000,262144,2,P100
    assert first.name == "openb-node-0000"
    assert first.allocatable == {CPU: 64_000, MEMORY: 256 * GIB, GPU: 2, PODS: 110}
    assert first.labels[GPU_PRODUCT_LABEL] == "P100"
    assert first.labels[GPU_COUNT_LABEL] == "2"
    assert first.gpu_devices == (1000, 1000)
    g3 = next(n for n in nodes if n.name == "openb-node-0022")  # 128000,786432,8,G3
    assert (g3.allocatable[CPU], g3.allocatable[MEMORY], g3.allocatable[GPU]) == (
        128_000,
        768 * GIB,
        8,
    )
    assert g3.labels[GPU_PRODUCT_LABEL] == "G3"
    models = {n.labels[GPU_PRODUCT_LABEL] for n in nodes}
    assert models == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}


def test_all_nodes_adds_cpu_nodes_without_gpu_labels() -> None:
    nodes = read_openb_nodes("all", gpu_devices=False)
    assert len(nodes) == 1523
    cpu_nodes = [n for n in nodes if GPU not in n.allocatable]
    assert len(cpu_nodes) == 310
    first = nodes[0]  # openb-node-0000,32000,262144,0,
    assert first.allocatable == {CPU: 32_000, MEMORY: 256 * GIB, PODS: 110}
    assert GPU_PRODUCT_LABEL not in first.labels and first.gpu_devices is None
    assert all(n.gpu_devices is None for n in nodes)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_carried_task_list_parses(variant: str) -> None:
    tasks = read_openb_tasks(variant)
    rows, milli = EXPECTED[variant]
    assert len(tasks) == rows
    assert sum(t.total_gpu_milli for t in tasks) == milli
    # the workloads carry the same GPU demand as the rows
    assert sum(gpu_milli(t.workload()) for t in tasks) == milli


def test_task_rows_become_pods_with_the_right_semantics() -> None:
    tasks = {t.name: t for t in read_openb_tasks("default")}
    shared = tasks["openb-pod-0001"]  # 6000,12288,1,460,,LS,Running,427061,12902960
    assert shared.pod().requests == {CPU: 6000, MEMORY: 12 * GIB, GPU_SHARE: 460}
    assert shared.creation_s == 427_061 and shared.lifetime_s == 12_902_960 - 427_061
    eight = tasks["openb-pod-0017"]  # 88000,327680,8,1000 -> 8 whole GPUs
    assert eight.pod().requests == {CPU: 88_000, MEMORY: 320 * GIB, GPU: 8}
    assert eight.total_gpu_milli == 8000
    cpu_only = tasks["openb-pod-0005"]  # 20000,65536,0,0
    assert cpu_only.pod().requests == {CPU: 20_000, MEMORY: 64 * GIB}
    no_memory = tasks["openb-pod-1523"]  # memory_mib 0: no memory request
    assert MEMORY not in no_memory.pod().requests
    workload = shared.workload()
    assert str(workload.ref) == "Pod/openb/openb-pod-0001"
    assert workload.pod_count == 1 and workload.components[0].name == "pod"


def test_gpu_spec_becomes_affinity_on_the_product_label_without_duplicates() -> None:
    tasks = {t.name: t for t in read_openb_tasks("gpuspec33")}
    constrained = tasks["openb-pod-0527"]  # gpu_spec V100M16|V100M32|V100M32
    (term,) = constrained.pod().affinity
    assert term.match_expressions == (
        NodeSelectorRequirement(GPU_PRODUCT_LABEL, "In", ("V100M16", "V100M32")),
    )
    assert sum(1 for t in tasks.values() if t.gpu_spec) == 2388


def test_trace_replay_is_in_creation_order_with_lifetimes_and_scaling() -> None:
    tasks = read_openb_tasks("default")
    items = trace_replay(tasks, time_scale=0.5)
    arrivals = [i.arrival_s for i in items]
    assert arrivals == sorted(arrivals)
    second = next(i for i in items if i.workload.ref.name == "openb-pod-0001")
    assert second.arrival_s == 427_061 * 0.5
    assert second.duration_s == (12_902_960 - 427_061) * 0.5
    assert all(i.duration_s is None for i in trace_replay(tasks[:10], departures=False))
    # lists without times keep file order, one second apart, no departures
    untimed = trace_replay(read_openb_tasks("multigpu20")[:3])
    assert [(i.arrival_s, i.duration_s) for i in untimed] == [(0, None), (1, None), (2, None)]


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ("p0,1000,1024,2,500,,LS,Running,0,5,0", "line 2, column gpu_milli: 500 for a 2-GPU task"),
        ("p0,1000,1024,0,300,,LS,Running,0,5,0", "gpu_milli: 300 for a task without GPUs"),
        ("p0,1000,1024,1,0,,LS,Running,0,5,0", "0 is not a GPU share"),
        ("p0,lots,1024,1,1000,,LS,Running,0,5,0", "column cpu_milli: 'lots' is not a number"),
        ("p0,1000,1024,1,1000,,LS,Running,9,5,0", "deletion_time: 5 is before creation_time 9"),
    ],
)
def test_bad_task_rows_are_named_by_file_line_and_column(
    tmp_path: Path, row: str, fragment: str
) -> None:
    path = tmp_path / "tasks.csv"
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    path.write_text(header + "creation_time,deletion_time,scheduled_time\n" + row + "\n")
    with pytest.raises(InputError) as err:
        read_openb_tasks(path)
    assert str(path) in str(err.value) and fragment in str(err.value)


def test_unknown_variant_and_wrong_file_are_clear(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown openb task list 'gpuspec99'") as err:
        read_openb_tasks("gpuspec99")
    assert "gpuspec33" in str(err.value)  # lists the valid names
    wrong = tmp_path / "nodes.csv"
    wrong.write_text("sn,cpu\nx,1\n")
    with pytest.raises(InputError, match="missing column"):
        read_openb_tasks(wrong)
    with pytest.raises(InputError, match="no such file"):
        read_openb_nodes(tmp_path / "absent.csv")


def test_published_fgd_results_cover_every_carried_list() -> None:
    results = read_fgd_results()
    assert len(results) == 17 * 6 * 7
    assert {r.variant for r in results} == set(VARIANTS)
    default = {
        r.policy: r.alloc_pct for r in results if r.variant == "default" and r.arrived_pct == 130
    }
    assert default == {
        "Random": 87.47,
        "DotProd": 90.849,
        "GpuClustering": 91.878,
        "GpuPacking": 92.002,
        "BestFit": 93.076,
        "FGD": 95.391,
    }
