"""The Alibaba openb GPU trace: its nodes, its tasks, and FGD's replay protocol.

openb (ATC '23, the FGD paper) is one GPU-sharing cluster: 1,213 GPU nodes (6,212 GPUs of seven
models) and task lists of single pods asking CPU, memory and either whole GPUs or a share of one
GPU. Columns and units are documented in ``placer/traces/data/alibaba-openb-gpu-2023/README.md``.

How a task becomes a :class:`placer.model.Workload` (a ``v1/Pod`` with one pod, the same shape
the ``core-pod-v1`` definition gives a real Pod):

* ``num_gpu`` whole GPUs request ``nvidia.com/gpu``. ``gpu_milli`` is the share of *each*
  requested GPU: below 1000 only for one-GPU tasks, which then share a device and request
  ``placer.dev/gpu-milli`` instead (never both); every multi-GPU task has 1000.
* ``gpu_spec`` (allowed models, ``|``-separated, duplicates dropped) becomes a required node
  affinity on ``nvidia.com/gpu.product``, the label the node reader sets. It is ignored on
  CPU-only tasks, as FGD's converter does.
* ``creation_time``/``deletion_time`` become arrival and duration; the ``multigpu`` lists have
  no times.

**FGD's replay protocol** (:func:`fgd_replay`), read from the FGD simulator
(hkust-adsl/kubernetes-scheduler-simulator: ``Simulate``, ``SortClusterPods``,
``TunePodsByNodeTotalResource``) and its run scripts (``-tune 1.3``, seeds 42–51,
``shufflePod: true``):

1. order the task list by name and shuffle it with the seed;
2. *tune* its total GPU request to ``load`` × the fleet's GPU capacity: if the list asks less,
   draw tasks uniformly (with replacement) from the original list — CPU-only tasks included —
   and append copies at the end until the next draw would overshoot the target; if it asks more
   (``multigpu40``/``50``), remove uniformly drawn tasks until it fits;
3. place the tasks one at a time in that order; nothing departs (the simulator's time
   annotations are not RFC 3339, so it never creates deletion events) and a task that does not
   fit is left unplaced. Published curves plot allocation against "arrived GPU request /
   capacity".

Two deliberate differences, both documented in the results: Python's ``random`` replaces Go's
``math/rand`` (same protocol, different draws, so compare means over seeds 42–51, not single
runs), and the stop test uses the drawn task's *total* GPU request where FGD's compares only its
per-GPU share (FGD may overshoot the target by up to 7 GPUs with an 8-GPU draw; we never do).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from placer.errors import InputError
from placer.model import (
    GPU_SHARE,
    ComponentDemand,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodDemand,
    Workload,
    WorkloadRef,
)
from placer.quantity import CPU, GPU, MEMORY
from placer.traces.datasets import OPENB_DIR, CsvRow, read_csv
from placer.traces.nodes import DEFAULT_MAX_PODS, GPU_PRODUCT_LABEL, trace_node
from placer.traces.workloads import TimedWorkload

__all__ = [
    "FGD_RESULTS_FILE",
    "NODE_LISTS",
    "VARIANTS",
    "FgdResult",
    "OpenbTask",
    "fgd_replay",
    "openb_task_file",
    "read_fgd_results",
    "read_openb_nodes",
    "read_openb_tasks",
    "trace_replay",
]

MIB = 2**20
#: The carried node lists: ``gpu`` = the 1,213 GPU nodes FGD simulates; ``all`` = those (with
#: other names) plus 310 CPU-only nodes.
NODE_LISTS = {"gpu": "openb_node_list_gpu_node.csv", "all": "openb_node_list_all_node.csv"}
#: The carried task lists: every list with published FGD results.
VARIANTS = (
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
)
FGD_RESULTS_FILE = OPENB_DIR / "fgd-expected-results" / "summary_by_workload_policy.csv"
_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_TASK_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_NAMESPACE = "openb"


# --------------------------------------------------------------------------------------------
# Nodes


def read_openb_nodes(
    source: str | Path = "gpu",
    *,
    gpu_devices: bool = True,
    max_pods: int = DEFAULT_MAX_PODS,
) -> tuple[Node, ...]:
    """Read an openb node list.

    Args:
        source: ``"gpu"`` or ``"all"`` (the carried lists, see :data:`NODE_LISTS`), or a path to
            a CSV file with the columns ``sn,cpu_milli,memory_mib,gpu,model``.
        gpu_devices: model GPU sharing (``gpu_devices``, 1000 free per GPU).
        max_pods: ``pods`` allocatable of every node.

    Returns:
        Nodes in file order, all free (see :mod:`placer.traces.nodes` for labels and units).
    """
    if isinstance(source, str) and source in NODE_LISTS:
        path: Path = OPENB_DIR / NODE_LISTS[source]
    elif isinstance(source, Path):
        path = source
    else:
        raise InputError(
            f"unknown openb node list {source!r}",
            hint=f"use one of {', '.join(NODE_LISTS)}, or pass a Path to a CSV file",
        )
    nodes = []
    for row in read_csv(path, required=_NODE_COLUMNS):
        gpus = row.integer("gpu")
        model = row.text("model")
        if gpus and not model:
            raise row.error("model", f"a node with {gpus} GPUs needs a GPU model")
        nodes.append(
            trace_node(
                row.text("sn"),
                cpu_milli=row.integer("cpu_milli", minimum=1),
                memory_bytes=row.integer("memory_mib", minimum=1) * MIB,
                gpus=gpus,
                model=model,
                gpu_devices=gpu_devices,
                max_pods=max_pods,
            )
        )
    _check_unique((n.name for n in nodes), str(path), "sn")
    return tuple(nodes)


# --------------------------------------------------------------------------------------------
# Tasks


@dataclass(frozen=True)
class OpenbTask:
    """One row of an openb task list, typed (units as in the trace)."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    #: share of each requested GPU, thousandths (1000 = whole GPU; 0 for CPU-only tasks).
    gpu_milli: int
    #: allowed GPU models (empty = any).
    gpu_spec: tuple[str, ...] = ()
    qos: str = ""
    phase: str = ""
    #: seconds from the trace start (``None`` in lists without times).
    creation_s: int | None = None
    deletion_s: int | None = None

    @property
    def total_gpu_milli(self) -> int:
        """GPU request in thousandths (``num_gpu × gpu_milli``), FGD's ``TotalMilliGpu``."""
        return self.num_gpu * self.gpu_milli

    @property
    def shares_gpu(self) -> bool:
        """A one-GPU task asking only part of the device."""
        return self.num_gpu == 1 and self.gpu_milli < 1000

    @property
    def lifetime_s(self) -> int | None:
        """``deletion − creation`` in seconds, when both are known."""
        if self.creation_s is None or self.deletion_s is None:
            return None
        return self.deletion_s - self.creation_s

    def pod(self) -> PodDemand:
        """The task's pod: requests in canonical units, GPU-model affinity."""
        requests = {CPU: self.cpu_milli}
        if self.memory_mib:
            requests[MEMORY] = self.memory_mib * MIB
        affinity: tuple[NodeSelectorTerm, ...] = ()
        if self.num_gpu:
            if self.shares_gpu:
                requests[GPU_SHARE] = self.gpu_milli
            else:
                requests[GPU] = self.num_gpu
            if self.gpu_spec:
                requirement = NodeSelectorRequirement(GPU_PRODUCT_LABEL, "In", self.gpu_spec)
                affinity = (NodeSelectorTerm(match_expressions=(requirement,)),)
        return PodDemand(requests=requests, affinity=affinity)

    def workload(self, name: str | None = None) -> Workload:
        """The task as a one-pod ``v1/Pod`` workload (named after the task unless ``name``)."""
        return Workload(
            ref=WorkloadRef("v1", "Pod", _NAMESPACE, name or self.name),
            components=(ComponentDemand(name="pod", instance="", replicas=1, pod=self.pod()),),
        )


def openb_task_file(variant: str) -> Path:
    """The carried task list of a variant (``default``, ``gpuspec33``, …)."""
    if variant not in VARIANTS:
        raise InputError(
            f"unknown openb task list {variant!r}",
            hint=f"use one of: {', '.join(VARIANTS)}",
        )
    return OPENB_DIR / "pods" / f"openb_pod_list_{variant}.csv.gz"


def read_openb_tasks(source: str | Path = "default") -> tuple[OpenbTask, ...]:
    """Read an openb task list.

    Args:
        source: a variant name (:data:`VARIANTS`) or a :class:`~pathlib.Path` to a task CSV
            (``.csv`` or ``.csv.gz``) in openb's format — e.g. one of the lists not carried.

    Returns:
        Tasks in file order.

    Raises:
        InputError: unknown variant, unreadable file, or a row that breaks openb's semantics
            (named by file, line and column).
    """
    path = source if isinstance(source, Path) else openb_task_file(source)
    tasks = tuple(_task(row) for row in read_csv(path, required=_TASK_COLUMNS))
    _check_unique((t.name for t in tasks), str(path), "name")
    return tasks


def _task(row: CsvRow) -> OpenbTask:
    num_gpu = row.integer("num_gpu")
    gpu_milli = row.integer("gpu_milli")
    if num_gpu == 0 and gpu_milli:
        raise row.error("gpu_milli", f"{gpu_milli} for a task without GPUs (num_gpu 0)")
    if num_gpu and not 0 < gpu_milli <= 1000:
        raise row.error("gpu_milli", f"{gpu_milli} is not a GPU share between 1 and 1000")
    if num_gpu > 1 and gpu_milli != 1000:
        raise row.error("gpu_milli", f"{gpu_milli} for a {num_gpu}-GPU task (must be 1000)")
    spec: tuple[str, ...] = ()
    if num_gpu and row.has("gpu_spec"):
        models = [m.strip() for m in row.text("gpu_spec").split("|") if m.strip()]
        spec = tuple(dict.fromkeys(models))
    creation = row.optional_integer("creation_time")
    deletion = row.optional_integer("deletion_time")
    if creation is not None and deletion is not None and deletion < creation:
        raise row.error("deletion_time", f"{deletion} is before creation_time {creation}")
    return OpenbTask(
        name=row.text("name"),
        cpu_milli=row.integer("cpu_milli"),
        memory_mib=row.integer("memory_mib"),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        gpu_spec=spec,
        qos=row.text("qos") if row.has("qos") else "",
        phase=row.text("pod_phase") if row.has("pod_phase") else "",
        creation_s=creation,
        deletion_s=deletion,
    )


# --------------------------------------------------------------------------------------------
# Replays


def trace_replay(
    tasks: Sequence[OpenbTask], *, time_scale: float = 1.0, departures: bool = True
) -> tuple[TimedWorkload, ...]:
    """The tasks as the trace ran them: arrival = creation time, duration = lifetime.

    Args:
        tasks: from :func:`read_openb_tasks`.
        time_scale: multiply every time by this (``0.01`` compresses 149 days to 1.5).
        departures: keep durations; ``False`` makes every task stay forever.

    Returns:
        Timed workloads in creation order (ties by name). A list without times (``multigpu``)
        keeps file order, arrives one second apart and never departs.
    """
    if time_scale <= 0:
        raise ValueError("time_scale must be positive")
    if any(t.creation_s is None for t in tasks):
        return tuple(TimedWorkload(t.workload(), float(i)) for i, t in enumerate(tasks))
    ordered = sorted(tasks, key=lambda t: (t.creation_s or 0, t.name))
    return tuple(
        TimedWorkload(
            t.workload(),
            (t.creation_s or 0) * time_scale,
            t.lifetime_s * time_scale if departures and t.lifetime_s is not None else None,
        )
        for t in ordered
    )


def fgd_replay(
    tasks: Sequence[OpenbTask], *, capacity_gpu_milli: int, load: float = 1.3, seed: int = 42
) -> tuple[TimedWorkload, ...]:
    """FGD's replay input: shuffled, tuned to ``load`` × capacity, no departures.

    Args:
        tasks: the task list (from :func:`read_openb_tasks`).
        capacity_gpu_milli: the fleet's GPU capacity in thousandths
            (:func:`placer.traces.workloads.fleet_gpu_milli`; 6,212,000 for openb's GPU nodes).
        load: target total GPU request as a share of capacity (FGD: 1.3).
        seed: FGD uses 42–51.

    Returns:
        Timed workloads one second apart in replay order, ``duration_s`` ``None``. Copies added by
        the tuning are named ``<task>-copy-<n>``.
    """
    if load <= 0:
        raise ValueError("load must be positive")
    if not any(t.total_gpu_milli for t in tasks):
        raise ValueError("the task list asks for no GPU: nothing to tune to a GPU load")
    rng = random.Random(seed)
    pool = sorted(tasks, key=lambda t: t.name)
    order: list[tuple[OpenbTask, str]] = [(t, t.name) for t in pool]
    rng.shuffle(order)
    target = load * capacity_gpu_milli
    total = sum(t.total_gpu_milli for t, _ in order)
    if total > target:  # tune down: drop random tasks until the request fits
        while total > target:
            removed, _ = order.pop(rng.randrange(len(order)))
            total -= removed.total_gpu_milli
    else:  # tune up: append copies of random tasks until the next one would overshoot
        copies = 0
        while True:
            task = pool[rng.randrange(len(pool))]
            if total + task.total_gpu_milli > target:
                break
            order.append((task, f"{task.name}-copy-{copies}"))
            total += task.total_gpu_milli
            copies += 1
    return tuple(
        TimedWorkload(task.workload(name), float(i)) for i, (task, name) in enumerate(order)
    )


def _check_unique(names: Iterable[str], source: str, column: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"duplicate {column} {name!r}", source=source, field=column)
        seen.add(name)


# --------------------------------------------------------------------------------------------
# Published results


@dataclass(frozen=True)
class FgdResult:
    """FGD's published outcome for one task list, policy and arrived load (mean of 10 seeds)."""

    #: the task list (a :data:`VARIANTS` name).
    variant: str
    #: ``Random``, ``DotProd``, ``GpuClustering``, ``GpuPacking``, ``BestFit`` or ``FGD``.
    policy: str
    #: arrived GPU request as % of capacity (50, 80, 90, 100, 110, 120, 130).
    arrived_pct: int
    #: allocated GPUs as % of capacity: mean and standard deviation over the seeds.
    alloc_pct: float
    alloc_std: float
    #: fragmented GPUs (FGD's measure) as % of capacity, mean over the seeds.
    frag_pct: float
    seeds: int


def read_fgd_results(path: Path = FGD_RESULTS_FILE) -> tuple[FgdResult, ...]:
    """The published FGD / baseline results carried with the trace (17 lists × 6 policies)."""
    columns = ("workload", "policy", "arrived_gpu_pct", "alloc_gpu_pct_mean")
    return tuple(
        FgdResult(
            variant=row.text("workload").removeprefix("openb_pod_list_"),
            policy=row.text("policy"),
            arrived_pct=row.integer("arrived_gpu_pct"),
            alloc_pct=row.number("alloc_gpu_pct_mean"),
            alloc_std=row.number("alloc_gpu_pct_std"),
            frag_pct=row.number("frag_gpu_pct_mean"),
            seeds=row.integer("seeds", minimum=1),
        )
        for row in read_csv(path, required=columns)
    )
