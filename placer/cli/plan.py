"""``placer plan``: decide where workloads would go, and why not elsewhere — nothing dispatched.

    placer plan -f FILE... (--snapshot FLEET.yaml | fleet options) [--policy FILE]...
                [--queues FILE] [--solver NAME] [--mode batch|online] [--time-limit S] [--seed N]
                [-o text|json|yaml]

Reads the workload manifests (files, directories, YAML documents; ``-`` = stdin), breaks each
into components with its Workload Map definition (:mod:`placer.definitions`), reads the fleet's
node-level capacity from a snapshot (``placer snapshot`` writes one; ``clusters/`` has
examples) or gathers it live from the members (charged with their in-flight ledgers, read
only — exactly what ``placer submit`` would decide on), the PlacementPolicies and the queues
(``--queues``: :mod:`placer.solver.fairshare`), and prints
the solver's decision: per workload the cluster and the node of every pod, or per cluster the
reason it was refused, and the bounds. Exit code 0 when every workload would be placed, 1 when
some would not, 3 when no cluster of the fleet is reachable (see ``placer --help``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from placer.cli._decision import (
    add_decision_options,
    add_manifest_option,
    decision_policies,
    decision_queues,
    warn_unknown_clusters,
)
from placer.cli._fleet import (
    add_fleet_options,
    fleet_config_from_args,
    has_fleet_options,
    report_unreachable,
    require_reachable,
)
from placer.cli._output import add_output_option, print_data, print_table
from placer.cli.definitions import add_catalog_option, load_catalog
from placer.cli.describe import decompose_all, read_manifests
from placer.definitions import Catalog, Decomposition, Document
from placer.definitions.documents import is_dependency
from placer.errors import EXIT_ERROR, EXIT_OK, UsageError
from placer.fleet import FleetConfig
from placer.model import Decision, Fleet, Placement, Workload, WorkloadRef
from placer.policy import PlacementPolicy, topology_of
from placer.snapshot import load_snapshot

if TYPE_CHECKING:
    from placer.solver.fairshare import FairDecision
    from placer.solver.topology import DomainsUsed

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
        help="fleet capacity snapshot (FleetSnapshot YAML, e.g. clusters/demo.yaml); or "
        "fleet options to gather it live",
    )
    add_fleet_options(parser)
    add_decision_options(parser, with_mode=True)
    add_catalog_option(parser)
    add_output_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from placer.dispatch.gangs import gang_warnings
    from placer.solver import solve  # OR-Tools: only for the commands that decide
    from placer.solver.elastic import chosen_counts
    from placer.solver.refusals import refusals
    from placer.solver.report import decision_to_dict, render_text

    policies = decision_policies(args)
    schedulers: dict[str, Any] = {}
    if args.snapshot and has_fleet_options(args):
        raise UsageError("give either --snapshot or fleet options, not both")
    if args.snapshot:
        fleet = load_snapshot(args.snapshot)
    elif has_fleet_options(args):
        config = fleet_config_from_args(args)
        schedulers = config.schedulers
        fleet = live_fleet(config)
    else:
        raise UsageError(
            "give the fleet's capacity with --snapshot FILE, or fleet options "
            "(--kubeconfig, --context, --fleet) to gather it live",
            hint="write a snapshot with `placer snapshot -o FILE`, or try clusters/demo.yaml",
        )
    objects = read_objects(args.filename, load_catalog(args, fleet))
    workloads = [decomposition.workload for _, decomposition in objects]
    warn_unknown_clusters(policies, fleet.names)
    require_reachable(
        fleet.names, [c.name for c in fleet.clusters if c.reachable], "nothing can be placed"
    )
    from placer.solver.spread import solve_spread

    spreading = any(p.spread is not None and p.spread.scheduling for p in policies)
    decide: Callable[..., Decision] = solve_spread if spreading else solve
    queues = decision_queues(args)
    if queues is not None and spreading:
        raise UsageError(
            "a policy spreads workloads over clusters (replicaScheduling); --queues cannot "
            "be combined with it yet"
        )
    queue_data: list[dict[str, Any]] | None = None
    if queues is not None:
        from placer.solver.fairshare import solve_fair

        fair = solve_fair(
            workloads,
            fleet,
            queues,
            policies=policies,
            solver=args.solver,
            mode=args.mode,
            time_limit=args.time_limit,
            seed=args.seed,
        )
        decision = fair.decision
        queue_data = _queue_data(fair, workloads)
    else:
        decision = decide(
            workloads,
            fleet,
            policies=policies,
            solver=args.solver,
            mode=args.mode,
            time_limit=args.time_limit,
            seed=args.seed,
        )
    chosen = {p.workload: p.cluster for p in decision.placements}
    refused = refusals(workloads, fleet, chosen, policies=policies)
    spread = spread_refs(decision)
    for ref in spread:
        refused.pop(ref, None)  # a copy per cluster: no cluster refused it alone
    domains = placement_domains(decision, [topology_of(w, policies) for w in workloads], fleet)
    by_ref = {w.ref: w for w in workloads}
    for warning in gang_warnings(decision.placements, by_ref, fleet, schedulers, policies):
        print(f"warning: {warning}", file=sys.stderr)
    if args.output != "text":
        data = decision_to_dict(decision)
        for item, placement in zip(data["placements"], decision.placements, strict=True):
            item["refused"] = refused.get(placement.workload, {})
            if placement.workload in domains:
                item["topology"] = [d.as_dict() for d in domains[placement.workload]]
            if placement.workload in spread:
                item["copy"] = spread_copy(placement, objects, fleet, policies)
            counts = chosen_counts(by_ref[placement.workload], placement)
            if counts:
                item["elastic"] = [c.as_dict() for c in counts]
        if queue_data is not None:
            data["queues"] = queue_data
        print_data(data, args.output)
        return _exit_code(decision)
    for block in render_text(decision):
        if isinstance(block, str):
            sys.stdout.write(block + "\n")
        else:
            print_table(block)
    for placement in decision.placements:
        for count in chosen_counts(by_ref[placement.workload], placement):
            sys.stdout.write(
                f"{placement.workload} -> {placement.cluster}: {count.label} at "
                f"{count.chosen} of max {count.max} replicas (elastic, min {count.min})\n"
            )
        for shown in domains.get(placement.workload, ()):
            kind = "required" if shown.required else "preferred"
            values = ", ".join(f"{shown.level}={v}" for v in shown.domains)
            sys.stdout.write(
                f"{placement.workload} -> {placement.cluster}: pod group "
                f"{shown.group!r} in {values} ({kind})\n"
            )
        reasons = refused.get(placement.workload, {})
        if reasons:
            width = max(len(c) for c in reasons)
            lines = [f"  {c.ljust(width)}  refused: {text}" for c, text in reasons.items()]
            sys.stdout.write(f"\n{placement.workload} -> {placement.cluster}\n")
            sys.stdout.write("\n".join(lines) + "\n")
    return _exit_code(decision)


def _queue_data(fair: FairDecision, workloads: list[Workload]) -> list[dict[str, Any]]:
    """The queues after the decision (:func:`placer.queues.report.queue_rows`), with the
    demand of the workloads left pending and their order in each queue."""
    from placer.queues.report import pending_demand, pending_order, queue_rows

    assert fair.usage is not None
    placed = {p.workload for p in fair.decision.placements}
    waiting = [
        (w, m) for w, m in zip(workloads, fair.memberships, strict=True) if w.ref not in placed
    ]
    pending = pending_demand(fair.usage.queues, waiting)
    return queue_rows(fair.usage.queues, fair.usage, pending, order=pending_order(waiting))


def placement_domains(
    decision: Decision, workloads: list[Workload], fleet: Fleet
) -> dict[WorkloadRef, list[DomainsUsed]]:
    """Per placed workload with topology constraints, the domains its pod groups landed in."""
    from placer.solver.topology import domains_used

    by_ref = {w.ref: w for w in workloads if w.topology}
    shown: dict[WorkloadRef, list[DomainsUsed]] = {}
    for placement in decision.placements:
        workload = by_ref.get(placement.workload)
        if workload is None:
            continue
        nodes: dict[str, list[str]] = {}
        for pod in placement.pods:
            label = f"{pod.component}/{pod.instance}" if pod.instance else pod.component
            nodes.setdefault(label, []).append(pod.node)
        shown[placement.workload] = domains_used(workload, nodes, fleet, placement.cluster)
    return shown


def spread_refs(decision: Decision) -> set[WorkloadRef]:
    """Workloads placed in more than one cluster (spread by their policy)."""
    seen: dict[WorkloadRef, int] = {}
    for placement in decision.placements:
        seen[placement.workload] = seen.get(placement.workload, 0) + 1
    return {ref for ref, count in seen.items() if count > 1}


def spread_copy(
    placement: Placement,
    objects: list[tuple[Document, Decomposition]],
    fleet: Fleet,
    policies: list[PlacementPolicy],
) -> dict[str, object]:
    """What the cluster of ``placement`` gets of a spread workload: its replicas and the
    object with them and the policy's overrides for that cluster."""
    from placer.dispatch import Manifest
    from placer.dispatch.spread import copy_manifest, copy_replicas

    document, decomposition = next(
        (d, dec) for d, dec in objects if dec.workload.ref == placement.workload
    )
    manifest = Manifest(document.data, decomposition, document.source)
    replicas = copy_replicas(placement, decomposition.workload)
    try:
        copied = copy_manifest(manifest, placement, fleet, policies)
    except ValueError as err:
        return {"replicas": replicas, "error": str(err)}
    return {"replicas": replicas, "manifest": dict(copied.body)}


def _exit_code(decision: Decision) -> int:
    """0 when every workload is placed, 1 otherwise."""
    return EXIT_OK if not decision.unplaced else EXIT_ERROR


def live_fleet(config: FleetConfig) -> Fleet:
    """The members' free capacity as a decision there would see it: gathered, and charged
    with the placements still in flight (ledgers read, nothing deleted)."""
    from placer.dispatch.submit import gather_charged
    from placer.fleet import member_clients

    with member_clients(config) as clients:
        fleet, _, warnings, _ = gather_charged(config, clients, delete=False)
    report_unreachable(fleet)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return fleet


def read_workloads(filenames: list[str], catalog: Catalog) -> list[Workload]:
    """Decompose every object of every file; all problems are reported together."""
    return [decomposition.workload for _, decomposition in read_objects(filenames, catalog)]


def read_objects(filenames: list[str], catalog: Catalog) -> list[tuple[Document, Decomposition]]:
    """Every object of every file with its decomposition; all problems reported together."""
    documents = [document for filename in filenames for document in read_manifests(filename)]
    # the ConfigMaps, Secrets... that travel with workloads (placer submit) are not workloads
    documents = [d for d in documents if not is_dependency(d.data)]
    found, problems = decompose_all(documents, catalog)
    objects: list[tuple[Document, Decomposition]] = []
    seen: dict[object, str] = {}
    for document, decomposition in found:
        ref = decomposition.workload.ref
        if ref in seen:  # one object, two decisions: the plan would count it twice
            problems.append(
                UsageError(f"{document.source}: {ref} is given twice (also in {seen[ref]})")
            )
            continue
        seen[ref] = document.source
        objects.append((document, decomposition))
    if problems:
        for problem in problems[1:]:
            print(f"error: {problem}", file=sys.stderr)
        raise problems[0]
    if not objects:
        raise UsageError(f"no objects found in {', '.join(filenames)}")
    return objects
