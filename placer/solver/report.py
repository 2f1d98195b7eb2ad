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

from placer.model import GPU_SHARE, Decision, WorkloadRef
from placer.quantity import CPU, GPU, MEMORY, format_quantity, to_base_map

__all__ = ["decision_to_dict", "render_text"]


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


def _gpus(requests: Mapping[str, int]) -> str:
    whole = requests.get(GPU, 0)
    share = requests.get(GPU_SHARE, 0)
    return f"{whole + share / 1000:g}"


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
                    _gpus(p.requests),
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
    bound = summary.bound
    placed_gpus = _gpus(summary.placed_requests)
    tightest = bound.get("tightest_gpu")
    of = f" of at most {tightest:g} (tightest bound)" if tightest is not None else ""
    out.append(
        f"\n{summary.placed} of {summary.workloads} workload(s) placed, "
        f"{placed_gpus} GPUs{of}; solver {summary.solver}, {summary.mode} mode, "
        f"{summary.status}, {summary.seconds:.3f} s"
    )
    return out
