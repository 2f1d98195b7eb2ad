"""``placer describe``: what a workload is made of — from a file, or live on the fleet.

File mode, ``placer describe -f FILE``: for every object in FILE (``-`` = stdin; several YAML
documents allowed): the component tree with replicas and GPUs, the matched status
(``Phase:``), the Resources table (with where demand beyond the containers comes from) and the
predicted gangs, or (``-o json``) the stable JSON list documented in docs/definitions.md. DRA
ResourceClaims and ResourceClaimTemplates in FILE are not workloads: the pods that name them
are counted with them. Demand that cannot be counted is a ``warning:`` on stderr. All objects
are read first; if any cannot be described, every problem is printed and nothing else (exit 4
when the first problem is a kind no definition covers, 2 for unparsable YAML, 1 otherwise).
Rendering lives in
:mod:`placer.definitions.view`.

Live mode, ``placer describe TYPE/NAME`` (or ``TYPE NAME``) ``[-n NS] [fleet options]``: the
workload found on the member clusters (:mod:`placer.inventory`): the same tree with the pods
actually there (phase, node, GPUs, ``ready/desired``), the cluster it runs on, its phase and
placer's placement record. Exit 3 when no reachable cluster has it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from placer.cli._fleet import (
    add_fleet_options,
    fleet_config_from_args,
    require_reachable,
    unusable_warnings,
)
from placer.cli._output import add_output_option, print_data
from placer.cli.definitions import add_catalog_option, load_catalog
from placer.definitions import Catalog, Decomposition, Document, decompose
from placer.definitions.documents import is_dependency, partition_claims, read_input
from placer.errors import InputError, PlacerError, UsageError

__all__ = ["decompose_all", "read_manifests", "register", "run", "run_live", "split_target"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "describe",
        help="show a workload's components, replicas, resources, status and gangs",
        description="Decompose the workloads in FILE with their definitions and show them.",
    )
    parser.add_argument(
        "target",
        nargs="*",
        metavar="TYPE/NAME",
        help="a workload on the fleet: TYPE/NAME or TYPE NAME (live mode)",
    )
    parser.add_argument(
        "-f",
        "--filename",
        metavar="FILE",
        help="workload manifests: a YAML/JSON file, a directory, or - (stdin)",
    )
    parser.add_argument("-n", "--namespace", metavar="NS", help="namespace (default: default)")
    add_fleet_options(parser)
    add_catalog_option(parser)
    add_output_option(parser)
    parser.set_defaults(func=run, describe_parser=parser)


def read_manifests(filename: str) -> list[Document]:
    """The documents of ``filename``: a file, every YAML/JSON file under a directory
    (recursively, in sorted order, as ``kubectl apply -f DIR -R``), or ``-`` for stdin."""
    return read_input(filename)


def decompose_all(
    documents: Sequence[Document], catalog: Catalog
) -> tuple[list[tuple[Document, Decomposition]], list[PlacerError]]:
    """Every workload of ``documents`` with its decomposition, the DRA claims among them counted
    with the pods that name them; and the problems of the others, in order. Warnings (demand
    that could not be counted) go to stderr as ``warning:`` lines."""
    claims, workloads = partition_claims(documents)
    results: list[tuple[Document, Decomposition]] = []
    problems: list[PlacerError] = []
    for document in workloads:
        try:
            result = decompose(document.data, catalog, source=document.source, claims=claims)
        except PlacerError as exc:
            problems.append(exc)
            continue
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        results.append((document, result))
    return results, problems


def run(args: argparse.Namespace) -> int:
    # here: ``placer submit`` uses this module's readers, not the view
    from placer.definitions.view import build_view, render_text, to_json

    if not args.filename and not args.target:
        parser: argparse.ArgumentParser = args.describe_parser
        parser.error("one of the arguments -f/--filename or TYPE/NAME is required")
    if args.filename and args.target:
        raise UsageError("give either -f FILE or TYPE/NAME, not both")
    if not args.filename:
        return run_live(args)
    catalog = load_catalog(args)
    documents = read_manifests(args.filename)
    if not documents:
        raise InputError("no objects found", source=args.filename)
    # the ConfigMaps, Secrets... that travel with workloads (placer submit) are not workloads
    documents = [d for d in documents if not is_dependency(d.data)]
    found, problems = decompose_all(documents, catalog)
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return problems[0].exit_code
    if not found:
        raise InputError(
            "no workloads found (only DRA claims, ConfigMaps, Secrets, Services...)",
            source=args.filename,
        )
    results = [decomposition for _, decomposition in found]
    if args.output != "text":
        print_data([to_json(d) for d in results], args.output)
        return 0
    blocks = [render_text(build_view(d)) for d in results]
    sys.stdout.write("\n".join(blocks))
    return 0


def split_target(target: Sequence[str]) -> tuple[str, str]:
    """TYPE and NAME of a ``TYPE/NAME`` (or ``TYPE NAME``) argument.

    Raises:
        UsageError: anything else.
    """
    if len(target) == 1 and "/" in target[0]:
        type_token, _, name = target[0].partition("/")
    elif len(target) == 2:
        type_token, name = target
    else:
        raise UsageError("give TYPE/NAME (or TYPE NAME) of a workload, or -f FILE")
    if not type_token or not name:
        raise UsageError(f"{'/'.join(target)!r}: expected TYPE/NAME")
    return type_token, name


def run_live(args: argparse.Namespace) -> int:
    """``describe TYPE/NAME``: the workload on the member clusters, with its pods."""
    from placer.fleet import member_clients
    from placer.inventory import (
        WorkloadNotFoundError,
        find_workload,
        live_json,
        live_view,
        render_live,
        resolve_type_on,
    )

    type_token, name = split_target(args.target)
    namespace = args.namespace or "default"
    catalog = load_catalog(args)
    config = fleet_config_from_args(args)
    with member_clients(config) as clients:
        definitions = resolve_type_on(type_token, catalog, clients)
        found = find_workload(clients, catalog, definitions, name, namespace)
        views = [live_view(w, clients[w.cluster]) for w in found.workloads]
    for warning in unusable_warnings(config, clients) + list(found.warnings):
        print(f"warning: {warning}", file=sys.stderr)
    if not views:
        reached = [n for n in clients if n not in found.unreachable]
        require_reachable(config.names, reached, f"{type_token}/{name} could not be looked up")
        raise WorkloadNotFoundError(
            f"{type_token}/{name} not found in namespace {namespace} on any reachable cluster "
            f"({', '.join(config.names) or 'no clusters'})",
            hint="check the name and namespace (-n), or list workloads with `placer get -A`",
        )
    from placer.dispatch.spread import spread_copies_of

    spread = all(spread_copies_of(v.workload.object) is not None for v in views)
    if len(views) > 1 and not spread:  # a spread workload's copies are meant to be several
        where = ", ".join(v.workload.cluster for v in views)
        print(f"warning: {type_token}/{name} exists on several clusters: {where}", file=sys.stderr)
    if args.output != "text":
        data = [live_json(v) for v in views]
        print_data(data[0] if len(data) == 1 else data, args.output)
        return 0
    sys.stdout.write("\n".join(render_live(v) for v in views))
    return 0
