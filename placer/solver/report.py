"""A decision as JSON data and as text, for ``placer plan`` and anyone who shows decisions.

JSON (stable keys, amounts in base units: cpu in cores, memory in bytes, counts)::

    {"placements": [{"workload": {"kind", "namespace", "name"}, "cluster",
                     "pods": [{"component", "instance", "index", "node"[, "devices"]}],
                     "requests": {RESOURCE: NUMBER}}],
     "unplaced": [{"workload": {...}, "reasons": {CLUSTER: TEXT}}],
     "summary": {"solver", "mode", "status", "seconds", "workloads", "placed",
                 "demand": {...}, "placed_requests": {...}, "bound": {...}}}

``devices`` (GPU device indices on the node) appears only for pods that use GPU devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placer.accelerators import gpu_text, mig_slices
from placer.model import GPU_SHARE, Decision, WorkloadRef
from placer.quantity import CPU, GPU, MEMORY, format_quantity, to_base_map

__all__ = ["BOUND_NAMES", "bound_gap_text", "decision_to_dict", "render_text", "tightest_bound"]

#: what each GPU bound of ``summary.bound`` is, in words, weakest first as
#: :data:`placer.solver.bounds.BOUND_KEYS` (not imported: that module loads OR-Tools).
BOUND_NAMES = {
    "capacity_gpu": "B0: the GPUs asked or the GPUs free, whichever is less",
    "cluster_lp_gpu": "B2: the LP relaxation on cluster totals",
    "node_lp_gpu": "B3: the node-aware LP relaxation",
    "class_lp_gpu": "the node-class LP relaxation",
}


def _ref(ref: WorkloadRef) -> dict[str, str]:
    return {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name}


def decision_to_dict(decision: Decision) -> dict[str, Any]:
    """The JSON data of ``decision`` (see module docstring)."""
    placements = []
    for placement in decision.placements:
        pods = []
        for pod in placement.pods:
            item: dict[str, Any] = {
                "component": pod.component,
                "instance": pod.instance,
                "index": pod.index,
                "node": pod.node,
            }
            if pod.devices:
                item["devices"] = list(pod.devices)
            pods.append(item)
        placements.append(
            {
                "workload": _ref(placement.workload),
                "cluster": placement.cluster,
                "pods": pods,
                "requests": to_base_map(placement.requests),
            }
        )
    summary = decision.summary
    return {
        "placements": placements,
        "unplaced": [
            {"workload": _ref(u.workload), "reasons": dict(u.reasons)} for u in decision.unplaced
        ],
        "summary": {
            "solver": summary.solver,
            "mode": summary.mode,
            "status": summary.status,
            "seconds": summary.seconds,
            "workloads": summary.workloads,
            "placed": summary.placed,
            "demand": to_base_map(summary.demand),
            "placed_requests": to_base_map(summary.placed_requests),
            "bound": dict(summary.bound),
        },
    }


def tightest_bound(bound: Mapping[str, float]) -> tuple[str, float] | None:
    """``(key, GPUs)`` of the least GPU bound of a decision's ``summary.bound`` (on a tie, the
    more refined one), or ``None`` when it has none."""
    found = [(bound[k], -i, k) for i, k in enumerate(BOUND_NAMES) if k in bound]
    if not found:
        return None
    value, _, key = min(found)
    return key, value


def bound_gap_text(
    *, status: str, placed_gpus: float, bound_gpus: float, demand_gpus: float, bound_key: str
) -> str | None:
    """Why a decision placed less than its tightest bound, or ``None`` when it did not.

    Names the bound; says when the demand exceeded the bound (not all of it can fit); for an
    ``optimal`` decision, that nothing places more, so the gap is the bound's own slack (the
    bounds are relaxations: they may split gangs and pods across nodes, which whole gangs
    cannot).
    """
    if placed_gpus >= bound_gpus - 1e-9:
        return None
    name = BOUND_NAMES.get(bound_key, bound_key)
    parts = [f"the bound is {bound_gpus:g} GPUs ({name})"]
    if demand_gpus > bound_gpus + 1e-9:
        parts.append(f"{demand_gpus:g} GPUs were asked, more than fits all together")
    if status == "optimal":
        parts.append(
            "the decision is optimal (proven best for the solver's objective: priorities, "
            "then placed GPUs), so the gap is the bound's slack: a relaxation may split gangs "
            "and pods across nodes, whole ones cannot reach it"
        )
    else:
        parts.append("a better placement could add at most the gap")
    return "; ".join(parts)


def _gpus(requests: Mapping[str, int]) -> str:
    """Whole GPUs and shares of one device, as bounds count them (MIG slices aside)."""
    whole = requests.get(GPU, 0)
    share = requests.get(GPU_SHARE, 0)
    return f"{whole + share / 1000:g}"


def _mig_text(requests: Mapping[str, int]) -> str:
    """``, 2×mig-1g.10gb`` for the MIG slices in ``requests`` (``""``: none)."""
    slices = mig_slices(requests)
    return "".join(f", {amount}×{profile}" for profile, amount in slices.items())


def render_text(decision: Decision) -> list[list[list[str]] | str]:
    """Lines and tables (lists of rows) for a terminal: placements, refusals, summary."""
    out: list[list[list[str]] | str] = []
    summary = decision.summary
    if decision.placements:
        rows = [["WORKLOAD", "CLUSTER", "PODS", "GPUS", "CPU", "MEMORY", "NODES"]]
        for p in decision.placements:
            nodes = sorted({pod.node for pod in p.pods})
            shown = ", ".join(nodes[:3]) + (f" (+{len(nodes) - 3})" if len(nodes) > 3 else "")
            rows.append(
                [
                    str(p.workload),
                    p.cluster,
                    str(len(p.pods)),
                    gpu_text(p.requests),
                    format_quantity(CPU, p.requests.get(CPU, 0)),
                    format_quantity(MEMORY, p.requests.get(MEMORY, 0)),
                    shown,
                ]
            )
        out.append(rows)
    for unplaced in decision.unplaced:
        out.append(f"\n{unplaced.workload}: not placed")
        width = max((len(c) for c in unplaced.reasons), default=0)
        for cluster, text in unplaced.reasons.items():
            out.append(f"  {cluster.ljust(width)}  {text}")
    placed_gpus = _gpus(summary.placed_requests)
    tightest = tightest_bound(summary.bound)
    of = f" of at most {tightest[1]:g} (tightest bound)" if tightest is not None else ""
    out.append(
        f"\n{summary.placed} of {summary.workloads} workload(s) placed, "
        f"{placed_gpus} GPUs{of}{_mig_text(summary.placed_requests)}; "
        f"solver {summary.solver}, {summary.mode} mode, "
        f"{summary.status}, {summary.seconds:.3f} s"
    )
    if tightest is not None:
        gap = bound_gap_text(
            status=summary.status,
            placed_gpus=float(placed_gpus),
            bound_gpus=tightest[1],
            demand_gpus=float(_gpus(summary.demand)),
            bound_key=tightest[0],
        )
        if gap:
            out.append(f"Below the bound: {gap}.")
    return out
