"""``placer delete``: remove a workload placer placed, wherever it is on the fleet.

    placer delete (-f FILE | TYPE/NAME | TYPE NAME) [-n NS] [--wait[=TIMEOUT]] [--force]
                  [fleet options] [--catalog DIR]... [-o text|json|yaml]

Finds every copy of the workloads on the reachable member clusters (``-f``: the objects of
the files, as ``placer submit`` read them; TYPE/NAME: a kind, plural, short name or
definition name, as ``placer get``), under the workloads' claims, and deletes the copies
placer placed (its placement record on them); someone else's object of that name, or a copy
the placement controller placed from a hub, only with ``--force``. Then its in-flight ledger
entry goes, and the namespace it was in when placer created it and nothing else is left there.
``--wait[=TIMEOUT]`` (default 300 s) deletes in the foreground and waits until each copy is
gone with its pods. :mod:`placer.dispatch.removal` has the rules.

Exit code: 0 when every copy found was deleted (and, with ``--wait``, is gone); 1 when one was
refused (no record, or the controller's, without ``--force``), failed, or is being placed by
another placer process; otherwise 3 when a workload was found on no reachable cluster (or no
cluster answered).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from placer.cli._fleet import (
    add_fleet_options,
    fleet_config_from_args,
    require_reachable,
    unusable_warnings,
)
from placer.cli._output import add_output_option, print_data
from placer.cli.definitions import add_catalog_option, load_catalog
from placer.cli.get import add_namespace_options
from placer.cli.submit import DEFAULT_WAIT, parse_duration
from placer.errors import EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK, InputError, UsageError

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "delete",
        help="delete workloads placer placed, wherever they are on the fleet",
        description=(
            "Find the workload's copy across the member clusters and delete it (only copies "
            "placer placed, unless --force), with its in-flight ledger entry and the namespace "
            "placer created for it when nothing else is left there."
        ),
    )
    parser.add_argument(
        "target",
        nargs="*",
        metavar="TYPE/NAME",
        help="a workload on the fleet: TYPE/NAME or TYPE NAME",
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        metavar="FILE",
        help="the workloads of these manifests: a YAML/JSON file, a directory, or - (stdin); "
        "repeatable",
    )
    add_namespace_options(parser, all_namespaces=False)
    parser.add_argument(
        "--wait",
        nargs="?",
        const=str(DEFAULT_WAIT),
        default=None,
        metavar="TIMEOUT",
        help=f"delete in the foreground and wait until each copy is gone with its pods "
        f"(default timeout {DEFAULT_WAIT:g}s; e.g. --wait=90s)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="also delete objects placer did not place, and copies the placement controller "
        "placed from a hub",
    )
    add_fleet_options(parser)
    add_catalog_option(parser)
    add_output_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from placer.dispatch.removal import DELETED, NOT_FOUND, delete_workloads
    from placer.dispatch.submit import CLAIM_WAIT
    from placer.fleet import member_clients

    if not args.filename and not args.target:
        raise UsageError("give the workloads: -f FILE, or TYPE/NAME")
    if args.filename and args.target:
        raise UsageError("give either -f FILE or TYPE/NAME, not both")
    wait = parse_duration(args.wait) if args.wait is not None else None
    catalog = load_catalog(args)
    config = fleet_config_from_args(args)
    refs = _file_refs(args) if args.filename else []
    with member_clients(config) as clients:
        if not refs:
            refs = _named_refs(args, catalog, clients)
        report = delete_workloads(clients, refs, force=args.force, wait=wait, claim_wait=CLAIM_WAIT)
    warnings = unusable_warnings(config, clients)
    warnings += [
        f"cluster {name}: not searched ({reason}); a copy there cannot be ruled out"
        for name, reason in sorted(report.unknown.items())
    ]
    warnings += list(report.warnings)
    reached = [name for name in clients if name not in report.unknown]
    if not reached:
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        require_reachable(config.names, reached, "nothing could be deleted")
    if args.output != "text":
        items = [d.to_dict() for d in report.deletions]
        print_data({"items": items, "warnings": warnings}, args.output)
    else:
        _render(report.deletions, wait is not None)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    states = {d.state for d in report.deletions}
    if states - {DELETED, NOT_FOUND}:
        return EXIT_ERROR
    return EXIT_NOT_FOUND if NOT_FOUND in states else EXIT_OK


def _render(deletions: Any, waited: bool) -> None:
    for deletion in deletions:
        ref = deletion.workload
        if deletion.state == "deleted":
            what = "deleted (gone)" if waited else "deleted"
            print(f"{ref} on {deletion.cluster}: {what}")
        elif deletion.state == "not-found":
            print(f"{ref}: not found on any reachable cluster", file=sys.stderr)
        else:
            where = f" on {deletion.cluster}" if deletion.cluster else ""
            print(f"error: {ref}{where}: {deletion.state}: {deletion.error}", file=sys.stderr)
        for note in deletion.notes:
            print(f"  {note}")


def _file_refs(args: argparse.Namespace) -> list[Any]:
    """The workloads of the ``-f`` files (DRA claim objects are not workloads)."""
    from placer.accelerators import is_claim_object
    from placer.cli.describe import read_manifests
    from placer.definitions import workload_ref
    from placer.definitions.decompose import not_an_object

    refs = []
    for filename in args.filename:
        for document in read_manifests(filename):
            if is_claim_object(document.data):
                continue
            if not isinstance(document.data, Mapping):
                raise not_an_object(document.data, document.source)
            data = dict(document.data)
            metadata = dict(data.get("metadata") or {})
            if args.namespace and not metadata.get("namespace"):
                metadata["namespace"] = args.namespace
                data["metadata"] = metadata
            refs.append(workload_ref(data, source=document.source))
    if not refs:
        raise InputError(f"no objects found in {', '.join(args.filename)}")
    return refs


def _named_refs(args: argparse.Namespace, catalog: Any, clients: Any) -> list[Any]:
    """The workload TYPE/NAME names, under every version of its kind the catalog knows."""
    from placer.cli.describe import split_target
    from placer.inventory import resolve_type_on
    from placer.model import WorkloadRef

    type_token, name = split_target(args.target)
    namespace = args.namespace or "default"
    definitions = resolve_type_on(type_token, catalog, clients)
    return [
        WorkloadRef(d.target.api_version, d.target.kind, namespace, name)
        for d in definitions
        if d.target is not None
    ]
