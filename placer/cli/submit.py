"""``placer submit``: place workloads on the fleet and dispatch them to the chosen clusters.

    placer submit -f FILE... [fleet options | --snapshot-free] [--policy FILE]... [--dry-run]
                  [--wait[=TIMEOUT]] [--move [--allow-restart]] [--no-create-namespace]
                  [--in-flight-ttl S] [--solver NAME] [--time-limit S] [--seed N]
                  [--queues FILE [--allow-preemption]] [--catalog DIR]... [-o text|json|yaml]

Decomposes every object of the files with its Workload Map definition, gathers the fleet's
node-level capacity (in-flight placements charged), decides all objects in one batch and
server-side applies each to its cluster with placer's placement record
(:mod:`placer.dispatch`). Text output: the decision, for every placed workload the reason each
other cluster was refused, failures with the API server's Status, warnings. JSON: as ``placer
plan``, plus ``decision`` (id), per placement ``dispatched``, ``state``, ``error``,
``attempts``, ``record`` and ``refused``, per unplaced workload ``dispatched: false`` and
``error``, and ``warnings`` and ``timings`` (seconds per step).

With ``--queues FILE`` the decision honours the queues, and each workload left unplaced says
what it would evict (JSON ``preemptions``); ``--allow-preemption`` evicts it and dispatches
the workload (:mod:`placer.dispatch.reclaim`).

``--wait[=TIMEOUT]`` (default 300 s; ``90s``, ``5m`` accepted) then follows each placed
workload's phase (its definition's status mapping) until Running, Completed or Failed.

A workload placer already placed is ``unchanged`` when its manifest is the same; when it
changed, the change is applied where it runs if it still fits there (``updated``, with what
changed: replicas, requests, images, fields), else it fails with the reason and nothing
changes — ``--move`` then places it on another cluster (``moved``; kinds that cannot be
suspended only with ``--allow-restart``). :mod:`placer.dispatch.update` has the rules.

A workload another ``placer`` process is dispatching at the same moment (a retried CI job) is
not sent twice: this one waits for it (up to 35 s) and reports it ``unchanged`` where the other
placed it, or ``in-flight`` if the other is still at it.

Exit code: 0 when every workload is placed (dispatched now, already placed, updated, moved,
accepted by the dry run, or in flight from another placer process) and, with ``--wait``,
settled without failing; 1 otherwise (a change that does not fit, without ``--move``, too).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from placer.cli._decision import (
    add_decision_options,
    add_manifest_option,
    decision_policies,
    decision_queues,
    warn_unknown_clusters,
)
from placer.cli._fleet import add_fleet_options, fleet_config_from_args, report_unreachable
from placer.cli._output import add_output_option, print_data, print_table
from placer.cli._types import MAX_SECONDS, seconds
from placer.cli.definitions import accelerators_for, add_catalog_option, catalog_cache
from placer.errors import EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK, UsageError

__all__ = ["parse_duration", "read_manifests", "register", "run"]

DEFAULT_WAIT = 300.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "submit",
        help="place workloads on the fleet and dispatch them to the chosen clusters",
        description=(
            "Decompose the workloads, gather the fleet's capacity, decide where each goes and "
            "apply it there (server-side apply, field manager placer), with the reasons every "
            "other cluster was refused."
        ),
    )
    add_manifest_option(parser)
    add_fleet_options(parser)
    parser.add_argument(
        "--snapshot-free",
        action="store_true",
        help=(
            "decide without gathering node capacity (no node/pod list rights needed): "
            "clusters filtered by reachability, policy, pins and taints, ranked by policy "
            "preference; the member's scheduler does the fitting"
        ),
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="decide and ask the chosen clusters for a server-side dry run; change nothing",
    )
    parser.add_argument(
        "--wait",
        nargs="?",
        const=str(DEFAULT_WAIT),
        default=None,
        metavar="TIMEOUT",
        help=f"follow each workload's phase until Running/Completed/Failed "
        f"(default timeout {DEFAULT_WAIT:g}s; e.g. --wait=90s, --wait=5m)",
    )
    parser.add_argument(
        "--move",
        action="store_true",
        help="a changed workload that no longer fits its cluster is moved to another one (the "
        "new copy is applied suspended, the old one removed, then the new one resumed)",
    )
    parser.add_argument(
        "--allow-restart",
        action="store_true",
        help="with --move: also move kinds that cannot be suspended (the old copy is removed "
        "before the new one is applied)",
    )
    parser.add_argument(
        "--pin-nodes",
        action="store_true",
        help="write the decision's node plan into the pod templates as required node "
        "affinity (the member's scheduler may then bind each pod only to its planned nodes)",
    )
    parser.add_argument(
        "--allow-preemption",
        action="store_true",
        help="with --queues: evict placed work for the workloads the queues entitle that no "
        "cluster has room for (reclaim, preempt: docs/queues.md); without it submit only says "
        "what it would evict",
    )
    parser.add_argument(
        "--no-create-namespace",
        dest="create_namespace",
        action="store_false",
        help="fail on a cluster where the workload's namespace does not exist",
    )
    parser.add_argument(
        "--in-flight-ttl",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="how long this submission's in-flight entries count at most while its pods do "
        "not appear (default 600)",
    )
    add_decision_options(parser)
    add_catalog_option(parser)
    add_output_option(parser)
    parser.set_defaults(func=run)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h`` -> seconds (positive)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", text)
    if not match:
        raise UsageError(f"--wait: {text!r} is not a duration (e.g. 90, 90s, 5m)")
    value = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
    if not 0 < value <= MAX_SECONDS:
        raise UsageError(f"--wait: the timeout must be positive and at most {MAX_SECONDS:g} s")
    return value


def refuse_spread(workloads: Any, policies: Any, args: argparse.Namespace) -> None:
    """Spread workloads (a policy's replicaScheduling) need the members' capacity for their
    division: not with ``--snapshot-free`` or ``--queues``."""
    from placer.dispatch.spread import spreads

    if not args.snapshot_free and getattr(args, "queues", None) is None:
        return
    option = "--snapshot-free" if args.snapshot_free else "--queues"
    for workload in workloads:
        if spreads(workload, policies):
            raise UsageError(
                f"{workload.ref}: its policy spreads it over clusters (replicaScheduling), "
                f"which cannot be combined with {option} yet",
                hint="submit it without that option; see docs/spread.md",
            )


def read_manifests(
    filenames: Sequence[str], catalog_dirs: Sequence[str], accelerators: Any = None
) -> list[Any]:
    """Every object of every file as a :class:`placer.dispatch.Manifest`; all problems are
    reported together (the first one raised). ``accelerators``: the fleet file's table."""
    from placer.accelerators import is_claim_object
    from placer.definitions import Catalog
    from placer.definitions.documents import is_dependency
    from placer.dispatch import Manifest
    from placer.dispatch.dependencies import attach
    from placer.objects import name_of

    describe = importlib.import_module("placer.cli.describe")
    catalog = Catalog.load(catalog_dirs, cache=catalog_cache())
    if accelerators is not None:
        catalog = catalog.with_accelerators(accelerators)
    manifests: list[Manifest] = []
    seen: dict[Any, str] = {}
    documents = [d for filename in filenames for d in describe.read_manifests(filename)]
    claims = sum(1 for d in documents if is_claim_object(d.data))
    if claims:
        print(
            f"warning: {claims} DRA claim object(s) in the input count toward their pods' "
            "devices but are not dispatched: create them on the chosen cluster",
            file=sys.stderr,
        )
    carried = tuple(d.data for d in documents if is_dependency(d.data))
    documents = [d for d in documents if not is_dependency(d.data)]
    found, problems = describe.decompose_all(documents, catalog)
    for document, decomposition in found:
        ref = decomposition.ref
        if ref in seen:
            problems.append(
                UsageError(f"{document.source}: {ref} is given twice (also in {seen[ref]})")
            )
            continue
        seen[ref] = document.source
        manifests.append(Manifest(document.data, decomposition, document.source, carried))
    if problems:
        for problem in problems[1:]:
            print(f"error: {problem}", file=sys.stderr)
        raise problems[0]
    if not manifests:
        raise UsageError(f"no objects found in {', '.join(filenames)}")
    named = {
        (d.kind, d.name) for needs in attach(manifests, carried).values() for d, _ in needs.supplied
    }
    for obj in carried:
        if (obj.get("kind"), name_of(obj)) not in named:
            print(
                f"warning: {obj.get('kind')} {name_of(obj)} in the input is named by no "
                "workload's pods: not dispatched",
                file=sys.stderr,
            )
    return manifests


#: phases of a workload that holds no capacity any more (it does not count toward its queue).
_DONE_PHASES = frozenset({"Completed", "Succeeded", "Failed"})


def placed_copies(clients: Any, catalog_dirs: Sequence[str]) -> list[Any]:
    """The work placer placed on the members (a placement record, not finished, not suspended
    by an eviction), as :class:`~placer.dispatch.reclaim.PlacedCopy`."""
    from placer.definitions import Catalog
    from placer.dispatch.eviction import ANNOTATION_PREEMPTED_BY
    from placer.dispatch.reclaim import PlacedCopy
    from placer.dispatch.scaling import running_workload
    from placer.inventory import list_workloads
    from placer.timestamps import parse_rfc3339

    inventory = list_workloads(clients, Catalog.load(catalog_dirs))
    for warning in inventory.warnings:
        print(f"warning: queues' usage: {warning}", file=sys.stderr)
    return [
        PlacedCopy(
            running_workload(live.decomposition),  # an elastic one at its running count
            live.cluster,
            live.object,
            live.definition,
            parse_rfc3339(live.record.placed_at) or 0.0,
        )
        for live in inventory.workloads
        if live.record is not None
        and live.decomposition is not None
        and not _DONE_PHASES.intersection(live.phases)
        and ANNOTATION_PREEMPTED_BY not in (live.metadata.get("annotations") or {})
    ]


def placed_work(clients: Any, catalog_dirs: Sequence[str]) -> list[Any]:
    """The work placer placed on the members (:func:`placed_copies`), as
    :class:`~placer.solver.fairshare.Running` for the queues' usage."""
    return as_running(placed_copies(clients, catalog_dirs))


def as_running(placed: Sequence[Any]) -> list[Any]:
    """``placed`` (:func:`placed_copies`) as :class:`~placer.solver.fairshare.Running`; the
    fair-share module is imported only when there is some (a submit without queues has none)."""
    if not placed:
        return []
    from placer.solver.fairshare import Running

    return [Running(p.workload, p.cluster) for p in placed]


def run(args: argparse.Namespace) -> int:
    from placer.dispatch.ledger import DEFAULT_TTL
    from placer.dispatch.options import MoveOptions
    from placer.dispatch.submit import submit
    from placer.fleet import member_clients

    policies = decision_policies(args)
    wait = parse_duration(args.wait) if args.wait is not None else None
    ttl = DEFAULT_TTL if args.in_flight_ttl is None else args.in_flight_ttl
    if not ttl > 0:
        raise UsageError(f"--in-flight-ttl must be positive, got {ttl:g}")
    if wait is not None and args.dry_run:
        raise UsageError("--wait cannot be combined with --dry-run (nothing is created)")
    if args.allow_restart and not args.move:
        raise UsageError("--allow-restart only applies to moves: add --move")
    if args.allow_preemption and not args.queues:
        raise UsageError("--allow-preemption goes with --queues FILE (docs/queues.md)")
    manifests = read_manifests(args.filename, args.catalog, accelerators_for(args))
    refuse_spread([m.workload for m in manifests], policies, args)
    config = fleet_config_from_args(args)
    warn_unknown_clusters(policies, config.names)
    queues = decision_queues(args)
    with member_clients(config) as clients:
        placed = placed_copies(clients, args.catalog) if queues is not None else []
        running = as_running(placed)
        report = submit(
            manifests,
            config,
            clients,
            policies=policies,
            dry_run=args.dry_run,
            create_namespaces=args.create_namespace,
            snapshot_free=args.snapshot_free,
            solver=args.solver,
            time_limit=args.time_limit,
            seed=args.seed,
            in_flight_ttl=ttl,
            queues=queues,
            running=running,
            moves=MoveOptions(move=args.move, allow_restart=args.allow_restart),
            pin_nodes=args.pin_nodes,
        )
        preemptions: list[Any] = []
        if queues is not None and not args.snapshot_free:
            report, preemptions = _preempt(args, report, manifests, placed, clients, queues)
        report_unreachable(report.fleet)
        workloads = {m.ref: m.workload for m in manifests}
        if args.output != "text":
            data = report_to_dict(report, workloads)
            if queues is not None:
                data["preemptions"] = [p.to_dict() for p in preemptions]
            print_data(data, args.output)
        else:
            render(report, workloads=workloads)
            for preemption in preemptions:
                print(preemption.describe())
        for warning in report.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        code = EXIT_OK if report.ok else EXIT_ERROR
        if not any(c.reachable for c in report.fleet.clusters):
            code = EXIT_NOT_FOUND  # nothing reachable: the decision above placed nothing
        if wait is not None:
            code = max(code, _wait(report, manifests, clients, wait))
    return code


def _preempt(
    args: argparse.Namespace,
    report: Any,
    manifests: Sequence[Any],
    placed: Sequence[Any],
    clients: Any,
    queues: Any,
) -> tuple[Any, list[Any]]:
    """What the workloads left unplaced would evict; with ``--allow-preemption`` (not in a dry
    run), evicted and the preemptors dispatched (:mod:`placer.dispatch.reclaim`)."""
    from dataclasses import replace

    from placer.dispatch import DispatchOptions
    from placer.dispatch.ledger import DEFAULT_TTL
    from placer.dispatch.reclaim import preempt_unplaced

    options = DispatchOptions(
        policies=tuple(decision_policies(args)),
        create_namespaces=args.create_namespace,
        in_flight_ttl=DEFAULT_TTL if args.in_flight_ttl is None else args.in_flight_ttl,
        solver=args.solver,
        time_limit=args.time_limit,
        seed=args.seed,
        schedulers=fleet_config_from_args(args).schedulers,
        pin_nodes=args.pin_nodes,
    )
    allow = args.allow_preemption and not args.dry_run
    preemptions, outcomes = preempt_unplaced(
        manifests,
        report.outcomes,
        report.fleet,
        placed,
        clients,
        queues,
        options,
        allow=allow,
        ledger=report.ledger,
    )
    if not allow:
        return report, preemptions
    now = {o.workload: o for o in outcomes if o.placed and o.placement is not None}
    decision = report.decision
    decision = replace(
        decision,
        placements=(*decision.placements, *(o.placement for o in now.values())),
        unplaced=tuple(u for u in decision.unplaced if u.workload not in now),
        summary=replace(decision.summary, placed=decision.summary.placed + len(now)),
    )
    return replace(report, decision=decision, outcomes=tuple(outcomes)), preemptions


# --------------------------------------------------------------------------------------------
# output


def report_to_dict(report: Any, workloads: Mapping[Any, Any] | None = None) -> dict[str, Any]:
    """``placer plan``'s JSON plus the dispatch fields (see the module docstring); with
    ``workloads`` (ref -> Workload), each placed elastic workload's ``elastic`` counts (chosen
    and range per component, as ``placer plan`` gives them)."""
    from placer.solver.elastic import chosen_counts
    from placer.solver.report import decision_to_dict

    data = decision_to_dict(report.decision)
    outcomes = {o.workload: o for o in report.outcomes}
    for item, placement in zip(data["placements"], report.decision.placements, strict=True):
        outcome = outcomes[placement.workload].copy_on(placement.cluster)
        item["state"] = outcome.state
        item["dispatched"] = outcome.dispatched
        item["error"] = outcome.error or None
        item["attempts"] = [a.to_dict() for a in outcome.attempts]
        item["record"] = outcome.record.to_dict() if outcome.record else None
        item["refused"] = dict(report.refused.get(placement.workload, {}))
        workload = (workloads or {}).get(placement.workload)
        counts = chosen_counts(workload, placement) if workload is not None else []
        if counts:
            item["elastic"] = [c.as_dict() for c in counts]
        if outcome.notes:
            item["notes"] = list(outcome.notes)
        _change_fields(item, outcome)
        if outcome.handoff:
            item["handoff"] = dict(outcome.handoff)
    for item, unplaced in zip(data["unplaced"], report.decision.unplaced, strict=True):
        outcome = outcomes[unplaced.workload]
        item["state"] = outcome.state
        item["dispatched"] = False
        item["error"] = outcome.error or None
        item["attempts"] = [a.to_dict() for a in outcome.attempts]
        if outcome.copies:
            item["copies"] = [
                {"cluster": c.cluster, "state": c.state, "error": c.error or None}
                for c in outcome.copies
            ]
        _change_fields(item, outcome)
    return {
        "decision": report.decision_id,
        **data,
        "warnings": list(report.warnings),
        "timings": dict(report.timings),
    }


def _change_fields(item: dict[str, Any], outcome: Any) -> None:
    """``changes``, ``previous`` (the copy's record before) and ``movedFrom`` of a changed
    workload (updated, moved, or not changed for a reason)."""
    if outcome.changes:
        item["changes"] = list(outcome.changes)
    if outcome.previous is not None:
        item["previous"] = outcome.previous.to_dict()
    if outcome.moved_from:
        item["movedFrom"] = outcome.moved_from


def render(report: Any, out: Any = None, workloads: Mapping[Any, Any] | None = None) -> None:
    """The text report: decision table, refusals per placed workload (with ``workloads``, ref
    -> Workload: each elastic component's chosen count against its range), failures,
    summary."""
    from placer.accelerators import gpu_text
    from placer.quantity import CPU, MEMORY, format_quantity
    from placer.solver.elastic import chosen_counts

    stream = out or sys.stdout
    decision = report.decision
    outcomes = {o.workload: o for o in report.outcomes}
    stream.write(f"Decision {report.decision_id}\n\n")
    if decision.placements:
        rows = [["WORKLOAD", "CLUSTER", "PODS", "GPUS", "CPU", "MEMORY", "STATE"]]
        for p in decision.placements:
            outcome = outcomes[p.workload].copy_on(p.cluster)
            rows.append(
                [
                    str(p.workload),
                    p.cluster,
                    str(len(p.pods)),
                    gpu_text(p.requests),
                    format_quantity(CPU, p.requests.get(CPU, 0)),
                    format_quantity(MEMORY, p.requests.get(MEMORY, 0)),
                    outcome.state,
                ]
            )
        print_table(rows, stream)
    for p in decision.placements:
        outcome = outcomes[p.workload].copy_on(p.cluster)
        refused = report.refused.get(p.workload, {})
        lines: list[str] = []
        workload = (workloads or {}).get(p.workload)
        for count in chosen_counts(workload, p) if workload is not None else []:
            lines.append(
                f"  {count.label} at {count.chosen} of max {count.max} replicas "
                f"(elastic, min {count.min})"
            )
        for attempt in outcome.attempts:
            lines.append(f"  {attempt.cluster}: dispatch failed: {attempt.error}")
        if outcome.state == "unchanged":
            when = f" (decision {outcome.record.decision})" if outcome.record else ""
            lines.append(f"  already placed on {p.cluster}{when}: nothing sent")
        elif outcome.changes:
            was = f" (was decision {outcome.previous.decision})" if outcome.previous else ""
            verb = {"updated": "updated on", "moved": "moved to"}.get(outcome.state, "on")
            lines.append(f"  {verb} {p.cluster}{was}:")
            lines += [f"    {change}" for change in outcome.changes]
        width = max((len(c) for c in refused), default=0)
        for cluster, text in refused.items():
            lines.append(f"  {cluster.ljust(width)}  refused: {text}")
        for note in outcome.notes:
            lines.append(f"  note: {note}")
        if lines:
            stream.write(f"\n{p.workload} -> {p.cluster}\n" + "\n".join(lines) + "\n")
    for unplaced in decision.unplaced:
        outcome = outcomes[unplaced.workload]
        status = "in flight" if outcome.state == "in-flight" else "not placed"
        if outcome.previous is not None:
            status = f"not changed (still on {outcome.cluster})"
        stream.write(f"\n{unplaced.workload}: {status}\n")
        for change in outcome.changes:
            stream.write(f"  change: {change}\n")
        for attempt in outcome.attempts:
            stream.write(f"  {attempt.cluster}: dispatch failed: {attempt.error}\n")
        tried = {a.cluster for a in outcome.attempts}
        width = max((len(c) for c in unplaced.reasons), default=0)
        for cluster, text in unplaced.reasons.items():
            if cluster in tried:
                continue
            stream.write(f"  {cluster.ljust(width)}  {text}\n")
        if outcome.error and not unplaced.reasons:
            stream.write(f"  {outcome.error}\n")
    summary = decision.summary
    counts: dict[str, int] = {}
    for outcome in report.outcomes:
        counts[outcome.state] = counts.get(outcome.state, 0) + 1
    states = ", ".join(f"{n} {state}" for state, n in counts.items())
    stream.write(
        f"\n{summary.placed} of {summary.workloads} workload(s) placed ({states}); "
        f"solver {summary.solver}, {summary.status}, {summary.seconds:.3f} s\n"
    )


def _wait(report: Any, manifests: Sequence[Any], clients: Any, timeout: float) -> int:
    """Follow the placed workloads' phases (progress on stderr); 1 if any did not settle."""
    from placer.dispatch.wait import wait_for

    definitions = {m.ref: m.decomposition.definition for m in manifests}
    targets = [
        (c.workload, c.cluster, definitions[c.workload])
        for o in report.outcomes
        if o.placed
        for c in (o.copies or (o,))
        if c.cluster and c.cluster in clients
    ]
    if not targets:
        return 0

    def changed(ref: Any, cluster: str, phases: tuple[str, ...]) -> None:
        print(f"{ref} on {cluster}: {','.join(phases) or 'Undefined'}", file=sys.stderr)

    results = wait_for(targets, clients, timeout=timeout, on_change=changed)
    code = 0
    for waited in results:
        if not waited.settled:
            print(
                f"error: {waited.workload} on {waited.cluster}: {waited.problem}", file=sys.stderr
            )
            code = 1
        elif "Failed" in waited.phases:
            print(f"error: {waited.workload} on {waited.cluster}: Failed", file=sys.stderr)
            code = 1
    return code
