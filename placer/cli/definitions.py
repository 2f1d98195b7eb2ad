"""``placer definitions [NAME]``: the workload definitions placer knows.

Lists the built-in catalog plus every ``--catalog DIR`` (later directories replace earlier
definitions of the same kind), with the kind each definition covers and where it comes from.
With NAME, shows that definition: its components, how their pods and replicas are found, the
statuses it maps and its gang groups; ``-o json`` then prints the definition document itself
(re-appliable).

Also home of the ``--catalog`` option shared by ``describe`` and the other commands that read
workloads.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placer.cli._output import add_output_option, print_data, print_table
from placer.definitions import Catalog, Definition
from placer.definitions.compiled import cache_dir
from placer.definitions.model import Component
from placer.definitions.suspend import can_suspend
from placer.errors import DefinitionError, UnknownTypeError
from placer.model import Fleet

__all__ = [
    "accelerators_for",
    "add_catalog_option",
    "catalog_cache",
    "load_catalog",
    "register",
    "run",
]

COMPONENT_LIMIT = 3


def add_catalog_option(parser: argparse.ArgumentParser) -> None:
    """``--catalog DIR`` (repeatable)."""
    parser.add_argument(
        "--catalog",
        action="append",
        default=[],
        metavar="DIR",
        help="also read Workload Map definitions from DIR (YAML/JSON files; repeatable; a "
        "definition replaces the built-in one for the same kind)",
    )


def catalog_cache() -> Path | None:
    """The directory of the compiled catalog for this process's environment
    (:func:`placer.definitions.compiled.cache_dir`)."""
    return cache_dir(os.environ)


def load_catalog(args: argparse.Namespace, fleet: Fleet | None = None) -> Catalog:
    """The built-in catalog plus the ``--catalog`` directories of ``args``, counting
    accelerators with the table of ``fleet`` (a snapshot) or of the ``--fleet`` file."""
    catalog = Catalog.load(list(getattr(args, "catalog", []) or []), cache=catalog_cache())
    table = accelerators_for(args, fleet)
    if getattr(args, "fleet", None):
        from placer.fleet import load_fleet_file

        catalog = catalog.with_topologies(load_fleet_file(args.fleet).topologies)
    elif fleet is not None and fleet.topologies:  # the topologies a snapshot was gathered with
        from placer.topology import topologies_from_list

        catalog = catalog.with_topologies(topologies_from_list(fleet.topologies))
    return catalog if table is None else catalog.with_accelerators(table)


def accelerators_for(args: argparse.Namespace, fleet: Fleet | None = None) -> Any:
    """The accelerator table of a snapshot's ``accelerators`` or of the ``--fleet`` file's
    section; ``None`` for placer's defaults."""
    from placer.accelerators import accelerators_from_dict
    from placer.fleet import load_fleet_file

    if fleet is not None and fleet.accelerators:
        return accelerators_from_dict(fleet.accelerators, source="snapshot", field="accelerators")
    path = getattr(args, "fleet", None)
    if path:
        config = load_fleet_file(path)
        return config.accelerators if config.accelerators_data else None
    return None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "definitions",
        help="list the workload definitions (Workload Map / Karta) placer knows",
        description="List the workload definitions placer knows, or show one by NAME.",
    )
    parser.add_argument("name", nargs="?", metavar="NAME", help="show this definition")
    add_catalog_option(parser)
    add_output_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    catalog = load_catalog(args)
    if args.name:
        try:
            definition = catalog.get(args.name)
        except DefinitionError as exc:  # no definition of that name: exit 4
            raise UnknownTypeError(exc.message, hint=exc.hint) from None
        if args.output != "text":
            print_data(dict(definition.document), args.output)
        else:
            print(describe_definition(definition), end="")
        return 0
    if args.output != "text":
        print_data([summary(d) for d in catalog.definitions], args.output)
        return 0
    rows: list[Sequence[object]] = [["NAME", "KIND", "ORIGIN", "COMPONENTS"]]
    for definition in catalog.definitions:
        rows.append(
            [
                definition.name,
                str(definition.target),
                definition.origin,
                components_cell(definition),
            ]
        )
    print_table(rows, padding=2)
    return 0


def components_cell(definition: Definition, limit: int = COMPONENT_LIMIT) -> str:
    """Root, then up to ``limit`` children, then ``+K more``."""
    names = [definition.root.name] + [c.name for c in definition.children[:limit]]
    more = len(definition.children) - limit
    text = ", ".join(names)
    return f"{text}, +{more} more" if more > 0 else text


def summary(definition: Definition) -> dict[str, Any]:
    """JSON summary of one definition (``placer definitions -o json``)."""
    target = definition.target
    return {
        "name": definition.name,
        "group": target.group if target else "",
        "version": target.version if target else "",
        "kind": target.kind if target else "",
        "origin": definition.origin,
        "source": definition.source,
        "components": [c.name for c in definition.components],
    }


def _shape(component: Component) -> str:
    spec = component.spec
    if spec is None or not spec.has_pod_definition:
        return "no pods"
    if spec.pod_template_spec_path is not None:
        return f"pods from podTemplateSpecPath {spec.pod_template_spec_path.strip()}"
    if spec.pod_spec_path is not None:
        return "pods from podSpecPath"
    return "pods from fragments"


def describe_definition(definition: Definition) -> str:
    """A readable account of one definition (``placer definitions NAME``)."""
    lines = [
        f"Name:        {definition.name}",
        f"Kind:        {definition.target}",
        f"Origin:      {definition.origin}"
        + (f" ({definition.source})" if definition.source else ""),
    ]
    status = definition.root.status
    statuses = ", ".join(status.mappings) if status is not None and status.mappings else "-"
    lines.append(f"Statuses:    {statuses}")
    lines.append(f"Suspend:     {'yes' if can_suspend(definition) else 'no'}")
    lines.append("Components:")
    rows: list[list[str]] = []

    def walk(component: Component, indent: str, glyph: str) -> None:
        kind = str(component.kind) if component.kind is not None else "(no kind)"
        details = [_shape(component)]
        if component.instance_id_path:
            details.append(f"instances {component.instance_id_path.strip()}")
        if component.scale is not None and component.scale.replicas_path:
            details.append(f"replicas {' '.join(component.scale.replicas_path.split())}")
        if component.spec is not None and component.spec.injected:
            names = ", ".join(dict.fromkeys(i.name for i in component.spec.injected))
            details.append(f"injects {names}")
        rows.append([f"  {indent}{glyph}{component.name}", kind, "; ".join(details)])
        children = definition.children_of(component.name)
        child_indent = indent + ("" if not glyph else ("    " if glyph == "`-- " else "|   "))
        for i, child in enumerate(children):
            walk(child, child_indent, "`-- " if i == len(children) - 1 else "|-- ")

    walk(definition.root, "", "")
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        lines.append(f"{row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2]}".rstrip())
    gang = definition.gang
    if gang is not None and (gang.pod_groups or gang.pod_group is not None):
        lines.append("Gangs:")
        for group in gang.pod_groups:
            for member in group.members:
                keys = ", ".join(member.group_by_key_paths) or "(no keys)"
                lines.append(f"  {group.name}: {member.component_name} by {keys}")
        if gang.pod_group is not None:
            subs = ", ".join(s.component_name for s in gang.pod_group.sub_groups) or "all"
            lines.append(f"  {gang.pod_group.name}: {subs}")
    return "\n".join(lines) + "\n"
