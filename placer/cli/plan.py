"""``placer plan``: decide where workloads would go, and why not elsewhere — nothing dispatched.

    placer plan -f FILE... --snapshot FLEET.yaml [--policy FILE]... [--solver NAME]
                [--mode batch|online] [--time-limit S] [--seed N] [-o text|json]

Reads the workload manifests (several files and YAML documents; ``-`` = stdin), breaks each into
components with its Workload Map definition (:mod:`placer.definitions`), reads the fleet's
node-level capacity from a snapshot (``placer snapshot`` writes one; ``clusters/`` has
examples) and the PlacementPolicies, and prints the solver's decision: per workload the cluster
and the node of every pod, or per cluster the reason it was refused, and the bounds.
Exit code 0 whenever a decision was made (even if some workloads stay unplaced).
"""

from __future__ import annotations

import argparse
import sys

from placer.cli._decision import add_decision_options, add_manifest_option, decision_policies
from placer.cli._output import add_output_option, print_json, print_table
from placer.cli.definitions import add_catalog_option, load_catalog
from placer.cli.describe import read_manifests
from placer.definitions import Catalog, decompose
from placer.errors import PlacerError, UsageError
from placer.model import Workload
from placer.snapshot import load_snapshot
from placer.solver import solve
from placer.solver.report import decision_to_dict, render_text

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="decide where workloads would be placed (nothing is dispatched)",
        description=(
            "Decompose the workloads, read the fleet's node-level free capacity and the "
            "policies, and show the placement decision with the reason for every refusal."
        ),
    )
    add_manifest_option(parser)
    parser.add_argument(
        "--snapshot",
        metavar="FILE",
        help="fleet capacity snapshot (FleetSnapshot YAML, e.g. clusters/demo.yaml)",
    )
    add_decision_options(parser, with_mode=True)
    add_catalog_option(parser)
    add_output_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    policies = decision_policies(args)
    if not args.snapshot:
        raise UsageError(
            "give the fleet's capacity with --snapshot FILE",
            hint="write one with `placer snapshot -o FILE`, or try clusters/demo.yaml",
        )
    fleet = load_snapshot(args.snapshot)
    workloads = read_workloads(args.filename, load_catalog(args))
    decision = solve(
        workloads,
        fleet,
        policies=policies,
        solver=args.solver,
        mode=args.mode,
        time_limit=args.time_limit,
        seed=args.seed,
    )
    if args.output == "json":
        print_json(decision_to_dict(decision))
        return 0
    for block in render_text(decision):
        if isinstance(block, str):
            sys.stdout.write(block + "\n")
        else:
            print_table(block)
    return 0


def read_workloads(filenames: list[str], catalog: Catalog) -> list[Workload]:
    """Decompose every object of every file; all problems are reported together."""
    workloads: list[Workload] = []
    problems: list[PlacerError] = []
    for filename in filenames:
        for document in read_manifests(filename):
            try:
                result = decompose(document.data, catalog, source=document.source)
            except PlacerError as exc:
                problems.append(exc)
                continue
            workloads.append(result.workload)
    if problems:
        for problem in problems[1:]:
            print(f"error: {problem}", file=sys.stderr)
        raise problems[0]
    if not workloads:
        raise UsageError(f"no objects found in {', '.join(filenames)}")
    return workloads
