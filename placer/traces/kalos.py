"""The Acme "Kalos" gangs: 319 real multi-node LLM jobs as gang workloads.

Each job is ``gpu_workers`` identical pods of ``gpu_per_worker`` GPUs that must start together —
the shape of a distributed training job. placer models one as a JobSet with a single
replicated job ``worker`` of that many pods and one gang over all of them (all or nothing, in one
cluster), the shape the ``jobset`` definition gives a real JobSet. Columns and their inverse
mapping are in ``placer/traces/data/acme-kalos-gangs-derived/README.md``:
duration = ``num_iteration`` × 0.5 s, CPU per pod = ``cpu_per_gpu_worker`` × GPUs per pod,
memory per pod = ``tensorsizes`` × 100 GB.

Pods as the trace has them ask 120 CPUs and up to 1.9 TB each — sized for Kalos' A100 servers,
bigger than any openb node. ``fit`` keeps the GPUs and the gang sizes and lowers CPU and memory
to what the target fleet can hold: a pod of ``g`` GPUs asks at most ``g/G`` of the CPU and memory
of the leanest node having ``G >= g`` GPUs, so GPUs — what the big-gang benchmark is about — are
the only binding resource. Requests already below that share are kept.

Times are compressible (``time_scale``): the trace spans 90 days and a week-long job is common.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from placer.model import ComponentDemand, Fleet, Gang, PodDemand, Workload, WorkloadRef
from placer.quantity import CPU, GPU, MEMORY
from placer.traces.datasets import KALOS_DIR, read_csv
from placer.traces.workloads import TimedWorkload, fleet_nodes

__all__ = [
    "JOB_TYPE_LABEL",
    "KALOS_FILE",
    "KalosJob",
    "kalos_replay",
    "pod_limits",
    "read_kalos_jobs",
]

KALOS_FILE = KALOS_DIR / "converted_kalos_trace.csv"
GB = 10**9
_COLUMNS = (
    "job_id",
    "arrival_time",
    "num_iteration",
    "gpu_workers",
    "gpu_per_worker",
    "cpu_per_gpu_worker",
    "tensorsizes",
    "profiled_network",
)
_SECONDS_PER_ITERATION = 0.5
_NAMESPACE = "kalos"
_INSTANCE = "worker"
#: label on every Kalos workload: ``pretrain`` or ``other`` (SFT and other jobs).
JOB_TYPE_LABEL = "trace.placer.dev/job-type"


@dataclass(frozen=True)
class KalosJob:
    """One gang of the Kalos trace, in canonical units."""

    job_id: int
    arrival_s: float
    duration_s: float
    pods: int
    gpus_per_pod: int
    cpu_milli_per_pod: int
    memory_per_pod: int
    pretrain: bool

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    def workload(self, *, cpu_milli: int | None = None, memory: int | None = None) -> Workload:
        """The job as a JobSet workload; ``cpu_milli``/``memory`` override the per-pod requests."""
        requests = {
            CPU: self.cpu_milli_per_pod if cpu_milli is None else cpu_milli,
            MEMORY: self.memory_per_pod if memory is None else memory,
            GPU: self.gpus_per_pod,
        }
        component = ComponentDemand(
            name="replicatedjob",
            instance=_INSTANCE,
            replicas=self.pods,
            pod=PodDemand(requests=requests),
        )
        return Workload(
            ref=WorkloadRef(
                "jobset.x-k8s.io/v1alpha2", "JobSet", _NAMESPACE, f"kalos-job-{self.job_id:03d}"
            ),
            components=(component,),
            gangs=(Gang(name=_INSTANCE, members=(component.label,), min_member=self.pods),),
            labels={JOB_TYPE_LABEL: "pretrain" if self.pretrain else "other"},
        )


def read_kalos_jobs(path: Path = KALOS_FILE) -> tuple[KalosJob, ...]:
    """Read the Kalos gang list (the carried file, or one in the same format)."""
    jobs = []
    for row in read_csv(path, required=_COLUMNS):
        gpus_per_pod = row.integer("gpu_per_worker", minimum=1)
        cpu_per_gpu = row.number("cpu_per_gpu_worker")
        jobs.append(
            KalosJob(
                job_id=row.integer("job_id"),
                arrival_s=row.number("arrival_time"),
                duration_s=row.integer("num_iteration") * _SECONDS_PER_ITERATION,
                pods=row.integer("gpu_workers", minimum=1),
                gpus_per_pod=gpus_per_pod,
                cpu_milli_per_pod=round(cpu_per_gpu * gpus_per_pod * 1000),
                memory_per_pod=round(row.number("tensorsizes") * 100 * GB),
                pretrain=row.integer("profiled_network") == 1000,
            )
        )
    return tuple(jobs)


def pod_limits(fleet: Fleet, gpus_per_pod: int) -> tuple[int, int] | None:
    """The largest CPU (millicores) and memory (bytes) a pod of ``gpus_per_pod`` GPUs may ask
    so that it fits, in its GPU share, the leanest node of ``fleet`` with enough GPUs.

    A pod of ``g`` GPUs may ask ``g/G`` of the CPU and memory of a node with ``G >= g`` GPUs (so
    ``G/g`` such pods fill that node's GPUs); the limit is the minimum over those nodes.
    ``None`` when no node has ``g`` GPUs.
    """
    limits: tuple[int, int] | None = None
    for node in fleet_nodes(fleet):
        gpus = node.allocatable.get(GPU, 0)
        if gpus >= gpus_per_pod:
            cpu = node.allocatable.get(CPU, 0) * gpus_per_pod // gpus
            memory = node.allocatable.get(MEMORY, 0) * gpus_per_pod // gpus
            limits = (
                (cpu, memory) if limits is None else (min(limits[0], cpu), min(limits[1], memory))
            )
    return limits


def kalos_replay(
    jobs: Sequence[KalosJob], *, time_scale: float = 1.0, fit: Fleet | None = None
) -> tuple[TimedWorkload, ...]:
    """The gangs in submit order with arrivals and durations scaled by ``time_scale``.

    Args:
        jobs: from :func:`read_kalos_jobs`.
        time_scale: multiply arrival and duration (``0.01``: 90 days become 21.6 hours).
        fit: lower CPU and memory per pod to what this fleet's nodes hold (:func:`pod_limits`;
            a gang whose pods fit no node keeps the trace's requests); ``None`` keeps the
            trace's requests.
    """
    if time_scale <= 0:
        raise ValueError("time_scale must be positive")
    limits = {g: pod_limits(fit, g) for g in {j.gpus_per_pod for j in jobs}} if fit else {}
    items = []
    for job in sorted(jobs, key=lambda j: (j.arrival_s, j.job_id)):
        cpu, memory = job.cpu_milli_per_pod, job.memory_per_pod
        limit = limits.get(job.gpus_per_pod)
        if limit is not None:
            cpu, memory = min(cpu, limit[0]), min(memory, limit[1])
        items.append(
            TimedWorkload(
                job.workload(cpu_milli=cpu, memory=memory),
                job.arrival_s * time_scale,
                job.duration_s * time_scale,
            )
        )
    return tuple(items)
