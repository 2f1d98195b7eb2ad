"""Which scheduler a placed workload is handed to on its member, and the warning when that
scheduler does not enforce gangs.

Kept apart from :mod:`placer.dispatch.handoff` (which imports the dispatch machinery: claims,
records, template edits) because ``placer plan`` needs these two answers and nothing else of
dispatch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from placer.model import Fleet, Placement, Workload, WorkloadRef
from placer.policy import PlacementPolicy, policy_for
from placer.schedulers import SchedulerSpec, resolve_scheduler

__all__ = ["gang_warnings", "scheduler_for"]


def scheduler_for(
    cluster: str,
    workload: Workload,
    fleet: Fleet,
    configured: Mapping[str, SchedulerSpec],
    policies: Sequence[PlacementPolicy] = (),
) -> SchedulerSpec:
    """The scheduler ``workload`` is handed to on ``cluster``: its policy's, else the fleet
    file's, else the cluster label's, else ``default``
    (:func:`~placer.schedulers.resolve_scheduler`)."""
    policy = policy_for(workload, policies)
    labels: Mapping[str, str] = next((c.labels for c in fleet.clusters if c.name == cluster), {})
    override = policy.scheduler if policy is not None else None
    return resolve_scheduler(configured.get(cluster), labels, override)


def gang_warnings(
    placements: Iterable[Placement],
    workloads: Mapping[WorkloadRef, Workload],
    fleet: Fleet,
    configured: Mapping[str, SchedulerSpec],
    policies: Sequence[PlacementPolicy] = (),
) -> list[str]:
    """One warning for the placements whose gangs land on members with the default scheduler
    (kube-scheduler binds pods one at a time; two half-started gangs can deadlock)."""
    hit: dict[str, list[str]] = {}
    for placement in placements:
        workload = workloads.get(placement.workload)
        if workload is None:
            continue
        spec = scheduler_for(placement.cluster, workload, fleet, configured, policies)
        if spec.name != "default":
            continue
        if any(g.min_member > 1 for g in workload.gangs):
            hit.setdefault(placement.cluster, []).append(str(placement.workload))
    if not hit:
        return []
    where = "; ".join(f"{c}: {', '.join(refs)}" for c, refs in sorted(hit.items()))
    return [
        "gangs are not enforced on members with the default scheduler (kube-scheduler binds "
        f"pods one at a time, so two half-started gangs can deadlock): {where}; set "
        "scheduler: kai|volcano|coscheduling for these clusters in the fleet file"
    ]
