"""Why a placed workload's other clusters were not chosen (the "why not there" of a decision).

A :class:`~placer.model.Decision` explains refusals for unplaced workloads only. A user who
submits a workload also wants to know, for the workload that *was* placed, why each other
cluster was not taken — that is what ``placer submit`` prints under the decision.
:func:`refusals` answers it on the capacity the decision started from, with the same words as
the decision's own explanations (:mod:`placer.solver.explain`): the static exclusion
(unreachable, policy, pin, cluster taint), else the capacity reason, else — the cluster would
have fit too — which preference put the chosen cluster first. Pure; no trial packing (fast
enough for hundreds of workloads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placer.model import Fleet, Workload, WorkloadRef
from placer.policy import PlacementPolicy
from placer.solver.explain import why_not
from placer.solver.problem import Unit, build_problem

__all__ = ["refusals"]


def refusals(
    workloads: Sequence[Workload],
    fleet: Fleet,
    chosen: Mapping[WorkloadRef, str],
    *,
    policies: Sequence[PlacementPolicy] = (),
) -> dict[WorkloadRef, dict[str, str]]:
    """For each workload of ``chosen`` (ref -> cluster), the reason per other cluster.

    Args:
        workloads: the decision's workloads (group members are explained as their group).
        fleet: the capacity the decision started from.
        chosen: where each placed workload went.
        policies: the decision's PlacementPolicies.

    Returns:
        ref -> {cluster: reason} for the clusters of ``fleet`` other than the chosen one, in
        fleet order.
    """
    placed = [w for w in workloads if w.ref in chosen]
    if not placed:
        return {}
    problem = build_problem(placed, fleet, policies)
    out: dict[WorkloadRef, dict[str, str]] = {}
    for unit in problem.units:
        refs = [placed[i].ref for i in unit.members]
        target = chosen[refs[0]]
        texts: dict[str, str] = {}
        for cluster in fleet.clusters:
            name = cluster.name
            if name == target:
                continue
            if name in unit.excluded:
                texts[name] = unit.excluded[name]
                continue
            state = problem.states.get(name)
            if state is None:
                texts[name] = "the cluster has no nodes"
                continue
            reason = why_not(state, unit, try_pack=False)
            if reason is not None:
                texts[name] = reason
            elif target in unit.rank and unit.rank[name] > unit.rank[target]:
                texts[name] = f"fits too, but {target} is preferred ({_preference(unit)})"
            else:
                texts[name] = f"fits too, but {target} was chosen (least GPU fragmentation)"
        for ref in refs:
            out[ref] = dict(texts)
    return out


def _preference(unit: Unit) -> str:
    policy = unit.policy
    if policy is not None and (policy.preferred_clusters or policy.cluster_costs):
        return f"policy {policy.name}: preferred clusters and costs"
    if unit.objective == "spread":
        return "spread: emptier clusters first"
    return "pack: fuller clusters first, keeping emptier ones for big gangs"
