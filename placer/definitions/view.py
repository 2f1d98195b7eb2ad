"""The ``describe`` view of a decomposed workload, and its text and JSON renderings.

Pure functions, separate from reading files, so that every front end shares them: ``placer
describe -f`` today, the live ``placer describe TYPE/NAME`` later (which adds pods, nodes,
cluster and placement to the same rows).

:func:`build_view` arranges a :class:`~placer.definitions.Decomposition` as the Workload Map CLI
does (spec section 11.2): the root's children are the top level (a pod-bearing root is shown as
the first component), a multi-instance component has one row per instance, grouping components
aggregate their children, and empty plumbing components (a Deployment's ReplicaSet) are left
out. Each row carries its desired replicas and total requests.

:func:`render_text` prints the tree, the ``Phase:`` line, the ``Resources:`` table (one row per
pod-bearing component or instance that has pods: ``COMPONENT REPLICAS GPU CPU MEMORY`` plus a
column for every other resource requested, and a ``TOTAL`` row) and the predicted ``Gangs:``.
Under a component row, one ``+ name`` row per thing its pods ask for beyond their own containers
(injected containers, GPU fractions, DRA claims, time-sliced GPUs) with its amounts (x replicas)
and, in the ``FROM`` column, where it comes from and how it is counted.

:func:`to_json` is the stable JSON form (documented in docs/definitions.md): base units, ``cpu`` in
cores, ``memory`` in bytes, other resources as counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.accelerators import gpu_text
from placer.definitions.decompose import ComponentInstance, ComponentNode, Decomposition
from placer.model import TopologyConstraint
from placer.quantity import CPU, GPU, MEMORY, Resources, add, format_quantity, scale, to_base_map

__all__ = [
    "DescribeView",
    "ViewRow",
    "build_view",
    "elastic_lines",
    "format_amount",
    "render_text",
    "to_json",
]


@dataclass(frozen=True)
class ViewRow:
    """One row of the tree: a component, or one instance of a multi-instance component."""

    #: what the tree shows (component name, or instance id under its component).
    name: str
    #: ``component`` or ``component/instance`` (Resources table, JSON, gang members).
    label: str
    pod_bearing: bool
    #: desired pods of this row and everything below it.
    replicas: int
    #: requests of this row's own pods (requests x replicas), excluding children.
    own: Resources = field(default_factory=dict)
    #: own + children.
    total: Resources = field(default_factory=dict)
    children: tuple[ViewRow, ...] = ()
    #: this row holds pods itself (a pod-bearing single-instance component or an instance).
    holds_pods: bool = False


@dataclass(frozen=True)
class DescribeView:
    """Everything ``describe`` shows about one workload."""

    decomposition: Decomposition
    rows: tuple[ViewRow, ...]
    #: requests of all pods.
    total: Resources
    pods: int


def build_view(decomposition: Decomposition) -> DescribeView:
    """Arrange ``decomposition`` as the describe tree (see the module docstring)."""
    by_component: dict[str, list[ComponentInstance]] = {}
    for instance in decomposition.components:
        by_component.setdefault(instance.name, []).append(instance)
    root = decomposition.structure[0]

    def children_of(name: str) -> list[ComponentNode]:
        return [n for n in decomposition.structure if n.owner == name]

    def build(node: ComponentNode) -> ViewRow | None:
        children = [row for child in children_of(node.name) if (row := build(child)) is not None]
        instances = by_component.get(node.name, [])
        if node.multi_instance:
            instance_rows = []
            for inst in node.instances:
                if node.pod_bearing:
                    own = _own(_find(instances, inst.id))
                    replicas = inst.replicas
                else:
                    own, replicas = {}, (inst.replicas if inst.scale is not None else 0)
                instance_rows.append(
                    _row(
                        inst.id,
                        f"{node.name}/{inst.id}",
                        node.pod_bearing,
                        replicas,
                        own,
                        tuple(children),
                        holds=node.pod_bearing,
                    )
                )
            return _row(
                node.name,
                node.name,
                node.pod_bearing,
                0,
                {},
                tuple(instance_rows),
                holds=False,
            )
        single = node.instances[0] if node.instances else None
        if node.pod_bearing and single is not None:
            own = _own(_find(instances, single.id))
            return _row(
                node.name, node.name, True, single.replicas, own, tuple(children), holds=True
            )
        declared = single.replicas if single is not None and single.scale is not None else 0
        row = _row(node.name, node.name, False, 0 if children else declared, {}, tuple(children))
        if not row.children and row.replicas == 0 and not any(row.total.values()):
            return None  # plumbing (e.g. a Deployment's ReplicaSet)
        return row

    rows: list[ViewRow] = []
    if root.pod_bearing:
        # a pod-bearing root (Deployment, Job, Pod...) is the first component
        root_instances = by_component.get(root.name, [])
        for inst in root.instances:
            label = f"{root.name}/{inst.id}" if inst.id else root.name
            own = _own(_find(root_instances, inst.id))
            rows.append(_row(inst.id or root.name, label, True, inst.replicas, own, (), holds=True))
    for child in children_of(root.name):
        row = build(child)
        if row is not None:
            rows.append(row)
    total = add(*(scale(c.pod.requests, c.replicas) for c in decomposition.components))
    pods = sum(c.replicas for c in decomposition.components)
    return DescribeView(decomposition, tuple(rows), total, pods)


def _find(instances: Sequence[ComponentInstance], instance: str) -> ComponentInstance | None:
    for candidate in instances:
        if candidate.instance == instance:
            return candidate
    return None


def _own(instance: ComponentInstance | None) -> dict[str, int]:
    if instance is None:
        return {}
    return scale(instance.pod.requests, instance.replicas)


def _row(
    name: str,
    label: str,
    pod_bearing: bool,
    own_replicas: int,
    own: Resources,
    children: tuple[ViewRow, ...],
    *,
    holds: bool = False,
) -> ViewRow:
    replicas = own_replicas + sum(c.replicas for c in children)
    total = add(own, *(c.total for c in children))
    return ViewRow(name, label, pod_bearing, replicas, own, total, children, holds)


# --------------------------------------------------------------------------------------------
# Text


def format_amount(resource: str, amount: int) -> str:
    """A canonical amount as people read it: ``8``/``500m`` cpu, ``64Gi``/``70M`` bytes, counts."""
    if resource == CPU:
        return format_quantity(CPU, amount)
    if _is_bytes(resource):
        if amount == 0:
            return "0"
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30)):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
        for suffix, factor in (("Mi", 2**20), ("Ki", 2**10)):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
        for suffix, factor in (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9)):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
        for suffix, factor in (("M", 10**6), ("k", 10**3)):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
        return str(amount)
    return str(amount)


def _is_bytes(resource: str) -> bool:
    return resource in (MEMORY, "ephemeral-storage", "storage") or resource.startswith("hugepages-")


def _align(rows: Sequence[Sequence[str]], padding: int = 3) -> list[str]:
    if not rows:
        return []
    columns = max(len(r) for r in rows)
    widths = [max((len(r[i]) for r in rows if i < len(r)), default=0) for i in range(columns)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i] + padding) for i, cell in enumerate(row)]
        lines.append("".join(cells).rstrip())
    return lines


def tree_lines(rows: Sequence[ViewRow]) -> list[list[str]]:
    """Tree rows as cells: ``[glyphs + name, "replicas: N", "gpu: N"]`` (gpu empty when 0;
    :func:`placer.accelerators.gpu_text`: shares of a device, MIG slices)."""
    out: list[list[str]] = []

    def walk(items: Sequence[ViewRow], indent: str) -> None:
        for index, row in enumerate(items):
            last = index == len(items) - 1
            glyph = "`-- " if last else "|-- "
            gpus = gpu_text(row.total)
            out.append(
                [
                    f"{indent}{glyph}{row.name}",
                    f"replicas: {row.replicas}",
                    f"gpu: {gpus}" if gpus != "0" else "",
                ]
            )
            walk(row.children, indent + ("    " if last else "|   "))

    walk(rows, "")
    return out


def resource_columns(view: DescribeView) -> list[str]:
    """GPU, CPU, MEMORY, then every other resource requested (sorted)."""
    requested = {name for c in view.decomposition.components for name in c.pod.requests}
    counted = {n for c in view.decomposition.components for s in c.sources for n in s.requests}
    others = sorted((requested | counted) - {GPU, CPU, MEMORY})
    return [GPU, CPU, MEMORY, *others]


def resource_rows(view: DescribeView) -> list[list[str]]:
    """The Resources table with its header, source rows and TOTAL row."""
    columns = resource_columns(view)
    sources = {
        c.label: c.sources for c in view.decomposition.components if c.replicas and c.sources
    }
    header = ["COMPONENT", "REPLICAS", "GPU", "CPU", "MEMORY", *columns[3:]]
    if sources:
        header.append("FROM")
    table = [header]

    def walk(rows: Sequence[ViewRow]) -> None:
        for row in rows:
            own_replicas = row.replicas - sum(c.replicas for c in row.children)
            if row.holds_pods and own_replicas > 0:
                table.append(
                    [row.label, str(own_replicas)]
                    + _amounts(row.own, columns)
                    + ([""] if sources else [])
                )
                for source in sources.get(row.label, ()):
                    amounts = scale(source.requests, own_replicas)
                    table.append(
                        [f"  + {source.name}", ""]
                        + [format_amount(n, amounts[n]) if n in amounts else "" for n in columns]
                        + [source.text]
                    )
            walk(row.children)

    walk(view.rows)
    table.append(
        ["TOTAL", str(view.pods)] + _amounts(view.total, columns) + ([""] if sources else [])
    )
    return table


def _amounts(requests: Resources, columns: Sequence[str]) -> list[str]:
    """The cells of ``columns``; GPU as :func:`placer.accelerators.gpu_text` (``0.5``,
    ``2×mig-1g.10gb``: a pod asking only MIG slices is not shown as 0 GPUs)."""
    return [
        gpu_text(requests) if name == GPU else format_amount(name, requests.get(name, 0))
        for name in columns
    ]


def render_text(view: DescribeView) -> str:
    """The whole text block for one workload (ends with a newline)."""
    d = view.decomposition
    ref = d.ref
    lines = [
        f"{ref.kind}/{ref.name}   namespace: {ref.namespace}   "
        f"definition: {d.definition.name} ({d.definition.origin})",
        "",
    ]
    lines.extend(_align(tree_lines(view.rows)) or ["(no components)"])
    lines += ["", f"Phase: {', '.join(d.phases)}", "", "Resources:"]
    lines.extend(_align(resource_rows(view)))
    if d.gangs:
        lines += ["", "Gangs:"]
        gang_rows = [["NAME", "MIN", "MEMBERS"]] + [
            [g.name, str(g.min_member), ", ".join(g.members)] for g in d.gangs
        ]
        lines.extend(_align(gang_rows))
    lines.extend(elastic_lines(d))
    lines.extend(topology_lines(d.workload.topology))
    return "\n".join(lines) + "\n"


def elastic_lines(decomposition: Decomposition) -> list[str]:
    """The ``Elastic:`` table (docs/elastic.md): each elastic component's replicas — the
    count placer chose, once dispatched — against its minimum and maximum, or nothing."""
    rows = [
        [c.label, str(c.replicas), str(c.elastic[0]), str(c.elastic[1])]
        for c in decomposition.components
        if c.elastic is not None
    ]
    if not rows:
        return []
    resizable = "yes" if decomposition.definition.resizable else "no"
    return [
        "",
        f"Elastic (resizable while running: {resizable}):",
        *_align([["COMPONENT", "REPLICAS", "MIN", "MAX"], *rows]),
    ]


def topology_lines(constraints: Sequence[TopologyConstraint]) -> list[str]:
    """The ``Topology:`` table (docs/topology.md), or nothing."""
    if not constraints:
        return []
    rows = [["GROUP", "REQUIRED", "PREFERRED", "MEMBERS", "FROM"]] + [
        [c.name, c.required or "-", c.preferred or "-", ", ".join(c.members), c.source]
        for c in constraints
    ]
    return ["", "Topology:", *_align(rows)]


# --------------------------------------------------------------------------------------------
# JSON


def _base(resources: Mapping[str, int]) -> dict[str, int | float]:
    return to_base_map(resources)


def to_json(decomposition: Decomposition) -> dict[str, Any]:
    """The stable JSON object of one workload (see docs/definitions.md)."""
    d = decomposition
    components = []
    for c in d.components:
        item: dict[str, Any] = {
            "name": c.name,
            "instance": c.instance,
            "replicas": c.replicas,
            "pod": {"requests": _base(c.pod.requests)},
            "total": _base(scale(c.pod.requests, c.replicas)),
        }
        if c.elastic is not None:
            item["elastic"] = {"min": c.elastic[0], "max": c.elastic[1]}
        if c.sources:
            item["sources"] = [
                {
                    "kind": s.kind,
                    "name": s.name,
                    "from": s.origin,
                    "note": s.note,
                    "requests": _base(s.requests),
                }
                for s in c.sources
            ]
        components.append(item)
    total = add(*(scale(c.pod.requests, c.replicas) for c in d.components))
    return {
        "workload": {
            "apiVersion": d.ref.api_version,
            "kind": d.ref.kind,
            "namespace": d.ref.namespace,
            "name": d.ref.name,
        },
        "definition": {"name": d.definition.name, "origin": d.definition.origin},
        "phase": list(d.phases),
        "components": components,
        "gangs": [
            {"name": g.name, "members": list(g.members), "minMember": g.min_member} for g in d.gangs
        ],
        "total": {"pods": sum(c.replicas for c in d.components), **_base(total)},
        "warnings": list(d.warnings),
        **(
            {
                "topology": [
                    {
                        "group": c.name,
                        "members": list(c.members),
                        "required": c.required,
                        "preferred": c.preferred,
                        "from": c.source,
                    }
                    for c in d.workload.topology
                ]
            }
            if d.workload.topology
            else {}
        ),
    }
