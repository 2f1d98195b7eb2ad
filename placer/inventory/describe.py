"""The live ``describe`` view: the definition's tree with the pods actually there.

Builds on :func:`placer.definitions.view.build_view` (the same rows as ``describe -f``) and
adds, per row holding pods, the pods of the workload attributed to it
(:mod:`placer.inventory.pods`) with phase, node and GPUs, the ``ready/desired`` count and the
nodes; then the workload's cluster, phase, placement record, resources and gangs. Layout
follows the Workload Map CLI (spec section 11.2)::

    JobSet/demo   namespace: default   cluster: central   definition: ... (catalog)   age: 2m

    `-- replicatedjob                 3/3 ready   gpu: 12   central-l40s-0,...
        |-- leader                    1/1 ready   gpu: 4    central-l40s-0
        |   `-- demo-replicatedjob-leader-0   Running   gpu: 4   central-l40s-0
        ...

    Phase: Running
    Placement: placed by placer on central, decision ..., at ...

Pods are read once per describe (one list in the workload's namespace), scoped to the workload
by owner references (:mod:`placer.kube.owners`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placer.accelerators import AcceleratorTable, gpu_text, mig_slices
from placer.definitions.view import (
    ViewRow,
    build_view,
    elastic_lines,
    resource_rows,
    topology_lines,
)
from placer.dispatch.spread import spread_copies_of
from placer.inventory.listing import LiveWorkload, age
from placer.inventory.pods import attribute_pods
from placer.kube import KubeClient, OwnerWalker
from placer.model import GPU_SHARE
from placer.objects import name_of
from placer.podspec import pod_demand
from placer.quantity import GPU

__all__ = ["LiveView", "live_json", "live_view", "render_live"]

Pod = Mapping[str, Any]


@dataclass(frozen=True)
class LiveView:
    """A workload on its cluster with its pods by component row label."""

    workload: LiveWorkload
    pods: Mapping[str, Sequence[Pod]]
    #: every pod owned by the workload (attributed or not).
    owned: Sequence[Pod]


def live_view(workload: LiveWorkload, client: KubeClient) -> LiveView:
    """Read the workload's pods on its cluster and attribute them (see the module docstring)."""
    namespace = workload.namespace or None
    pods = client.list("v1", "Pod", namespace=namespace).items
    walker = OwnerWalker(client)
    owned: list[Pod] = [p for p in pods if walker.owned_by(p, workload.uid)]
    if workload.kind == "Pod" and str(workload.object.get("apiVersion")) == "v1":
        owned = [workload.object]
    attributed = (
        attribute_pods(workload.decomposition, owned) if workload.decomposition is not None else {}
    )
    return LiveView(workload, attributed, owned)


def _align(rows: Sequence[Sequence[str]], padding: int = 3) -> list[str]:
    """Cells padded to their column's width (the describe layout), trailing blanks trimmed."""
    widths: dict[int, int] = {}
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths.get(i, 0), len(cell))
    return ["".join(c.ljust(widths[i] + padding) for i, c in enumerate(r)).rstrip() for r in rows]


def _pod_requests(pod: Pod) -> Mapping[str, int]:
    return pod_demand(pod.get("spec") or {}, strict=False).requests


def _pod_gpus(pod: Pod) -> float:
    requests = _pod_requests(pod)
    return requests.get(GPU, 0) + requests.get(GPU_SHARE, 0) / 1000


def _gpu_cell(requests: Mapping[str, int], table: AcceleratorTable | None) -> str:
    """``gpu: 4`` (``gpu: 2×mig-1g.10gb``), or empty when the requests hold no GPU."""
    text = gpu_text(requests, table)
    return f"gpu: {text}" if text != "0" else ""


def _ready(pod: Pod) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _phase(pod: Pod) -> str:
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Unknown")
    if _ready(pod) or phase == "Succeeded":
        return phase
    reason = ""
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reason = str(condition.get("reason") or "")
    reason = reason or str(status.get("reason") or "")
    return f"{phase} ({reason})" if reason else phase


def _row_pods(view: LiveView, row: ViewRow) -> list[Pod]:
    if row.holds_pods:
        return list(view.pods.get(row.label, ()))
    return [p for child in row.children for p in _row_pods(view, child)]


def _tree(view: LiveView) -> list[list[str]]:
    """Cells per line: component rows (name, ready/desired, gpu, nodes), pods under them."""
    out: list[list[str]] = []
    table = view.workload.accelerators

    def row_line(row: ViewRow, indent: str, last: bool) -> None:
        pods = _row_pods(view, row)
        ready = sum(1 for p in pods if _ready(p))
        nodes = sorted({_node(p) for p in pods if _node(p)})
        out.append(
            [
                f"{indent}{'`-- ' if last else '|-- '}{row.name}",
                f"{ready}/{row.replicas} ready",
                _gpu_cell(row.total, table),
                ",".join(nodes),
            ]
        )
        inner = indent + ("    " if last else "|   ")
        own = list(view.pods.get(row.label, ())) if row.holds_pods else []
        items: list[Pod | ViewRow] = [*own, *row.children]
        for position, item in enumerate(items):
            item_last = position == len(items) - 1
            if isinstance(item, ViewRow):
                row_line(item, inner, item_last)
            else:
                pod_line(item, inner, item_last)

    def pod_line(pod: Pod, indent: str, last: bool) -> None:
        out.append(
            [
                f"{indent}{'`-- ' if last else '|-- '}{(pod.get('metadata') or {}).get('name')}",
                _phase(pod),
                _gpu_cell(_pod_requests(pod), table),
                _node(pod) or "<none>",
            ]
        )

    decomposition = view.workload.decomposition
    rows = build_view(decomposition).rows if decomposition is not None else ()
    for index, row in enumerate(rows):
        row_line(row, "", index == len(rows) - 1)
    return out


def _node(pod: Pod) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def render_live(view: LiveView) -> str:
    """The text block of one live workload (ends with a newline)."""
    w = view.workload
    header = (
        f"{w.kind}/{w.name}   namespace: {w.namespace or '<none>'}   cluster: {w.cluster}   "
        f"definition: {w.definition.name} ({w.definition.origin})   "
        f"age: {age(w.metadata.get('creationTimestamp'))}"
    )
    lines = [header, ""]
    if w.decomposition is None:
        lines += [f"cannot be read through its definition: {w.problem}"]
        return "\n".join(lines) + "\n"
    lines.extend(_align(_tree(view)) or ["(no components)"])
    attributed = {id(p) for pods in view.pods.values() for p in pods}
    stray = [p for p in view.owned if id(p) not in attributed]
    if stray:
        lines += ["", f"{len(stray)} pod(s) of the workload match no component of the definition"]
    lines += ["", f"Phase: {', '.join(w.phases)}"]
    record = w.record
    if record is not None:
        lines.append(
            f"Placement: placed by placer on {record.cluster}, decision {record.decision}, "
            f"at {record.placed_at}"
        )
    else:
        lines.append("Placement: not placed by placer (no placement record)")
    spread = spread_copies_of(w.object)
    if spread is not None:
        lines.append(f"Spread: one of {len(spread.copies)} copies ({spread_text(spread.copies)})")
    lines += ["", "Resources:"]
    lines.extend(_align(resource_rows(build_view(w.decomposition))))
    if w.decomposition.gangs:
        lines += ["", "Gangs:"]
        gang_rows = [["NAME", "MIN", "MEMBERS"]] + [
            [g.name, str(g.min_member), ", ".join(g.members)] for g in w.decomposition.gangs
        ]
        lines.extend(_align(gang_rows))
    lines.extend(elastic_lines(w.decomposition))
    lines.extend(topology_lines(w.decomposition.workload.topology))
    return "\n".join(lines) + "\n"


def live_json(view: LiveView) -> dict[str, Any]:
    """``describe -o json`` of a live workload: the listing fields plus pods per component."""
    data = view.workload.to_dict()
    spread = spread_copies_of(view.workload.object)
    if spread is not None:
        data["spread"] = {"copies": {c: dict(r) for c, r in spread.copies.items()}}
    data["pods"] = {
        label: [
            {
                "name": name_of(p) or None,
                "phase": (p.get("status") or {}).get("phase"),
                "ready": _ready(p),
                "node": _node(p) or None,
                "gpus": _pod_gpus(p),
                **({"migSlices": mig} if (mig := mig_slices(_pod_requests(p))) else {}),
            }
            for p in pods
        ]
        for label, pods in view.pods.items()
    }
    return data


def spread_text(copies: Mapping[str, Mapping[str, int]]) -> str:
    """``east: 3 deployment, west: 2 deployment`` (a duplicated copy: ``east: whole``)."""
    parts = []
    for cluster, replicas in copies.items():
        share = ", ".join(f"{n} {label}" for label, n in replicas.items()) or "whole"
        parts.append(f"{cluster}: {share}")
    return "; ".join(parts)
